"""What TLS costs: write and sample throughput with and without TLS, one run.

The reverb_server binary runs in another process (so nothing takes the
in-process shortcut), plaintext or with TLS (certificates made by openssl for
the run), once per mode and repeat, alternating. The client in this process
writes `--items` items of `--item_kib` KiB (random float32, incompressible)
with a TrajectoryWriter, then samples as many with a NumpyIterator. Best of
`--repeats` per mode; the ratio TLS/plaintext is the figure (absolute rates
on a shared machine are noise).

  .venv/bin/python benchmarks/tls_throughput.py [--items 2000] [--item_kib 64]
      [--repeats 3] [--mutual]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))

import tf_reverb as reverb  # pylint: disable=g-import-not-at-top,wrong-import-position
import tls_certs  # pylint: disable=g-import-not-at-top,wrong-import-position

BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')


def start_server(args):
  process = subprocess.Popen(
    [BINARY, '--port=0', '--host=127.0.0.1', *args],
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  for line in process.stdout:
    match = re.search(r'event=started port=(\d+)', line)
    if match:
      return process, int(match.group(1))
  raise RuntimeError('reverb_server did not start')


def measure(address, credentials, items, item_kib):
  """(write MB/s, sample MB/s) against the server at `address`."""
  client = reverb.Client(address, credentials=credentials)
  step = np.random.default_rng(0).random(item_kib * 256, dtype=np.float32)
  megabytes = items * step.nbytes / 1e6
  start = time.perf_counter()
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for _ in range(items):
      writer.append({'x': step})
      writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
    writer.flush()
  write = megabytes / (time.perf_counter() - start)
  start = time.perf_counter()
  iterator = reverb.NumpyIterator(
    address,
    'my_table',
    batch_size=16,
    max_samples=items,
    credentials=credentials,
    max_in_flight_samples_per_worker=32,
  )
  received = sum(batch.data[0].shape[0] for batch in iterator)
  assert received == items, received
  sample = megabytes / (time.perf_counter() - start)
  return write, sample


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--items', type=int, default=2000)
  parser.add_argument('--item_kib', type=int, default=64)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--mutual', action='store_true', help='mutual TLS')
  flags = parser.parse_args()
  with tempfile.TemporaryDirectory() as directory:
    pki = tls_certs.make_pki(directory)
    modes = {
      'plaintext': ([], None),
      'tls': (
        [
          f'--tls_cert_file={pki.server_cert}',
          f'--tls_key_file={pki.server_key}',
        ]
        + ([f'--tls_client_ca_file={pki.ca}'] if flags.mutual else []),
        reverb.ChannelCredentials.from_files(
          pki.ca, *((pki.client_cert, pki.client_key) if flags.mutual else ())
        ),
      ),
    }
    best = {mode: (0.0, 0.0) for mode in modes}
    for repeat in range(flags.repeats):
      order = list(modes) if repeat % 2 == 0 else list(reversed(modes))
      for mode in order:
        args, credentials = modes[mode]
        process, port = start_server(args)
        try:
          write, sample = measure(
            f'localhost:{port}', credentials, flags.items, flags.item_kib
          )
        finally:
          process.terminate()
          process.communicate(timeout=60)
        print(
          f'repeat {repeat} {mode:9s} write {write:8.1f} MB/s  '
          f'sample {sample:8.1f} MB/s',
          flush=True,
        )
        best[mode] = (max(best[mode][0], write), max(best[mode][1], sample))
  print(
    f'\n{flags.items} items of {flags.item_kib} KiB, best of '
    f'{flags.repeats}{" (mutual TLS)" if flags.mutual else ""}:'
  )
  for mode, (write, sample) in best.items():
    print(f'  {mode:9s} write {write:8.1f} MB/s  sample {sample:8.1f} MB/s')
  (pw, ps), (tw, ts) = best['plaintext'], best['tls']
  print(f'  TLS / plaintext: write {tw / pw:.2f}  sample {ts / ps:.2f}')


if __name__ == '__main__':
  main()
