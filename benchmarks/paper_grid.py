"""The Reverb paper's throughput grid, tf_reverb against dm-reverb 0.14.

Cassirer et al. 2021 ("Reverb: A Framework for Experience Replay"),
section 5: one server, 1 to 200 concurrent clients, each inserting (and, in
a second run, sampling) random float32 tensors of 400 B, 4 KB, 40 KB or
400 KB, chunk length 1 and sequence length 1; items/s and bytes/s; and the
same load spread over several tables of one server.

The grid: clients (--clients, default 1, 10, 50, 100, 200) x payload
(--payloads, default 400 B, 4 KB, 40 KB, 400 KB) x {insert, sample}, and the
multi-table run: the same clients (--table_clients) at one payload
(--table_payload, 4 KB) over 1, 4 and 16 tables (--tables) of one server,
for insert and sample (its 1-table point is the grid's point).

The clients are benchmarks/concurrent_load.cc (gRPC's callback API, one TCP
connection per client, no thread per stream), split over --drivers
processes: the load speaks Reverb's wire protocol itself, so both servers
see exactly the same requests and the client side is not Python. An
inserting client sends one request holding a fresh one-step chunk of the
payload (random bits: incompressible) and one item over it, waits for the
item's key to come back, and sends the next (back to back). A sampling
client asks for --sample_batch items (default 1) per SampleStream request
and sends the next request once they are in. Tables are uniform/FIFO with
MinSize(1) and room for every item of a point (no eviction); a sample point
first fills them with a fixed number of items (not measured).

Bounds: every point is bounded by item counts, never by time: a point moves
--items[payload] items (400 B: 40,000; 4 KB: 30,000; 40 KB: 10,000; 400 KB:
2,000, times --scale), shared out over the clients (at least
MIN_PER_CLIENT each). Each inserting client's first item, and each
sampling client's first request, go before the clock starts (streams and
connections up).

Per point: items/s, MB/s (payload bytes, 1 MB = 1e6 B), the server's CPU
(user + system, /proc/<pid>/stat) per item and in cores while it ran, the
drivers' CPU in cores, p50/p99 per-call latency (insert: request sent ->
key back; sample: request sent -> its last item in), and the ratio
tf_reverb / dm-reverb of items/s and of CPU per item, per round, then the
median and the range over rounds.

One tf_reverb server (tf_reverb/bin/reverb_server) and one dm-reverb server
(dm-reverb's Python, running this script with --serve_dm) per round, both
up during the round, each with 16 tables; the tables a point used are reset
after it. Points go in turns: ours then dm-reverb at the same point, the
order reversed every other round.

  .venv/bin/python benchmarks/paper_grid.py [--rounds 2] [--quick]
      [--clients 1,10,50,100,200] [--payloads 400,4000,40000,400000]
      [--tables 1,4,16] [--table_clients 10,50,100,200]
      [--table_payload 4000] [--scale 1] [--drivers 2] [--sample_batch 1]
      [--no_dm] [--dm_python PATH] [--binary PATH] [--json FILE]
      [--plot docs/paper_grid.png] [--no_ceiling]

--quick: clients 1 and 10, payloads 400 B and 40 KB, tables 1 and 4 (at 10
clients), a tenth of the items, one round. Absolute figures on a shared
2-core machine are noise: read the ratios.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import concurrent_clients  # noqa: E402
import side_by_side  # noqa: E402

ROOT = concurrent_clients.ROOT
MAX_TABLES = 16
MAX_SIZE = 1_000_000  # never reached: no point evicts
MIN_PER_CLIENT = 10
MODES = ('insert', 'sample')
# Items a point moves (before --scale), by payload bytes; other payloads
# get about 16 MB worth, between 2,000 and 40,000 items.
ITEMS = {400: 40_000, 4_000: 30_000, 40_000: 10_000, 400_000: 2_000}
# Items a sample point's tables hold (spread over them), by payload bytes.
PREFILL = {400: 10_000, 4_000: 5_000, 40_000: 1_000, 400_000: 250}

# Goals of issue 30 (reported against, never asserted).
GOAL_RATIO = 1.5
GOAL_RATIO_TOP = 2.0
GOAL_CPU_RATIO = 0.6


def table_name(i: int) -> str:
  return f'grid_{i}'


def items_for(payload: int, scale: float) -> int:
  n = ITEMS.get(payload) or min(40_000, max(2_000, 16_000_000 // payload))
  return max(1, int(n * scale))


def prefill_for(payload: int, scale: float) -> int:
  n = PREFILL.get(payload) or min(10_000, max(250, 100_000_000 // payload))
  return max(MAX_TABLES, int(n * min(1.0, scale)))


# --------------------------------------------------------------------------
# Servers.


def our_config(
  names: Optional[List[str]] = None, max_size: int = MAX_SIZE
) -> str:
  """Uniform/FIFO MinSize(1) tables (default: the MAX_TABLES grid tables)
  as a reverb_server config (concurrent_clients' table, renamed, resized)."""
  names = names or [table_name(i) for i in range(MAX_TABLES)]
  template = json.loads(concurrent_clients.our_config('minsize'))['tables'][0]
  tables = [dict(template, table_name=n, max_size=max_size) for n in names]
  return json.dumps({'port': 0, 'tables': tables})


def serve_dm(
  port: int, names: Optional[List[str]] = None, max_size: int = MAX_SIZE
) -> None:
  """Runs in dm-reverb's venv: the same tables on dm-reverb's server."""
  import reverb  # pylint: disable=g-import-not-at-top

  names = names or [table_name(i) for i in range(MAX_TABLES)]
  _server = reverb.Server(  # Serves until the process ends.
    tables=[
      reverb.Table(
        name,
        reverb.selectors.Uniform(),
        reverb.selectors.Fifo(),
        max_size=max_size,
        rate_limiter=reverb.rate_limiters.MinSize(1),
      )
      for name in names
    ],
    port=port,
  )
  print('serving', flush=True)
  while True:
    time.sleep(3600)


def start_server(
  impl: str, args: argparse.Namespace
) -> concurrent_clients.ServerProcess:
  return concurrent_clients.ServerProcess(
    impl,
    args.dm_python,
    args.binary,
    config=our_config(),
    dm_serve=[os.path.abspath(__file__), '--serve_dm'],
    table=table_name(0),
  )


def reset_tables(server: concurrent_clients.ServerProcess, n: int) -> None:
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

  client = reverb.Client(server.address)
  for i in range(n):
    client.reset(table_name(i))


# --------------------------------------------------------------------------
# One point.


def run_drivers(
  server: concurrent_clients.ServerProcess,
  driver: str,
  drivers: int,
  flags_of: Any,
  clients: int,
  timeout: float,
) -> List[Dict[str, Any]]:
  """Runs `clients` clients over up to `drivers` processes; flags_of(n,
  first) gives the flags of a process with n clients, the first of them
  the `first`-th overall. Returns the processes' result objects."""
  parts = [n for n in concurrent_clients.split(clients, drivers) if n]
  processes, first = [], 0
  for n in parts:
    processes.append(
      subprocess.Popen(
        [driver, f'--target={server.address}', *flags_of(n, first)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
    first += n
  results = []
  for process in processes:
    out, err = process.communicate(timeout=timeout)
    lines = [l for l in out.splitlines() if '"event":"result"' in l]
    if process.returncode != 0 or not lines:
      raise RuntimeError(
        f'concurrent_load exit {process.returncode}: {err[-1000:]}'
      )
    result = json.loads(lines[-1])
    if result['errors'] or result['hung']:
      raise RuntimeError(
        f'concurrent_load: errors {result["errors"]}, hung {result["hung"]}'
      )
    results.append(result)
  return results


def rotated(names: List[str], first: int) -> str:
  """The tables as a driver's --table list whose client 0 is the `first`-th
  client overall (so clients spread evenly over the tables)."""
  k = first % len(names)
  return ','.join(names[k:] + names[:k])


def run_point(
  server: concurrent_clients.ServerProcess,
  driver: str,
  args: argparse.Namespace,
  mode: str,
  clients: int,
  payload: int,
  tables: int,
) -> Dict[str, Any]:
  """One point on one server: its figures."""
  names = [table_name(i) for i in range(tables)]
  floats = max(1, payload // 4)
  common = [
    f'--step_floats={floats}',
    '--random_payload',
    '--deadline_seconds=900',
  ]
  total = items_for(payload, args.scale)
  per_client = max(MIN_PER_CLIENT, math.ceil(total / clients))
  timeout = 1200
  if mode == 'sample':
    prefill = prefill_for(payload, args.scale)
    writers = min(tables * 2, 32)
    run_drivers(
      server,
      driver,
      1,
      lambda n, first: [
        *common,
        f'--table={rotated(names, first)}',
        f'--writers={n}',
        '--rate=0',
        f'--items={math.ceil(prefill / n)}',
      ],
      writers,
      timeout,
    )
  cpu_before = server.cpu_seconds()
  start = time.monotonic()
  if mode == 'insert':
    results = run_drivers(
      server,
      driver,
      args.drivers,
      lambda n, first: [
        *common,
        f'--table={rotated(names, first)}',
        f'--writers={n}',
        '--rate=0',
        f'--items={per_client}',
        '--warmup_items=1',
      ],
      clients,
      timeout,
    )
    moved = sum(r['confirmed'] + r['warmup_confirmed'] for r in results)
    measured = sum(r['confirmed'] for r in results)
    seconds = max(r['send_seconds'] for r in results)
    latencies = sorted(x for r in results for x in r['latencies_us'])
  else:
    results = run_drivers(
      server,
      driver,
      args.drivers,
      lambda n, first: [
        *common,
        f'--table={rotated(names, first)}',
        '--writers=0',
        f'--samplers={n}',
        '--sampler_connections=0',
        f'--sample_batch={args.sample_batch}',
        f'--sample_total={per_client}',
        '--sample_rate=0',
      ],
      clients,
      timeout,
    )
    moved = sum(r['samples'] for r in results)
    measured = sum(r['samples_windowed'] for r in results)
    seconds = max(r['sample_window_seconds'] for r in results)
    latencies = sorted(x for r in results for x in r['sample_latencies_us'])
  wall = time.monotonic() - start
  cpu = server.cpu_seconds() - cpu_before
  driver_cpu = sum(r['cpu_seconds'] for r in results)
  reset_tables(server, tables)
  items_per_s = measured / seconds if seconds > 0 else float('nan')
  return dict(
    mode=mode,
    clients=clients,
    payload=payload,
    tables=tables,
    items=moved,
    items_per_s=items_per_s,
    mb_per_s=items_per_s * payload / 1e6,
    cpu_us_per_item=cpu * 1e6 / max(1, moved),
    server_cores=cpu / wall,
    driver_cores=driver_cpu / wall,
    p50_ms=concurrent_clients.percentile(latencies, 0.50) / 1000,
    p99_ms=concurrent_clients.percentile(latencies, 0.99) / 1000,
  )


# --------------------------------------------------------------------------
# Reporting.


def spread(values: List[float]) -> str:
  values = [v for v in values if not math.isnan(v)]
  if not values:
    return '-'
  median = statistics.median(values)
  if len(values) == 1:
    return f'{median:.2f}'
  return f'{median:.2f} ({min(values):.2f}-{max(values):.2f})'


def point_key(r: Dict[str, Any]) -> tuple:
  return (r['mode'], r['tables'], r['payload'], r['clients'])


def summarize(runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Per point: both implementations' medians over rounds and the ratios
  (ours / dm per round, then median and range)."""
  keys = sorted({point_key(r) for r in runs})
  rows = []
  for key in keys:
    row = dict(zip(('mode', 'tables', 'payload', 'clients'), key))
    for impl in ('ours', 'dm'):
      mine = [r for r in runs if point_key(r) == key and r['impl'] == impl]
      for field in (
        'items_per_s',
        'mb_per_s',
        'cpu_us_per_item',
        'server_cores',
        'driver_cores',
        'p50_ms',
        'p99_ms',
      ):
        row[f'{impl}_{field}'] = (
          statistics.median(r[field] for r in mine) if mine else float('nan')
        )
      row[f'{impl}_rounds'] = len(mine)
    ratios, cpu_ratios = [], []
    for rnd in sorted({r['round'] for r in runs}):
      pair = {
        r['impl']: r for r in runs if point_key(r) == key and r['round'] == rnd
      }
      if 'ours' in pair and 'dm' in pair:
        if pair['dm']['items_per_s'] > 0:
          ratios.append(pair['ours']['items_per_s'] / pair['dm']['items_per_s'])
        if pair['dm']['cpu_us_per_item'] > 0:  # 0: under a clock tick
          cpu_ratios.append(
            pair['ours']['cpu_us_per_item'] / pair['dm']['cpu_us_per_item']
          )
    row['ratios'] = ratios
    row['cpu_ratios'] = cpu_ratios
    row['ratio'] = statistics.median(ratios) if ratios else float('nan')
    row['cpu_ratio'] = (
      statistics.median(cpu_ratios) if cpu_ratios else float('nan')
    )
    rows.append(row)
  return rows


def payload_label(payload: int) -> str:
  if payload >= 1000:
    return f'{payload / 1000:g} KB'
  return f'{payload} B'


def print_rows(rows: List[Dict[str, Any]]) -> None:
  print(
    f'{"mode":6} {"tables":>6} {"payload":>8} {"clients":>7} | '
    f'{"ours items/s":>12} {"MB/s":>7} {"CPU us/it":>9} {"srv cores":>9} '
    f'{"p50 ms":>7} {"p99 ms":>7} | '
    f'{"dm items/s":>10} {"MB/s":>7} {"CPU us/it":>9} {"srv cores":>9} '
    f'{"p50 ms":>7} {"p99 ms":>7} | '
    f'{"items/s ours/dm (range)":>24} {"CPU/item ours/dm":>18}'
  )
  for r in rows:
    print(
      f'{r["mode"]:6} {r["tables"]:6d} {payload_label(r["payload"]):>8} '
      f'{r["clients"]:7d} | '
      f'{r["ours_items_per_s"]:12,.0f} {r["ours_mb_per_s"]:7,.1f} '
      f'{r["ours_cpu_us_per_item"]:9,.1f} {r["ours_server_cores"]:9.2f} '
      f'{r["ours_p50_ms"]:7.2f} {r["ours_p99_ms"]:7.2f} | '
      f'{r["dm_items_per_s"]:10,.0f} {r["dm_mb_per_s"]:7,.1f} '
      f'{r["dm_cpu_us_per_item"]:9,.1f} {r["dm_server_cores"]:9.2f} '
      f'{r["dm_p50_ms"]:7.2f} {r["dm_p99_ms"]:7.2f} | '
      f'{spread(r["ratios"]):>24} {spread(r["cpu_ratios"]):>18}'
    )


def goals(rows: List[Dict[str, Any]], top_clients: int) -> List[str]:
  """The goals of issue 30, measured (medians over rounds)."""
  lines = []
  paired = [r for r in rows if r['ratios']]
  if paired:
    for mode in MODES:
      grid = [r for r in paired if r['mode'] == mode and r['tables'] == 1]
      if not grid:
        continue
      below = [r for r in grid if r['ratio'] < GOAL_RATIO]
      lines.append(
        f'{mode}: items/s >= {GOAL_RATIO}x dm-reverb at every point: '
        f'{"yes" if not below else "NO"} ({len(grid) - len(below)}/'
        f'{len(grid)} points; lowest {min(r["ratio"] for r in grid):.2f}x)'
      )
      top = [r for r in grid if r['clients'] == top_clients]
      if top:
        low = min(r['ratio'] for r in top)
        lines.append(
          f'{mode}: items/s >= {GOAL_RATIO_TOP}x at {top_clients} clients: '
          f'{"yes" if low >= GOAL_RATIO_TOP else "NO"} (lowest {low:.2f}x)'
        )
    cpu = [r['cpu_ratio'] for r in paired if r['tables'] == 1]
    cpu = [c for c in cpu if not math.isnan(c)] or [float('nan')]
    above = [c for c in cpu if c > GOAL_CPU_RATIO]
    lines.append(
      f'server CPU per item <= {GOAL_CPU_RATIO}x dm-reverb: '
      f'{"yes" if not above else "NO"} ({len(cpu) - len(above)}/{len(cpu)} '
      f'points; median {statistics.median(cpu):.2f}x, highest '
      f'{max(cpu):.2f}x)'
    )
  for impl in ('ours', 'dm'):
    for mode in MODES:
      multi = [r for r in rows if r['mode'] == mode and r[f'{impl}_rounds'] > 0]
      by_point: Dict[tuple, Dict[int, float]] = {}
      for r in multi:
        by_point.setdefault((r['payload'], r['clients']), {})[r['tables']] = r[
          f'{impl}_items_per_s'
        ]
      checks = []
      for (_, clients), per_tables in sorted(by_point.items()):
        if len(per_tables) < 2 or 1 not in per_tables:
          continue
        one = per_tables[1]
        ok = all(v >= one for t, v in per_tables.items() if t > 1)
        checks.append(
          f'{clients}: '
          + ' / '.join(f'{per_tables[t] / one:.2f}' for t in sorted(per_tables))
          + ('' if ok else ' NO')
        )
      if checks:
        lines.append(
          f'{impl} {mode}: items/s over {sorted(set(r["tables"] for r in multi))}'
          f' tables relative to 1, per clients: ' + '; '.join(checks)
        )
  return lines


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> None:
  """items/s of both over the grid (top row) and the ratio (bottom row);
  the multi-table run in the third column."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(2, 3, figsize=(16, 9))
  payloads = sorted({r['payload'] for r in rows if r['tables'] == 1})
  colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
  for col, mode in enumerate(MODES):
    top, bottom = axes[0][col], axes[1][col]
    for i, payload in enumerate(payloads):
      pts = sorted(
        (
          r
          for r in rows
          if r['mode'] == mode and r['tables'] == 1 and r['payload'] == payload
        ),
        key=lambda r: r['clients'],
      )
      if not pts:
        continue
      x = [r['clients'] for r in pts]
      color = colors[i % len(colors)]
      label = payload_label(payload)
      top.plot(
        x,
        [r['ours_items_per_s'] for r in pts],
        'o-',
        color=color,
        label=f'tf_reverb {label}',
      )
      if any(r['dm_rounds'] for r in pts):
        top.plot(
          x,
          [r['dm_items_per_s'] for r in pts],
          's--',
          color=color,
          alpha=0.7,
          label=f'dm-reverb {label}',
        )
        bottom.plot(
          x, [r['ratio'] for r in pts], 'o-', color=color, label=label
        )
    top.set_xscale('log')
    top.set_yscale('log')
    top.set_title(f'{mode}: items/s, one table')
    top.set_xlabel('concurrent clients')
    top.legend(fontsize=7, ncol=2)
    bottom.set_xscale('log')
    bottom.axhline(GOAL_RATIO, color='gray', linestyle=':', label='goal 1.5x')
    bottom.axhline(1.0, color='black', linewidth=0.5)
    bottom.set_title(f'{mode}: tf_reverb / dm-reverb items/s (median)')
    bottom.set_xlabel('concurrent clients')
    bottom.legend(fontsize=7)
  top, bottom = axes[0][2], axes[1][2]
  table_counts = sorted({r['tables'] for r in rows})
  table_payloads = {r['payload'] for r in rows if r['tables'] > 1}
  for i, mode in enumerate(MODES):
    for j, tables in enumerate(table_counts):
      pts = sorted(
        (
          r
          for r in rows
          if r['mode'] == mode
          and r['tables'] == tables
          and r['payload'] in table_payloads
        ),
        key=lambda r: r['clients'],
      )
      if not pts:
        continue
      x = [r['clients'] for r in pts]
      marker = 'o-' if mode == 'insert' else '^-'
      color = colors[j % len(colors)]
      top.plot(
        x,
        [r['ours_items_per_s'] for r in pts],
        marker,
        color=color,
        label=f'tf_reverb {mode}, {tables} tables',
      )
      if any(r['dm_rounds'] for r in pts):
        bottom.plot(
          x,
          [r['dm_items_per_s'] for r in pts],
          marker,
          color=color,
          label=f'dm-reverb {mode}, {tables} tables',
        )
  label = ', '.join(payload_label(p) for p in sorted(table_payloads))
  for ax, who in ((top, 'tf_reverb'), (bottom, 'dm-reverb')):
    ax.set_xscale('log')
    ax.set_title(f'{who}: items/s over 1/4/16 tables ({label})')
    ax.set_xlabel('concurrent clients')
    ax.legend(fontsize=7)
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def loopback_ceiling(payload: int) -> Optional[Dict[str, Any]]:
  """//benchmarks:loopback_ceiling with messages of `payload` bytes (the
  machine's MB/s for one gRPC stream), or None when it cannot be built."""
  import sample_throughput  # pylint: disable=g-import-not-at-top

  binary = sample_throughput.CEILING
  if not os.path.exists(binary):
    built = subprocess.run(
      ['bazel', 'build', '-c', 'opt', '//benchmarks:loopback_ceiling'],
      cwd=ROOT,
      capture_output=True,
      check=False,
    )
    if built.returncode != 0:
      return None
  out = subprocess.run(
    [binary, '--seconds', '1', '--message_bytes', str(payload), '--batch', '1'],
    capture_output=True,
    text=True,
    check=False,
    timeout=300,
  )
  if out.returncode != 0:
    return None
  return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------


def int_list(text: str) -> List[int]:
  return [int(float(x)) for x in text.split(',') if x]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--quick', action='store_true')
  parser.add_argument('--clients', default='1,10,50,100,200')
  parser.add_argument('--payloads', default='400,4000,40000,400000')
  parser.add_argument('--modes', default='insert,sample')
  parser.add_argument('--tables', default='1,4,16')
  parser.add_argument(
    '--table_clients',
    default='10,50,100,200',
    help='clients of the multi-table run (1 client uses one table)',
  )
  parser.add_argument('--table_payload', type=int, default=4000)
  parser.add_argument(
    '--scale', type=float, default=1.0, help='multiplies the items per point'
  )
  parser.add_argument(
    '--drivers', type=int, default=2, help='load driver processes'
  )
  parser.add_argument(
    '--sample_batch', type=int, default=1, help='items per sample request'
  )
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument('--dm_python')
  parser.add_argument('--binary', default=concurrent_clients.SERVER_BINARY)
  parser.add_argument('--json', help='write every run and the summary here')
  parser.add_argument('--plot', help='write the figure (PNG) here')
  parser.add_argument('--no_ceiling', action='store_true')
  parser.add_argument('--serve_dm', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.serve_dm is not None:
    serve_dm(args.serve_dm)
    return
  if args.quick:
    args.clients, args.payloads = '1,10', '400,40000'
    args.tables, args.table_clients = '1,4', '10'
    args.table_payload = 400
    args.scale *= 0.1
    args.rounds = 1 if args.rounds == 2 else args.rounds
  clients = int_list(args.clients)
  payloads = int_list(args.payloads)
  modes = [m for m in args.modes.split(',') if m]
  table_counts = [t for t in int_list(args.tables) if t <= MAX_TABLES]
  table_clients = int_list(args.table_clients)

  args.dm_python = None if args.no_dm else side_by_side.dm_python(args)
  if not args.no_dm and not args.dm_python:
    print('dm-reverb not available; measuring tf_reverb only')
  impls = ['ours'] + (['dm'] if args.dm_python else [])
  driver = concurrent_clients.driver_binary()

  points = []  # (mode, tables, payload, clients)
  for mode in modes:
    for payload in payloads:
      for c in clients:
        points.append((mode, 1, payload, c))
    for tables in table_counts:
      if tables == 1 and args.table_payload in payloads:
        continue  # the grid's point
      for c in table_clients:
        if c >= tables or tables == 1:
          points.append((mode, tables, args.table_payload, c))
  points = sorted(set(points), key=lambda p: (p[0], p[1], p[2], p[3]))
  print(
    f'{len(points)} points x {len(impls)} implementations x {args.rounds} '
    f'rounds; {args.drivers} driver processes, sample batch '
    f'{args.sample_batch}, scale {args.scale:g}; {os.cpu_count()} cores, '
    f'load average {os.getloadavg()[0]:.1f}',
    flush=True,
  )

  runs: List[Dict[str, Any]] = []
  started = time.monotonic()
  for rnd in range(args.rounds):
    servers = {impl: start_server(impl, args) for impl in impls}
    try:
      order = impls if rnd % 2 == 0 else impls[::-1]
      for mode, tables, payload, c in points:
        for impl in order:
          server = servers[impl]
          if not server.alive():
            print(f'  [{rnd}] {impl} server died; restarting', flush=True)
            server = servers[impl] = start_server(impl, args)
          try:
            r = run_point(server, driver, args, mode, c, payload, tables)
          except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(
              f'  [{rnd}] {impl} {mode} {c} clients: FAILED {e}', flush=True
            )
            continue
          r.update(impl=impl, round=rnd)
          runs.append(r)
          print(
            f'  [{rnd}] {impl:4} {mode:6} {tables:2d} tables '
            f'{payload_label(payload):>7} {c:3d} clients: '
            f'{r["items_per_s"]:9,.0f} items/s {r["mb_per_s"]:7,.1f} MB/s, '
            f'server {r["cpu_us_per_item"]:6.1f} us CPU/item '
            f'({r["server_cores"]:.2f} cores), drivers '
            f'{r["driver_cores"]:.2f} cores, p50/p99 '
            f'{r["p50_ms"]:.2f}/{r["p99_ms"]:.2f} ms '
            f'[{time.monotonic() - started:.0f} s]',
            flush=True,
          )
    finally:
      for server in servers.values():
        server.stop()

  rows = summarize(runs)
  print()
  print(
    f'medians over {args.rounds} rounds; ratio = tf_reverb / dm-reverb per '
    'round, median (range)'
  )
  print_rows(rows)
  print()
  goal_lines = goals(rows, max(clients))
  for line in goal_lines:
    print(line)
  ceiling = None
  if not args.no_ceiling:
    ceiling = loopback_ceiling(max(payloads))
    if ceiling:
      print(
        f'loopback ceiling (one gRPC stream of {payload_label(max(payloads))} '
        f'messages, //benchmarks:loopback_ceiling): '
        f'{ceiling["grpc_mb_per_s"]:,.0f} MB/s'
      )
  print(
    f'machine: {os.cpu_count()} cores, load average '
    f'{os.getloadavg()[0]:.1f} at the end; {time.monotonic() - started:.0f} s'
  )
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(
        dict(runs=runs, rows=rows, goals=goal_lines, ceiling=ceiling),
        f,
        indent=1,
      )
  if args.plot:
    plot(
      rows,
      args.plot,
      f'Reverb paper grid (one server, chunk and sequence length 1): '
      f'tf_reverb vs dm-reverb 0.14, medians of {args.rounds} rounds, '
      f'{os.cpu_count()}-core machine',
    )
    print(f'plot: {args.plot}')


if __name__ == '__main__':
  main()
