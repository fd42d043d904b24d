"""Server CPU per item with metrics on and off (and against another build).

Throughput on a shared 2-core machine swings by tens of percent between runs;
the CPU time the server process itself spends per item is far steadier, so
this is how the cost of metrics is read. Each run starts a reverb_server
binary (by pid), writes ITEMS small items through one TrajectoryWriter,
samples them back with Client.sample, and reads the server's utime+stime
from /proc before and after. Builds and settings run alternately --repeats
times; the median per configuration is printed.

  .venv/bin/python benchmarks/metrics_cost.py [--repeats 5] [--items 20000]
      [--baseline_binary /path/to/other/reverb_server]
"""

import argparse
import os
import re
import statistics
import subprocess
import threading
import urllib.request

import numpy as np

import tf_reverb as reverb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')
TICKS = os.sysconf('SC_CLK_TCK')


def cpu_seconds(pid: int) -> float:
  with open(f'/proc/{pid}/stat') as f:
    fields = f.read().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def run(binary: str, metrics: bool, items: int) -> float:
  """Server CPU microseconds per item (insert + sample)."""
  args = [binary, '--port=0'] + (['--metrics_port=0'] if metrics else [])
  process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
  port = metrics_port = None
  for line in process.stderr:
    match = re.search(r'event=started port=(\d+)', line)
    if match:
      port = int(match.group(1))
      found = re.search(r'metrics_port=(\d+)', line)
      metrics_port = int(found.group(1)) if found and metrics else None
      break
  stop = threading.Event()
  if metrics_port:

    def scrape():  # every second: harsher than Prometheus' default 15 s
      while not stop.wait(1.0):
        try:
          with urllib.request.urlopen(
            f'http://127.0.0.1:{metrics_port}/metrics', timeout=30
          ) as r:
            r.read()
        except OSError:  # the run ended while a scrape was in flight
          return

    threading.Thread(target=scrape, daemon=True).start()
  try:
    client = reverb.Client(f'127.0.0.1:{port}')
    step = {'obs': np.arange(8, dtype=np.float32)}
    client.server_info()
    before = cpu_seconds(process.pid)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for _ in range(items):
        writer.append(step)
        writer.create_item('my_table', 1.0, {'obs': writer.history['obs'][-1:]})
    for _ in client.sample('my_table', num_samples=items):
      pass
    after = cpu_seconds(process.pid)
  finally:
    stop.set()
    process.kill()
    process.wait()
  return (after - before) / items * 1e6


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--items', type=int, default=20000)
  parser.add_argument('--baseline_binary')
  args = parser.parse_args()
  configs = {'metrics off': (BINARY, False), 'metrics on': (BINARY, True)}
  if args.baseline_binary:
    configs['baseline'] = (args.baseline_binary, False)
  results = {name: [] for name in configs}
  for _ in range(args.repeats):
    for name, (binary, metrics) in configs.items():
      results[name].append(run(binary, metrics, args.items))
  off = statistics.median(results['metrics off'])
  print(f'server CPU per item (insert + sample), median of {args.repeats}:')
  for name, values in results.items():
    median = statistics.median(values)
    print(
      f'  {name:12} {median:7.2f} us  ({100 * (median / off - 1):+5.1f}% vs '
      f'metrics off; runs {", ".join(f"{v:.2f}" for v in values)})'
    )


if __name__ == '__main__':
  main()
