"""Server memory per stored item, tf_reverb against dm-reverb 0.14.

The server process's RSS growth (VmRSS of /proc/<pid>/status, read once
the server has been idle a second, and again after every insert is
confirmed and server_info shows them all in the table) divided by the items
stored, for three tables of small items:

  chunk1   --items (1,000,000) items of 4 float32 each, one chunk per item
           (chunk length 1), inserted by benchmarks/concurrent_load.cc
           (8 writers, one request per item, as paper_grid.py's inserts);
  default  --default_items (1,000,000) items of 4 float32 each, written by
           the implementation's own Python TrajectoryWriter with its
           default chunking (one one-step item per step, episodes of 1,000
           steps; the writer puts several steps in a chunk);
  shared   --shared_items (100,000) items of 10 steps of 4 float32, one
           created every step by the implementation's own Python
           TrajectoryWriter (num_keep_alive_refs=10, episodes of 1,000
           steps): items share chunks, each step is stored once.

Each variant gets a fresh server per implementation (one table, uniform
sampler, FIFO remover, MinSize(1), room for every item): tf_reverb's
reverb_server binary, dm-reverb's Server in its own venv. RSS counts what
the allocator holds, so the figures include its overhead and slack (as an
operator sees them). Every run is bounded by its item count.

  .venv/bin/python benchmarks/memory_per_item.py [--variants chunk1,default,shared]
      [--items 1000000] [--default_items 1000000] [--shared_items 100000]
      [--no_dm] [--dm_python PATH] [--binary PATH] [--json FILE]

Goal of issue 30 (reported, not asserted): tf_reverb's bytes per item <= 0.7x
dm-reverb's.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import concurrent_clients  # noqa: E402
import paper_grid  # noqa: E402
import side_by_side  # noqa: E402

ROOT = concurrent_clients.ROOT
TABLE = 'mem'
MAX_SIZE = 10_000_000
FLOATS = 4
EPISODE = 1000
SHARED_STEPS = 10
DRIVER_WRITERS = 8
GOAL_RATIO = 0.7
VARIANTS = ('chunk1', 'default', 'shared')


def our_config() -> str:
  return paper_grid.our_config([TABLE], MAX_SIZE)


def insert_with_writer(impl: str, address: str, variant: str, items: int):
  """Runs in the implementation's venv: `items` items through its own
  TrajectoryWriter; returns once every one is confirmed."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  if impl == 'dm':
    import reverb  # pylint: disable=g-import-not-at-top
  else:
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

  client = reverb.Client(address)
  keep = 1 if variant == 'default' else SHARED_STEPS
  steps = np.random.default_rng(0).standard_normal((EPISODE, FLOATS))
  steps = steps.astype(np.float32)
  created = 0
  with client.trajectory_writer(num_keep_alive_refs=keep) as writer:
    while created < items:
      for t in range(EPISODE):
        writer.append({'obs': steps[t]})
        if t + 1 >= keep and created < items:
          writer.create_item(TABLE, 1.0, {'obs': writer.history['obs'][-keep:]})
          created += 1
      writer.end_episode(timeout_ms=600_000)
  print(json.dumps({'created': created}), flush=True)


def insert_with_driver(address: str, items: int, driver: str) -> None:
  writers = min(DRIVER_WRITERS, items)
  out = subprocess.run(
    [
      driver,
      f'--target={address}',
      f'--table={TABLE}',
      f'--writers={writers}',
      '--rate=0',
      f'--items={math.ceil(items / writers)}',
      f'--step_floats={FLOATS}',
      '--random_payload',
      '--deadline_seconds=1800',
    ],
    capture_output=True,
    text=True,
    check=False,
    timeout=2000,
  )
  lines = [l for l in out.stdout.splitlines() if '"event":"result"' in l]
  if out.returncode != 0 or not lines:
    raise RuntimeError(f'concurrent_load: {out.stderr[-1000:]}')
  result = json.loads(lines[-1])
  if result['errors'] or result['confirmed'] != result['sent']:
    raise RuntimeError(f'concurrent_load: {result["errors"]}')


def measure(
  impl: str, variant: str, items: int, args: argparse.Namespace, driver: str
) -> Dict[str, Any]:
  server = concurrent_clients.ServerProcess(
    impl,
    args.dm_python,
    args.binary,
    config=our_config(),
    dm_serve=[os.path.abspath(__file__), '--serve_dm'],
    table=TABLE,
  )
  try:
    time.sleep(1.0)
    before = server.rss_mb()
    start = time.monotonic()
    if variant == 'chunk1':
      insert_with_driver(server.address, items, driver)
      items = math.ceil(items / min(DRIVER_WRITERS, items)) * min(
        DRIVER_WRITERS, items
      )
    else:
      python = args.dm_python if impl == 'dm' else sys.executable
      out = subprocess.run(
        [
          python,
          os.path.abspath(__file__),
          '--insert',
          server.address,
          '--impl',
          impl,
          '--variant',
          variant,
          '--n',
          str(items),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3')
        if impl != 'dm'
        else dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
        timeout=3600,
      )
      if out.returncode != 0:
        raise RuntimeError(f'{impl} writer: {out.stderr[-2000:]}')
    seconds = time.monotonic() - start
    size = server.counters()['current_size']
    if size != items:
      raise RuntimeError(f'{impl} {variant}: table holds {size} of {items}')
    time.sleep(1.0)
    after = server.rss_mb()
  finally:
    server.stop()
  grown = (after - before) * 1024 * 1024
  return dict(
    impl=impl,
    variant=variant,
    items=items,
    rss_before_mb=before,
    rss_after_mb=after,
    bytes_per_item=grown / items,
    insert_seconds=seconds,
  )


def serve_dm(port: int) -> None:
  paper_grid.serve_dm(port, [TABLE], MAX_SIZE)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--variants', default=','.join(VARIANTS))
  parser.add_argument('--items', type=int, default=1_000_000)
  parser.add_argument('--default_items', type=int, default=1_000_000)
  parser.add_argument('--shared_items', type=int, default=100_000)
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument('--dm_python')
  parser.add_argument('--binary', default=concurrent_clients.SERVER_BINARY)
  parser.add_argument('--json')
  parser.add_argument('--serve_dm', type=int, help=argparse.SUPPRESS)
  parser.add_argument('--insert', help=argparse.SUPPRESS)
  parser.add_argument('--impl', help=argparse.SUPPRESS)
  parser.add_argument('--variant', help=argparse.SUPPRESS)
  parser.add_argument('--n', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.serve_dm is not None:
    serve_dm(args.serve_dm)
    return
  if args.insert:
    insert_with_writer(args.impl, args.insert, args.variant, args.n)
    return

  args.dm_python = None if args.no_dm else side_by_side.dm_python(args)
  if not args.no_dm and not args.dm_python:
    print('dm-reverb not available; measuring tf_reverb only')
  impls = ['ours'] + (['dm'] if args.dm_python else [])
  variants = [v for v in args.variants.split(',') if v]
  counts = dict(
    chunk1=args.items, default=args.default_items, shared=args.shared_items
  )
  driver = concurrent_clients.driver_binary() if 'chunk1' in variants else ''
  print(
    f'{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}',
    flush=True,
  )
  results: List[Dict[str, Any]] = []
  for i, variant in enumerate(variants):
    for impl in impls if i % 2 == 0 else impls[::-1]:
      r = measure(impl, variant, counts[variant], args, driver)
      results.append(r)
      print(
        f'  {impl:4} {variant:7} {r["items"]:9,d} items: RSS '
        f'{r["rss_before_mb"]:7.1f} -> {r["rss_after_mb"]:7.1f} MB, '
        f'{r["bytes_per_item"]:6.0f} B/item ({r["insert_seconds"]:.0f} s '
        'to insert)',
        flush=True,
      )
  print()
  print(
    f'{"variant":8} {"items":>9} {"tf_reverb B/item":>16} '
    f'{"dm-reverb B/item":>16} {"ratio":>6}'
  )
  ratios = []
  for variant in variants:
    by = {r['impl']: r for r in results if r['variant'] == variant}
    ours = by['ours']['bytes_per_item']
    dm = by['dm']['bytes_per_item'] if 'dm' in by else float('nan')
    ratio = ours / dm if 'dm' in by and dm > 0 else float('nan')
    if 'dm' in by:
      ratios.append((variant, ratio))
    print(
      f'{variant:8} {by["ours"]["items"]:9,d} {ours:16,.0f} {dm:16,.0f} '
      f'{ratio:6.2f}'
    )
  for variant, ratio in ratios:
    print(
      f'goal {variant}: tf_reverb bytes/item <= {GOAL_RATIO}x dm-reverb: '
      f'{"yes" if ratio <= GOAL_RATIO else "NO"} ({ratio:.2f}x)'
    )
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(results, f, indent=1)


if __name__ == '__main__':
  main()
