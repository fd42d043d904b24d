"""Write throughput of tf_reverb vs dm-reverb 0.14, side by side.

Writers run in this process, the server in another one. Workloads:
  * small: steps of a few floats, one 1-step item per step;
  * large: 84x84x4 uint8 frames (random, incompressible), one 10-step item per
    step, consecutive items sharing chunks.
Methods: Client.insert (small only), TrajectoryWriter, legacy Writer.
items/s counts created items; MB/s counts step payload appended.

  .venv/bin/python benchmarks/write_throughput.py [--seconds 2] [--no_dm]
      [--dm_python /path/to/dm-venv/bin/python] [--repeats 3] [--metrics] [--baseline DIR]

--metrics also measures tf_reverb with Prometheus metrics on (its server
scraped every second) and prints the change against metrics off;
--baseline DIR also measures the tf_reverb checkout at DIR (its .venv and
build, e.g. the main branch) and prints this build's change against it.

Ratios are what matter: absolute figures on a shared 2-core machine are noise.
The implementations are measured alternately `--repeats` times and the best
rate of each is kept, so a burst of load from elsewhere does not decide a
ratio.
"""

import json
import subprocess
import sys
import time

import side_by_side

SEQUENCE = {'small': 1, 'large': 10}


def import_reverb(impl):
  if impl.startswith('ours') or impl == 'baseline':
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  else:
    import reverb  # pylint: disable=g-import-not-at-top
  return reverb


def tables(reverb):
  return [
    reverb.Table(
      size,
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      max_size=1000,
      rate_limiter=reverb.rate_limiters.MinSize(1),
    )
    for size in SEQUENCE
  ]


def serve(impl, port):
  reverb = import_reverb(impl)
  _server = side_by_side.make_server(
    reverb, impl, tables(reverb), port
  )  # Serves until killed.
  print('serving', flush=True)
  while True:
    time.sleep(3600)


def steps(size, np, n=64):
  rng = np.random.default_rng(0)
  if size == 'small':
    return [
      {
        'obs': rng.normal(size=(4,)).astype(np.float32),
        'action': np.int32(i % 4),
        'reward': np.float32(i),
      }
      for i in range(n)
    ]
  return [
    {
      'obs': rng.integers(0, 256, (84, 84, 4), dtype=np.uint8),
      'action': np.int32(i % 4),
      'reward': np.float32(i),
    }
    for i in range(n)
  ]


def timed(fn, seconds):
  fn()  # warm-up
  done, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    done += fn()
  return done / (time.perf_counter() - start)


def measure(impl, seconds):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import portpicker  # pylint: disable=g-import-not-at-top

  reverb = import_reverb(impl)
  port = portpicker.pick_unused_port()
  process = subprocess.Popen(
    [sys.executable, __file__, '--serve', str(port), '--impl', impl],
    stdout=subprocess.PIPE,
    text=True,
  )
  assert process.stdout.readline().startswith('serving')
  client = reverb.Client(f'localhost:{port}')
  client.server_info(timeout=60)
  results = []
  try:
    for size, length in SEQUENCE.items():
      data = steps(size, np)
      step_mb = sum(np.asarray(v).nbytes for v in data[0].values()) / 1e6
      n = 256 if size == 'small' else 32

      def trajectory_writer():
        with client.trajectory_writer(num_keep_alive_refs=length) as writer:
          for i in range(n):
            writer.append(data[i % len(data)])
            if i + 1 >= length:
              writer.create_item(
                size, 1.0, {k: writer.history[k][-length:] for k in data[0]}
              )
        return n - length + 1

      def legacy_writer():
        with client.writer(max_sequence_length=length) as writer:
          for i in range(n):
            writer.append(data[i % len(data)])
            if i + 1 >= length:
              writer.create_item(size, length, 1.0)
        return n - length + 1

      def insert():
        for i in range(n):
          client.insert(data[i % len(data)], {size: 1.0})
        return n

      runs = [
        ('TrajectoryWriter', trajectory_writer),
        ('legacy Writer', legacy_writer),
      ]
      if size == 'small':
        runs.append(('Client.insert', insert))
      for method, fn in runs:
        items = timed(fn, seconds)
        # Each item adds one new step.
        results.append(
          dict(
            impl=impl,
            size=size,
            method=method,
            items_per_s=items,
            mb_per_s=items * step_mb,
          )
        )
  finally:
    process.kill()
    process.wait()
  return results


def main():
  args = side_by_side.parse_args()
  if args.serve is not None:
    serve(args.impl, args.serve)
    return
  if args.measure:
    print(json.dumps(measure(args.impl, args.seconds)))
    return
  by_key = side_by_side.best_results(__file__, args, ('impl', 'size', 'method'))
  print(
    f'{"workload":8} {"method":18} {"ours items/s":>13} {"ours MB/s":>10} '
    f'{"dm items/s":>11} {"dm MB/s":>8} {"ratio":>6}'
  )
  for (impl, size, method), r in by_key.items():
    if impl != 'ours':
      continue
    dm = by_key.get(('dm', size, method))
    ratio = f'{r["items_per_s"] / dm["items_per_s"]:.2f}' if dm else '-'
    print(
      f'{size:8} {method:18} {r["items_per_s"]:13,.0f} {r["mb_per_s"]:10.1f} '
      f'{(dm or {}).get("items_per_s", 0):11,.0f} '
      f'{(dm or {}).get("mb_per_s", 0):8.1f} {ratio:>6}'
    )
  side_by_side.print_metrics_cost(by_key)


if __name__ == '__main__':
  main()
