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
      [--repeats 3] [--frames_only] [--frame_kinds K[,K]] [--metrics]
      [--baseline DIR]

--metrics also measures tf_reverb with Prometheus metrics on (its server
scraped every second) and prints the change against metrics off;
--baseline DIR also measures the tf_reverb checkout at DIR (its .venv and
build, e.g. the main branch) and prints this build's change against it.

Frames (issue 15): 10-step items of 84x84x4 uint8 frames (282 KB an item;
'random' incompressible bytes, or 'atari' compressible Atari-like frames),
written with the legacy Writer (chunk_length 10: one chunk per item), and
(issue 30) 'shared', the workload of Acme's sequence adders / R2D2 learners:
random frames, one item over the last 10 steps created at EVERY step with the
TrajectoryWriter (num_keep_alive_refs=10, auto-tuned chunks), so neighbouring
items overlap and share chunks (an item references about 1 + 9/L chunks of L
steps); 200 items (209 steps) for both libraries. All are read by
  TrajectoryDataset.from_table_signature(...,
      max_in_flight_samples_per_worker=128
  ).batch(64, drop_remainder=True).prefetch(2)
iterated eagerly with next(). Printed: MB/s of item payload, the ratio to
dm-reverb (median over the repeats of the ratio within one repeat) and the
fraction of the machine's ceiling, measured in the same repeat by
//benchmarks:loopback_ceiling: a loopback gRPC stream of the same bytes
(282 KB messages, sent from one slice, read by a synchronous client on a
channel advertising 1 MiB HTTP/2 frames, as our sampler reads). Also printed: that stream with each message copied into the
rows of a 64-row batch buffer by the reading thread, and memcpy.
--frames_only measures the frame kinds only; --frame_kinds (comma-separated,
implies --frames_only) only those, e.g. the shared-chunk workload alone:

  .venv/bin/python benchmarks/sample_throughput.py --frame_kinds shared

Ratios are what matter: absolute figures on a shared 2-core machine are
noise, so both libraries are measured in one run.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import side_by_side


# name -> (step builder args): small ~ a low-dimensional control transition,
# large ~ a stack of 4 Atari frames (random bytes: incompressible).
SIZES = {
  'small': dict(obs=(8,), dtype='float32'),
  'large': dict(obs=(4, 84, 84), dtype='uint8'),
}
NUM_ITEMS = {'small': 1000, 'large': 200}
BATCH = 64

# Issue 15's large-item workload: 10-step items of 84x84x4 uint8 frames;
# 'shared' (issue 30): Acme's sequence adders, an item at every step.
SHARED = 'shared'
FRAME_KINDS = ('random', 'atari', SHARED)
FRAME_SHAPE = (84, 84, 4)
FRAME_STEPS = 10
FRAME_ITEMS = 200  # 56 MB of items: well beyond the caches
FRAME_BATCH = 64
FRAME_IN_FLIGHT = 128


def atari_frame(t, np):
  """An 84x84 grayscale frame in the style of Breakout: a score bar, walls,
  rows of bricks, a paddle and a ball that move with t; flat areas, so
  Snappy/zstd compress it well (as real Atari frames)."""
  frame = np.zeros((84, 84), np.uint8)
  frame[0:6, :] = 142  # score bar
  frame[6:84, 0:3] = frame[6:84, 81:84] = 142  # walls
  for row, value in enumerate((200, 180, 160, 140, 120, 100)):
    frame[14 + 3 * row : 16 + 3 * row, 3:81] = value
    frame[
      14 + 3 * row : 16 + 3 * row,
      3 + (7 * t + 11 * row) % 70 : 10 + (7 * t + 11 * row) % 70,
    ] = 0  # bricks knocked out
  x = 3 + (3 * t) % 66
  frame[78:80, x : x + 12] = 200  # paddle
  by, bx = 34 + (5 * t) % 40, 3 + (4 * t) % 76
  frame[by : by + 2, bx : bx + 2] = 255  # ball
  return frame


def frame_step(kind, t, np):
  if kind == 'random':
    obs = np.random.default_rng(t).integers(0, 256, FRAME_SHAPE, dtype=np.uint8)
  else:  # the last 4 frames, stacked on the last axis as DQN does
    obs = np.stack([atari_frame(t - k, np) for k in range(4)], axis=-1)
  return {'obs': obs, 'action': np.int32(t % 4), 'reward': np.float32(t % 3)}


def frame_table_name(kind):
  return f'frames_{kind}'


def frame_signature(tf, kind='random'):
  """The signature of the table of frame kind `kind`."""
  if kind == SHARED:
    return {'frame': tf.TensorSpec((FRAME_STEPS,) + FRAME_SHAPE, tf.uint8)}
  return {
    'obs': tf.TensorSpec((FRAME_STEPS,) + FRAME_SHAPE, tf.uint8),
    'action': tf.TensorSpec((FRAME_STEPS,), tf.int32),
    'reward': tf.TensorSpec((FRAME_STEPS,), tf.float32),
  }


def frame_item_bytes(kind='random'):
  """Uncompressed payload of an item of frame kind `kind`."""
  frames = FRAME_STEPS * int(__import__('numpy').prod(FRAME_SHAPE))
  return frames if kind == SHARED else frames + FRAME_STEPS * (4 + 4)


def write_frames(client: Any, kind: str, np: Any) -> None:
  """Fills the table of `kind` with FRAME_ITEMS items.

  random/atari: the legacy Writer, one 10-step chunk per item. shared: the
  TrajectoryWriter as Acme's sequence adders use it, an item over the last
  FRAME_STEPS steps at every step once that many exist (FRAME_ITEMS +
  FRAME_STEPS - 1 steps), chunked as the writer auto-tunes.
  """
  table = frame_table_name(kind)
  if kind != SHARED:
    with client.writer(
      max_sequence_length=FRAME_STEPS, chunk_length=FRAME_STEPS
    ) as writer:
      for i in range(FRAME_ITEMS):
        for t in range(FRAME_STEPS):
          writer.append(frame_step(kind, i * FRAME_STEPS + t, np))
        writer.create_item(table, FRAME_STEPS, 1.0)
    return
  with client.trajectory_writer(num_keep_alive_refs=FRAME_STEPS) as writer:
    for t in range(FRAME_ITEMS + FRAME_STEPS - 1):
      frame = np.random.default_rng(t).integers(
        0, 256, FRAME_SHAPE, dtype=np.uint8
      )
      writer.append({'frame': frame})
      if t + 1 >= FRAME_STEPS:
        writer.create_item(
          table,
          priority=1.0,
          trajectory={'frame': writer.history['frame'][-FRAME_STEPS:]},
        )
    writer.flush()


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
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  return [
    reverb.Table(
      size,
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      max_size=10_000,
      rate_limiter=reverb.rate_limiters.MinSize(1),
    )
    for size in SIZES
  ] + [
    reverb.Table(
      frame_table_name(kind),
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      max_size=10_000,
      rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=frame_signature(tf, kind),
    )
    for kind in FRAME_KINDS
  ]


def import_reverb(impl):
  if impl.startswith('ours') or impl == 'baseline':
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  else:
    import reverb  # pylint: disable=g-import-not-at-top
  return reverb


def serve(impl, port):
  """Runs a server with the benchmark tables until killed."""
  reverb = import_reverb(impl)
  server = side_by_side.make_server(reverb, impl, tables(reverb), port)
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


def measure_frames(
  reverb: Any,
  client: Any,
  address: str,
  impl: str,
  where: str,
  seconds: float,
  kinds: Sequence[str] = FRAME_KINDS,
) -> List[Dict[str, Any]]:
  """Issues 15 and 30's workload on the frame `kinds`: the exact input
  pipeline."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  results = []
  for kind in kinds:
    table = frame_table_name(kind)
    write_frames(client, kind, np)
    dataset = (
      reverb.TrajectoryDataset.from_table_signature(
        address, table, max_in_flight_samples_per_worker=FRAME_IN_FLIGHT
      )
      .batch(FRAME_BATCH, drop_remainder=True)
      .prefetch(2)
    )
    iterator = iter(dataset)

    def batches():
      for _ in range(4):
        next(iterator)
      return 4 * FRAME_BATCH

    rate = timed(batches, seconds)
    results.append(
      dict(
        impl=impl,
        where=where,
        size=f'frames/{kind}',
        method='from_table_signature.batch(64).prefetch(2)',
        items_per_s=rate,
        mb_per_s=rate * frame_item_bytes(kind) / 1e6,
      )
    )
    iterator = None  # Release the dataset (batches() is not called again).
  return results


def measure(impl, where, seconds, frames_only=False, kinds=FRAME_KINDS):
  """Measurements of one library with the server `where` (of the frame
  `kinds` only when frames_only)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  reverb = import_reverb(impl)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  process = None
  if where == 'same process':
    server = side_by_side.make_server(reverb, impl, tables(reverb))
    port = server.port
  else:
    import portpicker  # pylint: disable=g-import-not-at-top

    port = portpicker.pick_unused_port()
    process = subprocess.Popen(
      [sys.executable, __file__, '--serve', str(port), '--impl', impl],
      stdout=subprocess.PIPE,
      text=True,
    )
    assert process.stdout.readline().startswith('serving')
  address = f'localhost:{port}'
  client = reverb.Client(address)
  client.server_info(timeout=60)
  results = []
  try:
    results += measure_frames(
      reverb, client, address, impl, where, seconds, kinds
    )
    for size in () if frames_only else SIZES:
      for i in range(NUM_ITEMS[size]):
        client.insert(make_step(size, i, np), {size: 1.0})
      mb = item_bytes(size, np) / 1e6
      step = make_step(size, 0, np)
      keys = sorted(step)
      dtypes = tuple(tf.as_dtype(np.asarray(step[k]).dtype) for k in keys)
      shapes = tuple(
        tf.TensorShape((1,) + np.asarray(step[k]).shape) for k in keys
      )
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
      graph_iterator = iter(
        reverb.TrajectoryDataset(
          address, size, dtypes, shapes, max_in_flight_samples_per_worker=100
        ).batch(BATCH)
      )

      @tf.function
      def consume(it):
        total = tf.constant(0, tf.int64)
        for _ in tf.range(16):
          total += tf.size(next(it).info.key, out_type=tf.int64)
        return total

      def trajectory_dataset_in_graph():
        return int(consume(graph_iterator))

      runs = [
        ('Client.sample', client_sample),
        ('TrajectoryDataset(batch 64)', trajectory_dataset),
        (
          'TrajectoryDataset(batch 64) in tf.function',
          trajectory_dataset_in_graph,
        ),
      ]
      if impl != 'dm':
        numpy_iterator = reverb.NumpyIterator(
          address, size, BATCH, max_in_flight_samples_per_worker=100
        )

        def numpy_batches():
          for _ in range(4):
            next(numpy_iterator)
          return 4 * BATCH

        runs.append(('NumpyIterator(batch 64)', numpy_batches))
      for method, fn in runs:
        rate = timed(fn, seconds)
        results.append(
          dict(
            impl=impl,
            where=where,
            size=size,
            method=method,
            items_per_s=rate,
            mb_per_s=rate * mb,
          )
        )
      iterator = graph_iterator = None  # Release the datasets.
      if impl != 'dm':
        numpy_iterator.close()
  finally:
    if process is not None:
      process.kill()
      process.wait()
    elif hasattr(server, 'stop'):
      server.stop()
  return results


CEILING = os.environ.get('TF_REVERB_CEILING_BIN') or os.path.join(
  side_by_side.ROOT, 'bazel-bin', 'benchmarks', 'loopback_ceiling'
)


def ceiling(seconds):
  """The loopback_ceiling figures (built with Bazel when missing)."""
  if not os.path.exists(CEILING):
    subprocess.run(
      ['bazel', 'build', '-c', 'opt', '//benchmarks:loopback_ceiling'],
      cwd=side_by_side.ROOT,
      check=True,
      capture_output=True,
    )
  out = subprocess.run(
    [
      CEILING,
      '--seconds',
      str(seconds),
      '--message_bytes',
      str(frame_item_bytes()),
      '--batch',
      str(FRAME_BATCH),
    ],
    capture_output=True,
    text=True,
    check=True,
    timeout=300,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])


def run_repeats(args, frames_only, kinds=FRAME_KINDS):
  """Per repeat: the ceiling, then each implementation's --measure run (of
  the frame `kinds`).

  Returns a list (one entry per repeat) of (ceiling, {key: result})."""
  pythons = side_by_side.implementations(args)
  if not args.no_dm:
    dm = side_by_side.dm_python(args)
    if dm:
      pythons['dm'] = dm
    else:
      print('dm-reverb not available; measuring tf_reverb only')
  env = dict(
    os.environ,
    PYTHONPATH=side_by_side.ROOT,
    TF_CPP_MIN_LOG_LEVEL='3',
    TF_REVERB_BENCH_FRAMES_ONLY='1' if frames_only else '',
  )
  repeats = []
  for _ in range(max(1, args.repeats)):
    by_key = {}
    limit = ceiling(args.seconds)
    for impl, python in pythons.items():
      out = subprocess.run(
        [
          python,
          __file__,
          '--measure',
          '--impl',
          impl,
          '--seconds',
          str(args.seconds),
          '--frame_kinds',
          ','.join(kinds),
        ],
        capture_output=True,
        text=True,
        env=side_by_side.environment(args, impl, env),
        check=False,
      )
      if out.returncode != 0:
        print(f'{impl} failed:\n{out.stderr[-3000:]}')
        continue
      for result in json.loads(out.stdout.strip().splitlines()[-1]):
        by_key[
          tuple(result[f] for f in ('impl', 'where', 'size', 'method'))
        ] = result
    repeats.append((limit, by_key))
  return repeats


def print_frames(repeats, kinds=FRAME_KINDS):
  """Issue 15's table: medians over repeats of MB/s and of per-repeat ratios."""
  med = statistics.median
  if SHARED in kinds:
    print(
      f'{SHARED}: {FRAME_ITEMS} items of {FRAME_STEPS} random frames '
      f'({frame_item_bytes(SHARED) / 1e3:.0f} KB), one per step over '
      f'{FRAME_ITEMS + FRAME_STEPS - 1} steps, TrajectoryWriter('
      f'num_keep_alive_refs={FRAME_STEPS}); auto-tuned chunks of L <= '
      f'{FRAME_STEPS} steps (tf_reverb: up to ~256 KiB raw, i.e. '
      f'{256 * 1024 * FRAME_STEPS // frame_item_bytes(SHARED)} frames; '
      f'dm-reverb: AutoTunedChunkerOptions({FRAME_STEPS}, 1.0)), so an item '
      f'references ~1 + {FRAME_STEPS - 1}/L chunks shared with its neighbours'
    )
  ceilings = [c for c, _ in repeats]
  print(
    f'ceiling (median of {len(repeats)}): loopback gRPC stream '
    f'{med(c["grpc_mb_per_s"] for c in ceilings):.0f} MB/s (1 MiB HTTP/2 frames; '
    f'{med(c["grpc_default_frames_mb_per_s"] for c in ceilings):.0f} with the default '
    f'16 KiB), +copy into batch rows by the reader '
    f'{med(c["grpc_copy_mb_per_s"] for c in ceilings):.0f} MB/s, '
    f'memcpy {med(c["memcpy_mb_per_s"] for c in ceilings):.0f} MB/s'
  )
  print(
    f'{"server":14} {"frames":7} {"tf_reverb MB/s":>15} {"dm-reverb MB/s":>15} '
    f'{"ratio":>7} {"of ceiling":>11}   (medians; per-repeat ratios; the '
    f'ceiling is the loopback gRPC stream)'
  )
  for where in ('same process', 'other process'):
    for kind in kinds:
      key = (
        where,
        f'frames/{kind}',
        'from_table_signature.batch(64).prefetch(2)',
      )
      ours = [
        (c, r[('ours',) + key]) for c, r in repeats if ('ours',) + key in r
      ]
      if not ours:
        continue
      dms = [r.get(('dm',) + key) for _, r in repeats]
      ratios = [
        r[('ours',) + key]['mb_per_s'] / r[('dm',) + key]['mb_per_s']
        for _, r in repeats
        if ('ours',) + key in r and ('dm',) + key in r
      ]
      fractions = [o['mb_per_s'] / c['grpc_mb_per_s'] for c, o in ours]
      dm_mb = [d['mb_per_s'] for d in dms if d]
      print(
        f'{where:14} {kind:7} {med(o["mb_per_s"] for _, o in ours):15.0f} '
        f'{(f"{med(dm_mb):15.0f}" if dm_mb else f"{chr(45):>15}")} '
        f'{(f"{med(ratios):6.2f}x" if ratios else f"{chr(45):>7}")} '
        f'{med(fractions):10.0%}   '
        f'({", ".join(f"{x:.2f}" for x in ratios)})'
      )


def pop_frame_kinds(argv: List[str]) -> Optional[List[str]]:
  """Removes --frame_kinds K[,K] (or =K[,K]) from argv; its kinds or None.

  Raises:
    SystemExit: for a missing value or an unknown kind.
  """
  for i, arg in enumerate(argv):
    if arg == '--frame_kinds' or arg.startswith('--frame_kinds='):
      if '=' in arg:
        value = arg.split('=', 1)[1]
        del argv[i]
      elif i + 1 < len(argv):
        value = argv[i + 1]
        del argv[i : i + 2]
      else:
        sys.exit('--frame_kinds needs a value, e.g. --frame_kinds shared')
      kinds = [k for k in value.split(',') if k]
      unknown = [k for k in kinds if k not in FRAME_KINDS]
      if unknown or not kinds:
        sys.exit(
          f'--frame_kinds {value!r}: choose among {", ".join(FRAME_KINDS)}'
        )
      return kinds
  return None


def main():
  frames_only = '--frames_only' in sys.argv
  if frames_only:
    sys.argv.remove('--frames_only')
  selected = pop_frame_kinds(sys.argv)
  frames_only = frames_only or selected is not None
  kinds = selected or list(FRAME_KINDS)
  args = side_by_side.parse_args()
  if args.serve is not None:
    serve(args.impl, args.serve)
    return
  if args.measure:
    results = []
    for where in ('same process', 'other process'):
      results += measure(
        args.impl,
        where,
        args.seconds,
        frames_only=bool(os.environ.get('TF_REVERB_BENCH_FRAMES_ONLY')),
        kinds=kinds,
      )
    print(json.dumps(results))
    return

  repeats = run_repeats(args, frames_only, kinds)
  print_frames(repeats, kinds)
  if frames_only:
    return
  by_key = {}  # the best of the repeats, per figure
  for _, results in repeats:
    for key, result in results.items():
      if (
        key not in by_key or result['items_per_s'] > by_key[key]['items_per_s']
      ):
        by_key[key] = result
  print(
    f'{"server":14} {"size":6} {"method":28} {"tf_reverb items/s":>18} '
    f'{"MB/s":>8} {"dm-reverb items/s":>18} {"MB/s":>8} {"ratio":>7}'
  )
  for (impl, where, size, method), r in by_key.items():
    if impl != 'ours' or size.startswith('frames/'):
      continue
    dm = by_key.get(('dm', where, size, method))
    dm_cols = (
      (
        f'{dm["items_per_s"]:18,.0f} {dm["mb_per_s"]:8.1f} '
        f'{r["items_per_s"] / dm["items_per_s"]:6.2f}x'
      )
      if dm
      else (f'{"-":>18} {"-":>8} {"-":>7}')
    )
    print(
      f'{where:14} {size:6} {method:28} {r["items_per_s"]:18,.0f} '
      f'{r["mb_per_s"]:8.1f} {dm_cols}'
    )
  for where in ('same process', 'other process'):
    for size in SIZES:
      ours_ds = by_key.get(('ours', where, size, 'TrajectoryDataset(batch 64)'))
      ours_np = by_key.get(('ours', where, size, 'NumpyIterator(batch 64)'))
      if ours_ds and ours_np:
        print(
          f'NumpyIterator / our TrajectoryDataset ({where}, {size}): '
          f'{ours_np["items_per_s"] / ours_ds["items_per_s"]:.2f}x'
        )
  side_by_side.print_metrics_cost(by_key)


if __name__ == '__main__':
  main()
