"""Write throughput of tf_reverb vs dm-reverb 0.14, side by side.

Writers run in this process, the server in another one. Workloads:
  * small: steps of a few floats, one 1-step item per step;
  * large: 84x84x4 uint8 frames (random, incompressible), one 10-step item per
    step, consecutive items sharing chunks.
Methods: Client.insert (small only), TrajectoryWriter, legacy Writer.
items/s counts created items; MB/s counts step payload appended.

  .venv/bin/python benchmarks/write_throughput.py [--seconds 2] [--no_dm]
      [--dm_python /path/to/dm-venv/bin/python] [--repeats 3]

Ratios are what matter: absolute figures on a shared 2-core machine are noise.
The implementations are measured alternately `--repeats` times and the best
rate of each is kept, so a burst of load from elsewhere does not decide a
ratio.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQUENCE = {'small': 1, 'large': 10}


def import_reverb(impl):
  if impl == 'ours':
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  else:
    import reverb  # pylint: disable=g-import-not-at-top
  return reverb


def tables(reverb):
  return [reverb.Table(size, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                       max_size=1000, rate_limiter=reverb.rate_limiters.MinSize(1))
          for size in SEQUENCE]


def serve(impl, port):
  reverb = import_reverb(impl)
  server = reverb.Server(tables(reverb), port=port)  # pylint: disable=unused-variable
  print('serving', flush=True)
  while True:
    time.sleep(3600)


def steps(size, np, n=64):
  rng = np.random.default_rng(0)
  if size == 'small':
    return [{'obs': rng.normal(size=(4,)).astype(np.float32),
             'action': np.int32(i % 4), 'reward': np.float32(i)}
            for i in range(n)]
  return [{'obs': rng.integers(0, 256, (84, 84, 4), dtype=np.uint8),
           'action': np.int32(i % 4), 'reward': np.float32(i)}
          for i in range(n)]


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
      stdout=subprocess.PIPE, text=True)
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
              writer.create_item(size, 1.0, {
                  k: writer.history[k][-length:] for k in data[0]})
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

      runs = [('TrajectoryWriter', trajectory_writer),
              ('legacy Writer', legacy_writer)]
      if size == 'small':
        runs.append(('Client.insert', insert))
      for method, fn in runs:
        items = timed(fn, seconds)
        # Each item adds one new step.
        results.append(dict(impl=impl, size=size, method=method,
                            items_per_s=items, mb_per_s=items * step_mb))
  finally:
    process.kill()
    process.wait()
  return results


def dm_python(args):
  if args.dm_python:
    return args.dm_python
  try:
    return subprocess.check_output(
        ['bash', os.path.join(ROOT, 'scripts', 'setup_dm_reverb.sh')],
        text=True).strip().splitlines()[-1]
  except (subprocess.CalledProcessError, OSError):
    return None


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--seconds', type=float, default=2.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument('--dm_python')
  parser.add_argument('--impl', default='ours')
  parser.add_argument('--serve', type=int)
  parser.add_argument('--measure', action='store_true')
  args = parser.parse_args()
  if args.serve is not None:
    serve(args.impl, args.serve)
    return
  if args.measure:
    print(json.dumps(measure(args.impl, args.seconds)))
    return
  pythons = {'ours': sys.executable}
  if not args.no_dm:
    dm = dm_python(args)
    if dm:
      pythons['dm'] = dm
    else:
      print('dm-reverb not available; measuring tf_reverb only')
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3')
  by_key = {}
  for _ in range(max(1, args.repeats)):
    for impl, python in pythons.items():
      out = subprocess.run(
          [python, __file__, '--measure', '--impl', impl, '--seconds',
           str(args.seconds)], capture_output=True, text=True, env=env,
          check=False)
      if out.returncode != 0:
        print(f'{impl} failed:\n{out.stderr[-3000:]}')
        continue
      for r in json.loads(out.stdout.strip().splitlines()[-1]):
        key = (r['impl'], r['size'], r['method'])
        if key not in by_key or r['items_per_s'] > by_key[key]['items_per_s']:
          by_key[key] = r
  print(f'{"workload":8} {"method":18} {"ours items/s":>13} {"ours MB/s":>10} '
        f'{"dm items/s":>11} {"dm MB/s":>8} {"ratio":>6}')
  for (impl, size, method), r in by_key.items():
    if impl != 'ours':
      continue
    dm = by_key.get(('dm', size, method))
    ratio = f'{r["items_per_s"] / dm["items_per_s"]:.2f}' if dm else '-'
    print(f'{size:8} {method:18} {r["items_per_s"]:13,.0f} {r["mb_per_s"]:10.1f} '
          f'{(dm or {}).get("items_per_s", 0):11,.0f} '
          f'{(dm or {}).get("mb_per_s", 0):8.1f} {ratio:>6}')


if __name__ == '__main__':
  main()
