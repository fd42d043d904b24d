"""Sampling throughput of tf_reverb vs dm-reverb 0.14, side by side.

Measures items/s and MB/s (uncompressed item payload) for small and large
items, read through Client.sample, TrajectoryDataset (batch 64) and, for
tf_reverb only, NumpyIterator (batch 64), with the server in the same process
and in another process. The same code drives both libraries (tf_reverb is a
drop-in for `import reverb`); dm-reverb runs under its own Python (TF 2.15):
--dm_python, else $TF_REVERB_DM_PYTHON, else scripts/setup_dm_reverb.sh.
TrajectoryDataset(...).batch(64) takes our fused batch path (decoded straight
into the batch tensors); dm-reverb batches per element.

  .venv/bin/python benchmarks/sample_throughput.py [--seconds 2] [--no_dm]

Ratios are what matter: absolute figures on a shared 2-core machine are
noise, so both libraries are measured in one run.
"""

import json
import subprocess
import sys
import time

import side_by_side


# name -> (step builder args): small ~ a low-dimensional control transition,
# large ~ a stack of 4 Atari frames (random bytes: incompressible).
SIZES = {
    'small': dict(obs=(8,), dtype='float32'),
    'large': dict(obs=(4, 84, 84), dtype='uint8'),
}
NUM_ITEMS = {'small': 1000, 'large': 200}
BATCH = 64


def make_step(size, i, np):
  spec = SIZES[size]
  rng = np.random.default_rng(i)
  if spec['dtype'] == 'uint8':
    obs = rng.integers(0, 256, spec['obs'], dtype=np.uint8)
  else:
    obs = rng.normal(size=spec['obs']).astype(spec['dtype'])
  return {'obs': obs, 'action': np.int32(i % 4), 'reward': np.float32(i)}


def item_bytes(size, np):
  step = make_step(size, 0, np)
  return sum(np.asarray(v).nbytes for v in step.values())


def tables(reverb):
  return [reverb.Table(size, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                       max_size=10_000, rate_limiter=reverb.rate_limiters.MinSize(1))
          for size in SIZES]


def import_reverb(impl):
  if impl == 'ours':
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  else:
    import reverb  # pylint: disable=g-import-not-at-top
  return reverb


def serve(impl, port):
  """Runs a server with the benchmark tables until killed."""
  reverb = import_reverb(impl)
  server = reverb.Server(tables(reverb), port=port)
  print('serving', server.port if hasattr(server, 'port') else port, flush=True)
  while True:
    time.sleep(3600)


def timed(fn, seconds):
  """Runs fn() (returns items done) repeatedly for ~seconds; items/s."""
  fn()  # warm-up
  done, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    done += fn()
  return done / (time.perf_counter() - start)


def measure(impl, where, seconds):
  """Measurements of one library with the server `where`."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  reverb = import_reverb(impl)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  process = None
  if where == 'same process':
    server = reverb.Server(tables(reverb))
    port = server.port
  else:
    import portpicker  # pylint: disable=g-import-not-at-top
    port = portpicker.pick_unused_port()
    process = subprocess.Popen(
        [sys.executable, __file__, '--serve', str(port), '--impl', impl],
        stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().startswith('serving')
  address = f'localhost:{port}'
  client = reverb.Client(address)
  client.server_info(timeout=60)
  results = []
  try:
    for size in SIZES:
      for i in range(NUM_ITEMS[size]):
        client.insert(make_step(size, i, np), {size: 1.0})
      mb = item_bytes(size, np) / 1e6
      step = make_step(size, 0, np)
      keys = sorted(step)
      dtypes = tuple(tf.as_dtype(np.asarray(step[k]).dtype) for k in keys)
      shapes = tuple(tf.TensorShape((1,) + np.asarray(step[k]).shape) for k in keys)
      n = 256 if size == 'small' else 64

      def client_sample():
        for _ in client.sample(size, num_samples=n, emit_timesteps=False):
          pass
        return n

      dataset = reverb.TrajectoryDataset(
          address, size, dtypes, shapes, max_in_flight_samples_per_worker=100
      ).batch(BATCH)
      iterator = iter(dataset)

      def trajectory_dataset():
        for _ in range(4):
          next(iterator)
        return 4 * BATCH

      # The same pipeline consumed inside a tf.function, as a training loop
      # does: TF's per-call eager overhead (~0.2 ms per next()) is paid once
      # per 16 batches instead of once per batch.
      graph_iterator = iter(reverb.TrajectoryDataset(
          address, size, dtypes, shapes, max_in_flight_samples_per_worker=100
      ).batch(BATCH))

      @tf.function
      def consume(it):
        total = tf.constant(0, tf.int64)
        for _ in tf.range(16):
          total += tf.size(next(it).info.key, out_type=tf.int64)
        return total

      def trajectory_dataset_in_graph():
        return int(consume(graph_iterator))

      runs = [('Client.sample', client_sample),
              ('TrajectoryDataset(batch 64)', trajectory_dataset),
              ('TrajectoryDataset(batch 64) in tf.function',
               trajectory_dataset_in_graph)]
      if impl == 'ours':
        numpy_iterator = reverb.NumpyIterator(
            address, size, BATCH, max_in_flight_samples_per_worker=100)

        def numpy_batches():
          for _ in range(4):
            next(numpy_iterator)
          return 4 * BATCH

        runs.append(('NumpyIterator(batch 64)', numpy_batches))
      for method, fn in runs:
        rate = timed(fn, seconds)
        results.append(dict(impl=impl, where=where, size=size, method=method,
                            items_per_s=rate, mb_per_s=rate * mb))
      del iterator, graph_iterator
      if impl == 'ours':
        numpy_iterator.close()
  finally:
    if process is not None:
      process.kill()
      process.wait()
    elif hasattr(server, 'stop'):
      server.stop()
  return results


def main():
  args = side_by_side.parse_args()
  if args.serve is not None:
    serve(args.impl, args.serve)
    return
  if args.measure:
    results = []
    for where in ('same process', 'other process'):
      results += measure(args.impl, where, args.seconds)
    print(json.dumps(results))
    return

  by_key = side_by_side.best_results(__file__, args, ('impl', 'where', 'size', 'method'))
  print(f'{"server":14} {"size":6} {"method":28} {"tf_reverb items/s":>18} '
        f'{"MB/s":>8} {"dm-reverb items/s":>18} {"MB/s":>8} {"ratio":>7}')
  for (impl, where, size, method), r in by_key.items():
    if impl != 'ours':
      continue
    dm = by_key.get(('dm', where, size, method))
    dm_cols = (f'{dm["items_per_s"]:18,.0f} {dm["mb_per_s"]:8.1f} '
               f'{r["items_per_s"] / dm["items_per_s"]:6.2f}x') if dm else (
                   f'{"-":>18} {"-":>8} {"-":>7}')
    print(f'{where:14} {size:6} {method:28} {r["items_per_s"]:18,.0f} '
          f'{r["mb_per_s"]:8.1f} {dm_cols}')
  for where in ('same process', 'other process'):
    for size in SIZES:
      ours_ds = by_key.get(('ours', where, size, 'TrajectoryDataset(batch 64)'))
      ours_np = by_key.get(('ours', where, size, 'NumpyIterator(batch 64)'))
      if ours_ds and ours_np:
        print(f'NumpyIterator / our TrajectoryDataset ({where}, {size}): '
              f'{ours_np["items_per_s"] / ours_ds["items_per_s"]:.2f}x')


if __name__ == '__main__':
  main()
