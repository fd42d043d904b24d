"""Many concurrent clients on one server: tf_reverb's reverb_server binary vs
dm-reverb 0.14's server, with the same load.

C paced writers (each an InsertStream acting like an actor that calls
create_item + flush once per step: one one-step item with its chunk per
request, the next one once it is confirmed and its time has come) and a few
samplers (2 up to 200 writers, then one per 100: 20 at 2000; SampleStreams
asking for batches of 32, together about --sample_ratio samples per offered
item) run against a fresh server per run. The load comes from
benchmarks/concurrent_load.cc (gRPC's callback client API, one TCP
connection per writer, no thread per stream), split over --drivers
processes, so the client side is neither Python nor a thread per stream. It
speaks the Reverb wire protocol itself, so both servers see exactly the same
requests. --probes of the C writers (20, at most C/5) run in a process of
their own that does nothing else: their latency is what an actor with its
own process would see, without the queueing inside a driver holding a
thousand streams.

Per run it prints: offered and confirmed items/s, samples/s, the p50/p99/max
latency of an item's confirmation (request sent -> key back: what
create_item + flush waits for) over all writers and over the probes, the
server's CPU time per 1000 items, its threads (/proc/<pid>/task) and RSS
idle and at peak, and a "nothing lost" check: every item sent was
confirmed, and the table's counters (server_info: insert_stats.completed,
current_size) equal the confirmations. Each writer inserts one warm-up item
before the clock starts (streams and connections up; samplers start before
it); warm-up items are counted by the check, not in the latencies.

  .venv/bin/python benchmarks/concurrent_clients.py [--writers 10,100,500,2000]
      [--dm_writers 500,2000] [--rate 5] [--seconds 10] [--repeats 3]
      [--drivers 2] [--probes 20] [--limiter minsize|ratio] [--sample_ratio 1]
      [--binary PATH] [--also NAME=PATH ...] [--nice N] [--no_dm]
      [--dm_python PATH]
      [--json FILE]

--limiter ratio with --sample_ratio 0.5 is the blocked case: a
SampleToInsertRatio table whose samplers take half of what the writers
offer, so most writers wait in the rate limiter. --binary is the
reverb_server measured as "ours" (default tf_reverb/bin/reverb_server);
--also NAME=PATH runs another build beside it (e.g. before=... the
thread-per-stream server of an older commit).

Runs go in turns (ours, the --also builds, dm-reverb at the same C; every
other repeat in reverse order), --repeats times;
the tables show medians over the repeats (threads: the highest seen), and
each p99 ratio is taken per repeat (one run) before its median. Absolute
figures on a shared 2-core machine are noise; the ratios and the thread
counts are what to read. dm-reverb runs at the next C only if it survived
the previous one (no errors, nothing lost).

Goal of issue 15: 2,000 concurrent writer streams plus 20 sampler streams on
one server with <= 64 server threads, nothing lost, no errors, and a p99
insert latency below dm-reverb's at 500 writers.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
SERVER_BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')

TABLE = 'items'
MAX_SIZE = 100_000
SAMPLE_BATCH = 32
THREAD_GOAL = 64


def probes_for(writers: int, probes: int) -> int:
  """Writers of the probe process: up to `probes`, at most a fifth of all."""
  return min(probes, writers // 5)


def samplers_for(writers: int) -> int:
  """2 sampler streams for up to 200 writers, then 1 per 100 (20 at 2000)."""
  return max(2, writers // 100)


# --------------------------------------------------------------------------
# Servers.


ERROR_BUFFER = 100.0


def our_config(limiter: str) -> str:
  """The table as a reverb_server config. 'minsize': MinSize(1), inserts
  never wait; 'ratio': SampleToInsertRatio(1, 1, ERROR_BUFFER), inserts wait
  for the samplers once they are ERROR_BUFFER ahead."""
  big = 1.7976931348623157e308
  if limiter == 'minsize':
    bounds = {'min_diff': -big, 'max_diff': big}
  else:
    bounds = {'min_diff': 1 - ERROR_BUFFER, 'max_diff': 1 + ERROR_BUFFER}
  return json.dumps(
    {
      'port': 0,
      'tables': [
        {
          'table_name': TABLE,
          'sampler': {'uniform': True},
          'remover': {'fifo': True},
          'max_size': MAX_SIZE,
          'rate_limiter': {
            'samples_per_insert': 1,
            'min_size_to_sample': 1,
            **bounds,
          },
        }
      ],
    }
  )


def serve_dm(port: int, limiter: str) -> None:
  """Runs in dm-reverb's venv: the same table on dm-reverb's server."""
  import reverb  # pylint: disable=g-import-not-at-top

  if limiter == 'minsize':
    rate_limiter = reverb.rate_limiters.MinSize(1)
  else:
    rate_limiter = reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=1, min_size_to_sample=1, error_buffer=ERROR_BUFFER
    )
  _server = reverb.Server(
    [
      reverb.Table(  # Serves until the process ends.
        TABLE,
        reverb.selectors.Uniform(),
        reverb.selectors.Fifo(),
        max_size=MAX_SIZE,
        rate_limiter=rate_limiter,
      )
    ],
    port=port,
  )
  print('serving', flush=True)
  while True:
    time.sleep(3600)


class ServerProcess:
  """A server in a subprocess: ours (the binary) or dm-reverb's.

  Other benchmarks (paper_grid.py) pass their own tables: `config`, a
  reverb_server config for ours, and `dm_serve`, the arguments after the
  python that serve them on dm-reverb's server at a port (appended), printing
  'serving' once up; `table` is the table counters() reads.
  """

  def __init__(
    self,
    impl: str,
    dm_python: Optional[str],
    binary: str = SERVER_BINARY,
    nice: int = 0,
    limiter: str = 'minsize',
    config: Optional[str] = None,
    dm_serve: Optional[List[str]] = None,
    table: str = TABLE,
  ):
    self.impl = impl
    self.table = table
    prefix = ['nice', '-n', str(nice)] if nice else []
    if impl != 'dm':
      self.process = subprocess.Popen(
        prefix
        + [binary, f'--config={config or our_config(limiter)}', '--port=0'],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
      )
      for line in self.process.stderr:
        match = re.search(r'event=started port=(\d+)', line)
        if match:
          self.port = int(match.group(1))
          break
      else:
        raise RuntimeError('reverb_server did not start')
      # Keep draining its log so it never blocks on a full pipe.
      threading.Thread(target=self.process.stderr.read, daemon=True).start()
    else:
      import portpicker  # pylint: disable=g-import-not-at-top

      self.port = portpicker.pick_unused_port()
      env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
      serve = (
        [*dm_serve, str(self.port)]
        if dm_serve
        else [__file__, '--serve_dm', str(self.port), '--limiter', limiter]
      )
      self.process = subprocess.Popen(
        prefix + [dm_python, *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
      )
      if not self.process.stdout.readline().startswith('serving'):
        raise RuntimeError('dm-reverb server did not start')
    self.address = f'localhost:{self.port}'
    self.counters()  # serving

  @property
  def pid(self) -> int:
    return self.process.pid

  def threads(self) -> int:
    return len(os.listdir(f'/proc/{self.pid}/task'))

  def rss_mb(self) -> float:
    with open(f'/proc/{self.pid}/status') as f:
      for line in f:
        if line.startswith('VmRSS:'):
          return int(line.split()[1]) / 1024
    return 0.0

  def cpu_seconds(self) -> float:
    """User + system CPU time the process used so far."""
    with open(f'/proc/{self.pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

  def alive(self) -> bool:
    return self.process.poll() is None

  def counters(self) -> Dict[str, int]:
    """The table's counters from server_info."""
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

    info = reverb.Client(self.address).server_info(timeout=120)[self.table]
    return dict(
      inserts=info.rate_limiter_info.insert_stats.completed,
      samples=info.rate_limiter_info.sample_stats.completed,
      current_size=info.current_size,
    )

  def stop(self) -> None:
    if self.alive():
      self.process.kill()
    self.process.wait()


class Monitor:
  """Samples a process's thread count and RSS every 50 ms; keeps the peaks."""

  def __init__(self, server: ServerProcess):
    self.server = server
    self.max_threads = 0
    self.max_rss_mb = 0.0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def _run(self):
    while not self._stop.is_set():
      try:
        self.max_threads = max(self.max_threads, self.server.threads())
        self.max_rss_mb = max(self.max_rss_mb, self.server.rss_mb())
      except OSError:  # the process is gone
        return
      self._stop.wait(0.05)

  def stop(self):
    self._stop.set()
    self._thread.join()


# --------------------------------------------------------------------------
# One run.


def driver_binary() -> str:
  """Builds benchmarks:concurrent_load (-c opt) and returns its path."""
  flags = ['-c', 'opt']
  subprocess.check_call(
    [
      'bazel',
      'build',
      '--noshow_progress',
      *flags,
      '//benchmarks:concurrent_load',
    ],
    cwd=ROOT,
    stderr=subprocess.DEVNULL,
  )
  bazel_bin = subprocess.check_output(
    ['bazel', 'info', *flags, 'bazel-bin'],
    cwd=ROOT,
    text=True,
    stderr=subprocess.DEVNULL,
  ).strip()
  return os.path.join(bazel_bin, 'benchmarks', 'concurrent_load')


def split(total: int, parts: int) -> List[int]:
  return [
    total // parts + (1 if i < total % parts else 0) for i in range(parts)
  ]


def percentile(sorted_values: List[float], q: float) -> float:
  if not sorted_values:
    return float('nan')
  index = min(len(sorted_values) - 1, int(q * len(sorted_values)))
  return sorted_values[index]


def run_one(
  impl: str,
  writers: int,
  args: argparse.Namespace,
  driver: str,
  dm_python: Optional[str],
) -> Dict[str, Any]:
  """One fresh server, `writers` writers and their samplers; the figures."""
  samplers = samplers_for(writers)
  server = ServerProcess(
    impl,
    dm_python,
    args.binaries[impl] if impl != 'dm' else None,
    args.server_nice,
    args.limiter,
  )
  try:
    time.sleep(0.5)
    idle_threads, idle_rss = server.threads(), server.rss_mb()
    cpu_before = server.cpu_seconds()
    monitor = Monitor(server)
    drivers = min(args.drivers, writers)
    sample_rate = writers * args.rate * args.sample_ratio / samplers
    probes = probes_for(writers, args.probes)

    def start(w, s):
      return subprocess.Popen(
        (['nice', '-n', str(args.server_nice)] if args.server_nice else [])
        + [
          driver,
          f'--target={server.address}',
          f'--writers={w}',
          f'--rate={args.rate}',
          f'--seconds={args.seconds}',
          f'--table={TABLE}',
          '--warmup_items=1',
          f'--samplers={s}',
          f'--sample_batch={SAMPLE_BATCH}',
          f'--sample_rate={sample_rate}',
          f'--deadline_seconds={args.seconds * 6 + 120}',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
      )

    processes = [
      start(w, s)
      for w, s in zip(
        split(writers - probes, drivers), split(samplers, drivers)
      )
    ]
    if probes:
      processes.append(start(probes, 0))
    results, driver_failures = [], []
    probe_latencies = []
    for i, process in enumerate(processes):
      out, err = process.communicate()
      lines = [l for l in out.splitlines() if '"event":"result"' in l]
      if lines:
        results.append(json.loads(lines[-1]))
        if probes and i == len(processes) - 1:
          probe_latencies = sorted(
            l / 1000 for l in results[-1]['latencies_us']
          )
      if process.returncode != 0 or not lines:
        driver_failures.append(
          f'driver exit {process.returncode}: {err[-500:]}'
        )
    monitor.stop()
    survived = server.alive()
    cpu = server.cpu_seconds() - cpu_before if survived else float('nan')
    counters = server.counters() if survived else None
  finally:
    server.stop()

  latencies = sorted(l / 1000 for r in results for l in r['latencies_us'])
  sent = sum(r['sent'] for r in results)
  confirmed = sum(r['confirmed'] for r in results)
  warmup = sum(r['warmup_confirmed'] for r in results)
  errors: Dict[str, int] = {}
  for r in results:
    for e in r['errors']:
      errors[e['status']] = errors.get(e['status'], 0) + e['streams']
  for failure in driver_failures:
    errors[failure] = errors.get(failure, 0) + 1
  if not survived:
    errors['server died'] = 1
  send_seconds = (
    statistics.mean(r['send_seconds'] for r in results) if results else 0
  )
  hung = any(r['hung'] for r in results)
  nothing_lost = (
    bool(results)
    and len(results) == len(processes)
    and sent == confirmed + warmup
    and counters is not None
    and counters['inserts'] == confirmed + warmup
    and counters['current_size'] == min(MAX_SIZE, confirmed + warmup)
    and all(r['unexpected_keys'] == 0 for r in results)
    and not hung
  )
  return dict(
    impl=impl,
    writers=writers,
    samplers=samplers,
    offered_per_s=writers * args.rate,
    confirmed_per_s=confirmed / send_seconds if send_seconds else 0,
    samples_per_s=sum(r['samples_measured'] for r in results) / send_seconds
    if send_seconds
    else 0,
    p50_ms=percentile(latencies, 0.50),
    p99_ms=percentile(latencies, 0.99),
    max_ms=latencies[-1] if latencies else float('nan'),
    probes=probes,
    probe_p50_ms=percentile(probe_latencies, 0.50),
    probe_p99_ms=percentile(probe_latencies, 0.99),
    probe_max_ms=probe_latencies[-1] if probe_latencies else float('nan'),
    idle_threads=idle_threads,
    max_threads=monitor.max_threads,
    idle_rss_mb=idle_rss,
    max_rss_mb=monitor.max_rss_mb,
    # Server CPU (user + system) per 1000 items confirmed, samplers included.
    cpu_ms_per_k=cpu * 1e6 / max(1, confirmed + warmup),
    sent=sent,
    confirmed=confirmed + warmup,
    table_inserts=counters['inserts'] if counters else None,
    samples=sum(r['samples'] for r in results),
    table_samples=counters['samples'] if counters else None,
    nothing_lost=nothing_lost,
    errors=errors,
    hung=hung,
  )


# --------------------------------------------------------------------------
# Reporting.


def median_row(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
  row = dict(runs[0])
  for key in (
    'confirmed_per_s',
    'samples_per_s',
    'p50_ms',
    'p99_ms',
    'max_ms',
    'probe_p50_ms',
    'probe_p99_ms',
    'probe_max_ms',
    'cpu_ms_per_k',
    'idle_threads',
    'idle_rss_mb',
    'max_rss_mb',
  ):
    row[key] = statistics.median(r[key] for r in runs)
  row['max_threads'] = max(r['max_threads'] for r in runs)  # worst, not median
  row['nothing_lost'] = all(r['nothing_lost'] for r in runs)
  row['errors'] = {}
  for r in runs:
    for message, n in r['errors'].items():
      row['errors'][message] = row['errors'].get(message, 0) + n
  row['runs'] = len(runs)
  return row


def print_table(rows: List[Dict[str, Any]]) -> None:
  print(
    f'{"server":7} {"writers":>7} {"smplrs":>6} {"offered/s":>9} '
    f'{"confirmed/s":>11} {"samples/s":>9} '
    f'{"all: p50":>8} {"p99":>6} {"max ms":>6} '
    f'{"probes: p50":>11} {"p99":>6} {"max ms":>6} {"CPU ms/1k":>9} '
    f'{"threads idle->max":>17} {"RSS MB idle->max":>16} {"lost":>4} '
    f'{"errors":>6} runs'
  )
  for r in rows:
    lost = 'no' if r['nothing_lost'] else 'YES'
    print(
      f'{r["impl"]:7} {r["writers"]:7d} {r["samplers"]:6d} '
      f'{r["offered_per_s"]:9,.0f} {r["confirmed_per_s"]:11,.0f} '
      f'{r["samples_per_s"]:9,.0f} '
      f'{r["p50_ms"]:8.1f} {r["p99_ms"]:6.1f} {r["max_ms"]:6.0f} '
      f'{r["probe_p50_ms"]:11.1f} {r["probe_p99_ms"]:6.1f} '
      f'{r["probe_max_ms"]:6.0f} {r["cpu_ms_per_k"]:9.0f} '
      f'{r["idle_threads"]:7.0f} -> {r["max_threads"]:5d} '
      f'{r["idle_rss_mb"]:7.0f} -> {r["max_rss_mb"]:5.0f} {lost:>4} '
      f'{sum(r["errors"].values()):6d} {r["runs"]}'
    )
  for r in rows:
    for message, n in r['errors'].items():
      print(f'  {r["impl"]} at {r["writers"]} writers: {n} x {message}')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--writers', default='10,100,500,2000')
  parser.add_argument(
    '--dm_writers',
    default='500,2000',
    help='writer counts to also run on dm-reverb',
  )
  parser.add_argument(
    '--rate', type=float, default=5.0, help='items/s per writer'
  )
  parser.add_argument(
    '--sample_ratio',
    type=float,
    default=1.0,
    help='samples per inserted item the samplers ask for',
  )
  parser.add_argument('--seconds', type=float, default=10.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument(
    '--drivers', type=int, default=2, help='load driver processes'
  )
  parser.add_argument(
    '--limiter',
    choices=('minsize', 'ratio'),
    default='minsize',
    help='minsize: MinSize(1), inserts never wait; ratio: '
    'SampleToInsertRatio(1, 1, %g): with --sample_ratio < 1 '
    'the writers wait for the samplers (blocked in the rate '
    'limiter most of the time)' % ERROR_BUFFER,
  )
  parser.add_argument(
    '--probes',
    type=int,
    default=20,
    help='writers (at most a fifth of C) in a process of their '
    'own, whose latency is not that of a busy load driver',
  )
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument('--dm_python')
  parser.add_argument('--json', help='also write every run to this file')
  parser.add_argument(
    '--nice',
    dest='server_nice',
    type=int,
    default=0,
    help='run servers and load drivers at this niceness '
    '(e.g. -10: ahead of other work on a shared machine)',
  )
  parser.add_argument(
    '--binary',
    default=SERVER_BINARY,
    help='the reverb_server measured as "ours"',
  )
  parser.add_argument(
    '--also',
    action='append',
    default=[],
    metavar='NAME=PATH',
    help='another reverb_server build to run beside ours '
    '(e.g. before=PATH for the build of an older commit)',
  )
  parser.add_argument('--serve_dm', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.serve_dm is not None:
    serve_dm(args.serve_dm, args.limiter)
    return

  args.binaries = {'ours': args.binary}
  for also in args.also:
    name, _, path = also.partition('=')
    if not path or name in ('ours', 'dm'):
      parser.error(f'--also {also}: want NAME=PATH, NAME not ours or dm')
    args.binaries[name] = path
  writer_counts = [int(x) for x in args.writers.split(',') if x]
  dm_counts = set(int(x) for x in args.dm_writers.split(',') if x)
  dm_python = None
  if not args.no_dm and dm_counts:
    import side_by_side  # pylint: disable=g-import-not-at-top

    dm_python = side_by_side.dm_python(
      argparse.Namespace(dm_python=args.dm_python)
    )
    if not dm_python:
      print('dm-reverb not available; measuring tf_reverb only')
  driver = driver_binary()
  print(
    f'{args.limiter} table, samplers asking {args.sample_ratio:g} samples '
    f'per offered item, {args.rate:g} items/s per writer, {args.seconds:g} s per run, '
    f'{args.drivers} driver processes, {args.repeats} repeats; '
    f'{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}',
    flush=True,
  )

  runs: List[Dict[str, Any]] = []
  dm_dead_at = None  # dm-reverb did not survive this many writers
  for repeat in range(args.repeats):
    for writers in writer_counts:
      impls = list(args.binaries)
      if (
        dm_python
        and writers in dm_counts
        and (dm_dead_at is None or writers < dm_dead_at)
      ):
        impls.append('dm')
      if repeat % 2:  # every other repeat in reverse: no order bias
        impls.reverse()
      for impl in impls:
        r = run_one(impl, writers, args, driver, dm_python)
        r['repeat'] = repeat
        runs.append(r)
        print(
          f'  [{repeat}] {impl:6} {writers:5d} writers: '
          f'{r["confirmed_per_s"]:8,.0f}/{r["offered_per_s"]:,.0f} items/s, '
          f'p50/p99/max all {r["p50_ms"]:.1f}/{r["p99_ms"]:.1f}/{r["max_ms"]:.0f} '
          f'probes {r["probe_p50_ms"]:.1f}/{r["probe_p99_ms"]:.1f}/'
          f'{r["probe_max_ms"]:.0f} ms, '
          f'CPU {r["cpu_ms_per_k"]:.0f} ms/1k items, '
          f'threads {r["idle_threads"]}->{r["max_threads"]}, '
          f'RSS {r["max_rss_mb"]:.0f} MB, '
          f'{"nothing lost" if r["nothing_lost"] else "LOST/UNCHECKED"}, '
          f'{sum(r["errors"].values())} errors',
          flush=True,
        )
        if impl == 'dm' and (r['errors'] or not r['nothing_lost']):
          dm_dead_at = (
            writers if dm_dead_at is None else min(dm_dead_at, writers)
          )
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(runs, f, indent=1)

  rows = []
  for impl in [*args.binaries, 'dm']:
    for writers in writer_counts:
      mine = [r for r in runs if r['impl'] == impl and r['writers'] == writers]
      if mine:
        rows.append(median_row(mine))
  print()
  print(f'medians over {args.repeats} repeats (threads: the highest seen)')
  print_table(rows)

  print()
  for other in ['dm', *[n for n in args.binaries if n != 'ours']]:
    for writers in writer_counts:
      for key, what in (('p99_ms', 'all writers'), ('probe_p99_ms', 'probes')):
        ratios = []
        for repeat in range(args.repeats):
          pair = {
            r['impl']: r
            for r in runs
            if r['repeat'] == repeat and r['writers'] == writers
          }
          if 'ours' in pair and other in pair and pair['ours'][key] > 0:
            ratios.append(pair[other][key] / pair['ours'][key])
        if ratios:
          print(
            f'p99 ({what}) at {writers} writers, {other} / ours, per '
            f'repeat: '
            + ', '.join(f'{x:.2f}' for x in ratios)
            + f'; median {statistics.median(ratios):.2f}x'
          )

  top = max(writer_counts)
  ours_top = [r for r in runs if r['impl'] == 'ours' and r['writers'] == top]
  ours_500 = [r for r in runs if r['impl'] == 'ours' and r['writers'] == 500]
  dm_500 = [r for r in runs if r['impl'] == 'dm' and r['writers'] == 500]
  threads_ok = all(r['max_threads'] <= THREAD_GOAL for r in ours_top)
  lost_ok = all(r['nothing_lost'] and not r['errors'] for r in ours_top)
  print(
    f'goal at {top} writers + {samplers_for(top)} samplers: '
    f'server threads <= {THREAD_GOAL}: '
    f'{"yes" if threads_ok else "NO"} '
    f'(max {max((r["max_threads"] for r in ours_top), default=0)}); '
    f'nothing lost, no errors: {"yes" if lost_ok else "NO"}'
  )
  if ours_500 and dm_500:
    for key, what in (('p99_ms', 'all writers'), ('probe_p99_ms', 'probes')):
      ours_p99 = statistics.median(r[key] for r in ours_500)
      dm_p99 = statistics.median(r[key] for r in dm_500)
      print(
        f'goal at 500 writers ({what}): median p99 ours {ours_p99:.1f} ms '
        f'< dm-reverb {dm_p99:.1f} ms: '
        f'{"yes" if ours_p99 < dm_p99 else "NO"}'
      )


if __name__ == '__main__':
  main()
