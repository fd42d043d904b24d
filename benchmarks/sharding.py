"""Sharded replay: throughput, latency, balance and recovery over 1-4 shards.

Every shard is a reverb_server process on loopback (tests/shard_processes.py);
the client load is the same for every shard count:
  * insert: --writers threads, each with its own TrajectoryWriter on one
    sharded client, creating --items_per_writer 1-step items of 1 KiB and
    flushing after each (latency = append + create_item + flush);
  * sample: a NumpyIterator with --sample_workers workers over the sharded
    target, batches of 16 (latency = one next()).
Reported per shard count: items/s, p50/p99 insert latency, samples/s, p99
batch latency, and the spread of items and samples over shards (each shard's
share against the mean). Then:
  * overhead: the sharded path with one shard ("dns:///127.0.0.1:P": round_robin,
    health checking, fan-out) against the plain address "127.0.0.1:P"
    (--repeats alternations, medians);
  * recovery: with 2 shards and writers running, SIGKILL shard 0 and restart
    it on the same port; the time until a writer that was on it confirms
    again (failover to shard 1), and until shard 0 gets traffic again (new
    streams: a prober creates a writer per item).

  .venv/bin/python benchmarks/sharding.py [--shards 1,2,4] [--repeats 3]

Absolute numbers on a shared 2-core machine are noise; ratios in one run are
what to read.
"""

import argparse
import os
import signal
import statistics
import sys
import threading
import time
from typing import Dict, List, Sequence

import numpy as np

sys.path.insert(
  0,
  os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests'
  ),
)
from shard_processes import ShardProcess, ipv4_target  # pylint: disable=g-import-not-at-top,wrong-import-position

import tf_reverb as reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

PAYLOAD = np.arange(128, dtype=np.int64)  # 1 KiB per item


def percentile(values: Sequence[float], q: float) -> float:
  return float(np.percentile(np.asarray(values), q)) if values else float('nan')


def spread(counts: List[int]) -> float:
  """Largest deviation of a shard's count from the mean, in % of the mean."""
  mean = sum(counts) / len(counts)
  return max(abs(c - mean) for c in counts) / mean * 100 if mean else 0.0


def run_inserts(target: str, writers: int, items: int) -> Dict[str, float]:
  client = reverb.Client(target)
  client.server_info(timeout=60)
  latencies: List[List[float]] = [[] for _ in range(writers)]
  handles = [client.trajectory_writer(1) for _ in range(writers)]
  start_barrier = threading.Barrier(writers + 1)

  def write(w: int) -> None:
    writer = handles[w]
    start_barrier.wait()
    for _ in range(items):
      began = time.perf_counter()
      writer.append([PAYLOAD])
      writer.create_item('replay', 1.0, [writer.history[0][-1:]])
      writer.flush(timeout_ms=60_000)
      latencies[w].append(time.perf_counter() - began)

  threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
  for thread in threads:
    thread.start()
  start_barrier.wait()
  began = time.perf_counter()
  for thread in threads:
    thread.join()
  elapsed = time.perf_counter() - began
  for writer in handles:
    writer.close()
  flat = [x for per in latencies for x in per]
  return {
    'items_per_s': writers * items / elapsed,
    'insert_p50_ms': percentile(flat, 50) * 1e3,
    'insert_p99_ms': percentile(flat, 99) * 1e3,
  }


def run_samples(target: str, workers: int, batches: int) -> Dict[str, float]:
  latencies = []
  with reverb.NumpyIterator(
    target,
    'replay',
    batch_size=16,
    max_in_flight_samples_per_worker=16,
    num_workers_per_iterator=workers,
    max_samples=16 * batches,
  ) as iterator:
    next(iterator)  # connections up
    began = time.perf_counter()
    last = began
    for _ in range(batches - 1):
      next(iterator)
      now = time.perf_counter()
      latencies.append(now - last)
      last = now
  elapsed = time.perf_counter() - began
  return {
    'samples_per_s': 16 * (batches - 1) / elapsed,
    'batch_p99_ms': percentile(latencies, 99) * 1e3,
  }


def per_shard(shards: List[ShardProcess]) -> Dict[str, List[int]]:
  infos = [
    reverb.Client(s.address).server_info(timeout=60)['replay'] for s in shards
  ]
  return {
    'items': [i.current_size for i in infos],
    'samples': [i.rate_limiter_info.sample_stats.completed for i in infos],
  }


def scaling(args) -> None:
  clusters = {n: [ShardProcess() for _ in range(n)] for n in args.shards}
  try:
    rows: Dict[int, List[Dict[str, float]]] = {n: [] for n in args.shards}
    for repeat in range(args.repeats):
      order = args.shards if repeat % 2 == 0 else args.shards[::-1]
      for n in order:
        shards = clusters[n]
        target = ipv4_target(shards) if n > 1 else shards[0].address
        row = run_inserts(target, args.writers, args.items_per_writer)
        row.update(run_samples(target, args.sample_workers, args.batches))
        rows[n].append(row)
    print(
      f'scaling (medians of {args.repeats}, {args.writers} writers, '
      f'{args.sample_workers} sampler workers)'
    )
    print(
      'shards  items/s  ins_p50_ms  ins_p99_ms  samples/s  batch_p99_ms  '
      'items/shard (spread%)  samples/shard (spread%)'
    )
    for n in args.shards:
      med = {
        key: statistics.median(r[key] for r in rows[n]) for key in rows[n][0]
      }
      counts = per_shard(clusters[n])
      print(
        f'{n:6d}  {med["items_per_s"]:7.0f}  '
        f'{med["insert_p50_ms"]:10.2f}  {med["insert_p99_ms"]:10.2f}  '
        f'{med["samples_per_s"]:9.0f}  {med["batch_p99_ms"]:12.2f}  '
        f'{counts["items"]} ({spread(counts["items"]):.1f})  '
        f'{counts["samples"]} ({spread(counts["samples"]):.1f})',
        flush=True,
      )
  finally:
    for shards in clusters.values():
      for shard in shards:
        shard.kill()


def overhead(args) -> None:
  shard = ShardProcess()
  try:
    results = {'plain': [], 'sharded': []}
    for repeat in range(args.repeats):
      order = ['plain', 'sharded'] if repeat % 2 == 0 else ['sharded', 'plain']
      for kind in order:
        target = (
          shard.address if kind == 'plain' else f'dns:///127.0.0.1:{shard.port}'
        )
        assert reverb.Client(target).sharded == (kind == 'sharded')
        row = run_inserts(target, args.writers, args.items_per_writer)
        row.update(run_samples(target, args.sample_workers, args.batches))
        results[kind].append(row)
    print(
      '\noverhead at 1 shard (medians of %d): sharded dns:/// vs plain '
      'address' % args.repeats
    )
    for key in (
      'items_per_s',
      'insert_p99_ms',
      'samples_per_s',
      'batch_p99_ms',
    ):
      plain = statistics.median(r[key] for r in results['plain'])
      sharded = statistics.median(r[key] for r in results['sharded'])
      print(
        f'  {key:14s} plain {plain:9.2f}  sharded {sharded:9.2f}  '
        f'ratio {sharded / plain:.3f}'
      )
  finally:
    shard.kill()


def recovery(args) -> None:
  shards = [ShardProcess() for _ in range(2)]
  try:
    client = reverb.Client(ipv4_target(shards))
    client.server_info(timeout=60)
    stop = threading.Event()
    confirmed: List[List[float]] = [[] for _ in range(args.writers)]
    writers = [client.trajectory_writer(1) for _ in range(args.writers)]

    def write(w: int) -> None:
      writer = writers[w]
      while not stop.is_set():
        writer.append([PAYLOAD])
        writer.create_item('queue', 1.0, [writer.history[0][-1:]])
        writer.flush(timeout_ms=120_000)
        confirmed[w].append(time.perf_counter())

    threads = [
      threading.Thread(target=write, args=(w,)) for w in range(args.writers)
    ]
    for thread in threads:
      thread.start()
    # Which writers are on shard 0: the shard's queue holds their items.
    while min(len(c) for c in confirmed) < 20:
      time.sleep(0.01)
    port = shards[0].port
    killed_at = time.perf_counter()
    shards[0].kill()
    restarted_at = time.perf_counter()
    shards[0] = ShardProcess(port=port)
    listening_at = time.perf_counter()
    # Failover: every writer confirms again after the kill.
    while any(not c or c[-1] < listening_at for c in confirmed):
      time.sleep(0.005)
    failover = max(next(t for t in c if t > killed_at) for c in confirmed)
    # Traffic on the restarted shard: fresh writers, one item each.
    plain = reverb.Client(shards[0].address)
    probes = 0
    while True:
      probe = client.trajectory_writer(1)
      probe.append([PAYLOAD])
      probe.create_item('queue', 1.0, [probe.history[0][-1:]])
      probe.flush(timeout_ms=60_000)
      probe.close()
      probes += 1
      if plain.server_info(timeout=60)['queue'].current_size > 0:
        break
    resumed = time.perf_counter()
    stop.set()
    for thread in threads:
      thread.join()
    for writer in writers:
      writer.close()
    print('\nrecovery (2 shards, %d writers):' % args.writers)
    print(
      f'  SIGKILL -> every writer confirming again: '
      f'{(failover - killed_at) * 1e3:.0f} ms (latest writer)'
    )
    print(
      f'  restart of the process on the same port took '
      f'{(listening_at - restarted_at) * 1e3:.0f} ms'
    )
    print(
      f'  restart listening -> a new stream lands on it: '
      f'{(resumed - listening_at) * 1e3:.0f} ms ({probes} probe writers); '
      f'SIGKILL -> traffic on it again: {(resumed - killed_at) * 1e3:.0f} ms'
    )
  finally:
    for shard in shards:
      shard.kill()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--shards', default='1,2,4', type=lambda s: [int(x) for x in s.split(',')]
  )
  parser.add_argument('--writers', type=int, default=8)
  parser.add_argument('--items_per_writer', type=int, default=500)
  parser.add_argument('--sample_workers', type=int, default=4)
  parser.add_argument('--batches', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=7)
  parser.add_argument(
    '--skip',
    default='',
    help='comma-separated parts to skip: scaling,overhead,recovery',
  )
  args = parser.parse_args()
  skip = set(args.skip.split(','))
  if 'scaling' not in skip:
    scaling(args)
  if 'overhead' not in skip:
    overhead(args)
  if 'recovery' not in skip:
    recovery(args)


if __name__ == '__main__':
  signal.signal(signal.SIGINT, signal.default_int_handler)
  main()
