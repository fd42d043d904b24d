"""The walking skeleton end to end: the server binary and a client process.

Starts the Bazel-built ``reverb_server`` on its embedded default config (one
uniform table, ``my_table``), inserts transitions into it from this process
over gRPC, samples them back, checks them, prints the throughput and the
server's table info, and stops the server with SIGTERM.

  python examples/server_roundtrip.py [--items N]
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

import tf_reverb as reverb

BINARY = os.path.join(os.path.dirname(reverb.__file__), 'bin', 'reverb_server')


def start_server() -> tuple:
  """Starts the binary on a free port; returns (process, port)."""
  process = subprocess.Popen(
    [BINARY, '--port=0'], stderr=subprocess.PIPE, text=True
  )
  for line in process.stderr:
    print(f'  server | {line.rstrip()}')
    match = re.search(r'event=started port=(\d+)', line)
    if match:
      return process, int(match.group(1))
  raise RuntimeError('reverb_server did not start')


def transition(i: int) -> dict:
  rng = np.random.default_rng(i)
  return {
    'observation': rng.standard_normal(128).astype(np.float32),
    'action': np.int64(i % 4),
    'reward': np.float32(i),
    'discount': np.float32(0.99),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--items', type=int, default=2000)
  args = parser.parse_args()

  print(f'Starting {BINARY} (embedded default config)')
  process, port = start_server()
  try:
    client = reverb.Client(f'ipv4:127.0.0.1:{port}')
    item_bytes = sum(v.nbytes for v in map(np.asarray, transition(0).values()))

    start = time.perf_counter()
    for i in range(args.items):
      client.insert(transition(i), priorities={'my_table': 1.0})
    insert_seconds = time.perf_counter() - start

    start = time.perf_counter()
    rewards = set()
    for sample in client.sample('my_table', args.items, emit_timesteps=False):
      action, discount, observation, reward = sample.data
      i = int(reward[0])
      np.testing.assert_array_equal(
        observation[0], transition(i)['observation']
      )
      assert action[0] == i % 4 and discount[0] == np.float32(0.99)
      rewards.add(i)
    sample_seconds = time.perf_counter() - start

    info = client.server_info()['my_table']
    megabytes = args.items * item_bytes / 1e6
    print(
      f'\nInserted {args.items} items ({item_bytes} B each) in '
      f'{insert_seconds:.2f}s: {args.items / insert_seconds:,.0f} items/s, '
      f'{megabytes / insert_seconds:.1f} MB/s'
    )
    print(
      f'Sampled  {args.items} items in {sample_seconds:.2f}s: '
      f'{args.items / sample_seconds:,.0f} items/s, '
      f'{megabytes / sample_seconds:.1f} MB/s; every sample matched what '
      f'was written ({len(rewards)} distinct items seen)'
    )
    print(
      f'Table {info.name}: current_size={info.current_size}, '
      f'inserts={info.rate_limiter_info.insert_stats.completed}, '
      f'samples={info.rate_limiter_info.sample_stats.completed}, '
      f'unique sampled={info.num_unique_samples}\n'
    )
  finally:
    process.send_signal(signal.SIGTERM)
    for line in process.stderr:
      print(f'  server | {line.rstrip()}')
    code = process.wait(timeout=30)
  print(f'Server exited with code {code}.')
  sys.exit(code)


if __name__ == '__main__':
  main()
