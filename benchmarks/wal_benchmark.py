"""Write-ahead log: what it costs writers, checkpoints and restarts.

One run on this machine prints three parts:

1. Writes. Items/s and p50/p99 confirmation latency (request sent -> key
   back: what create_item + flush waits for) with the log off, async
   (confirmed after write(2), fdatasync every --wal_fsync_interval_ms) and
   sync (confirmed after fdatasync; one writer thread, one fdatasync per
   batch: group commit), for small items (100 float32 = 400 B) and large
   ones (25,600 float32 = 100 KiB), with 1 writer and with 100 concurrent
   writers. Writers are closed-loop and unpaced: each sends its next item as
   soon as the previous one is confirmed, as an actor calling create_item +
   flush per step would. The load is benchmarks/concurrent_load.cc (gRPC's
   callback API, one connection per writer, random payload bytes so nothing
   compresses), also for 1 writer, so the client is never the bottleneck.
   Every run is bounded by an item count (items per writer), never by time,
   on a fresh server and fresh directories; the durabilities go in turns,
   rotated every repeat, and the table shows medians over --repeats (each
   ratio to "off" is taken within one repeat, then its median). Also the
   server's CPU time per 1000 items (/proc), and from its /metrics
   (--metrics_port): records appended, fdatasyncs and their mean duration,
   records per write(2) and per fdatasync (tf_reverb_wal_records_total,
   tf_reverb_wal_fsyncs_total, tf_reverb_wal_batch_records), which show the
   group commit.
2. Checkpoints. A table of --ckpt_items items of 4 KiB, checkpointed, then
   1% more items (200 of 20,000) and an incremental checkpoint (the
   default), then a full one (checkpoint(full=True)), --repeats rounds of
   +1% / incremental / full. Time of the Checkpoint call and bytes written:
   the growth of the checkpoint directory (sum of its files; the server
   keeps every checkpoint here, so nothing is retired in between),
   cross-checked with the server's tf_reverb_checkpoint_last_save_bytes.
   benchmarks/checkpoint_benchmark.cc measures the same in process with
   larger items; this is the cross-check through the reverb_server binary.
3. Restarts. The same --ckpt_items items written with the log on (sync) and
   no checkpoint; the server is SIGKILLed and started again on the same
   directories: the time from starting the process until it serves (its
   "started" line, and a ServerInfo answered), the records its
   "component=wal event=replayed" line counts and its elapsed_ms. Then a
   checkpoint of the same content, SIGKILL, and the same restart restored
   from the checkpoint (an empty log after it). Each restart is repeated
   --repeats times (medians); every restart must bring back every item.

The goals are printed beside the figures, not asserted: async within 10% of
off in items/s for small items; sync at least 50% of off with 100 writers;
an incremental checkpoint after a 1% change at most 2% of a full one's
bytes.

  .venv/bin/python benchmarks/wal_benchmark.py [--quick] [--repeats 5]
      [--dir DIR] [--json FILE]

--dir is where the checkpoint and log directories go (default: a temporary
directory on the file system of /tmp; fdatasync costs what that disk costs,
so do not point it at a tmpfs). Absolute figures on a shared 2-core machine
drift; the ratios within one run are what to read.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import concurrent_clients  # pylint: disable=g-import-not-at-top,wrong-import-position
from concurrent_clients import TABLE, percentile  # pylint: disable=g-import-not-at-top,wrong-import-position
from shard_processes import ShardProcess  # pylint: disable=g-import-not-at-top,wrong-import-position

import tf_reverb as reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

DURABILITIES = ('off', 'async', 'sync')
SMALL_FLOATS = 100  # 400 B
LARGE_FLOATS = 25_600  # 100 KiB
CKPT_FLOATS = 1_024  # 4 KiB
# A uniform table of at most concurrent_clients.MAX_SIZE items whose inserts
# never wait (MinSize(1)).
CONFIG = concurrent_clients.our_config('minsize')

GOAL_ASYNC = 0.90  # async items/s >= 90% of off, small items
GOAL_SYNC = 0.50  # sync items/s >= 50% of off, 100 writers
GOAL_INCREMENTAL = 0.02  # incremental bytes <= 2% of a full checkpoint's


# --------------------------------------------------------------------------
# Servers and the load.


class Server:
  """A reverb_server on `workdir`/checkpoints (and /wal unless durability is
  'off'), with metrics; killed (SIGKILL) by pid."""

  def __init__(
    self,
    workdir: str,
    durability: str,
    extra_args: Tuple[str, ...] = (),
  ):
    self.checkpoint_dir = os.path.join(workdir, 'checkpoints')
    args = [
      '--host=127.0.0.1',
      '--metrics_host=127.0.0.1',
      '--metrics_port=0',
      # Every checkpoint stays: a directory's growth is what a save wrote.
      '--keep_checkpoints=1000',
      '--checkpoint_on_exit=false',
      *extra_args,
    ]
    if durability != 'off':
      args += [
        f'--wal_dir={os.path.join(workdir, "wal")}',
        f'--wal_durability={durability}',
      ]
    self.spawned = time.monotonic()
    self.process = ShardProcess(
      checkpoint_dir=self.checkpoint_dir, config=CONFIG, extra_args=args
    )
    self.started_s = time.monotonic() - self.spawned
    try:
      self.client = reverb.Client(self.process.address)
      self.client.server_info(timeout=120)
      self.serving_s = time.monotonic() - self.spawned
      started = self.line('event=started ')
      self.metrics_port = int(
        re.search(r'metrics_port=(\d+)', started).group(1)
      )
    except BaseException:
      self.process.kill()
      raise

  @property
  def address(self) -> str:
    return self.process.address

  def line(self, marker: str) -> str:
    """The server's first log line holding `marker` ('' if none)."""
    return next((l for l in self.process.lines if marker in l), '')

  def field(self, marker: str, name: str) -> Optional[int]:
    """The integer `name=` of the first log line holding `marker`."""
    found = re.search(rf'\b{name}=(\d+)', self.line(marker))
    return int(found.group(1)) if found else None

  def metrics(self) -> Dict[str, float]:
    """The unlabelled samples of /metrics (histograms: _sum and _count)."""
    url = f'http://127.0.0.1:{self.metrics_port}/metrics'
    with urllib.request.urlopen(url, timeout=30) as response:
      text = response.read().decode()
    values = {}
    for line in text.splitlines():
      parts = line.split()
      if len(parts) == 2 and not line.startswith('#') and '{' not in line:
        values[parts[0]] = float(parts[1])
    return values

  def cpu_seconds(self) -> float:
    """The server's CPU time so far (concurrent_clients' reading of
    /proc/<pid>/stat, which needs only a pid)."""
    return concurrent_clients.ServerProcess.cpu_seconds(self.process)

  def size(self) -> int:
    return self.client.server_info(timeout=120)[TABLE].current_size

  def kill(self) -> None:
    self.process.kill()


def load(
  driver: str,
  address: str,
  writers: int,
  items_per_writer: int,
  floats: int,
  warmup: bool = True,
) -> Dict[str, Any]:
  """Closed-loop writers (each sends its next item once the last one is
  confirmed) from one concurrent_load process; its result object."""
  result = subprocess.run(
    [
      driver,
      f'--target={address}',
      f'--writers={writers}',
      '--rate=0',
      f'--items={items_per_writer}',
      f'--table={TABLE}',
      f'--step_floats={floats}',
      '--random_payload',
      f'--warmup_items={1 if warmup else 0}',
      '--deadline_seconds=900',  # a hang guard, not a bound
    ],
    capture_output=True,
    text=True,
    check=False,
  )
  lines = [l for l in result.stdout.splitlines() if '"event":"result"' in l]
  if result.returncode != 0 or not lines:
    raise RuntimeError(
      f'concurrent_load exit {result.returncode}: {result.stderr[-500:]}'
    )
  out = json.loads(lines[-1])
  if out['errors'] or out['hung'] or out['unexpected_keys']:
    raise RuntimeError(f'concurrent_load: {out["errors"]}, hung {out["hung"]}')
  return out


def dir_bytes(path: str) -> int:
  """Bytes of every file under `path`."""
  total = 0
  for parent, _, files in os.walk(path):
    for name in files:
      total += os.path.getsize(os.path.join(parent, name))
  return total


class Workdir:
  """A fresh directory under `base`, removed on exit, then os.sync(): the
  next run does not share the disk with this one's writeback."""

  def __init__(self, base: str):
    self.path = tempfile.mkdtemp(prefix='wal_benchmark_', dir=base)

  def __enter__(self) -> str:
    return self.path

  def __exit__(self, *unused) -> None:
    shutil.rmtree(self.path, ignore_errors=True)
    os.sync()


# --------------------------------------------------------------------------
# 1. Writes.


def write_run(
  driver: str,
  base: str,
  durability: str,
  writers: int,
  items_per_writer: int,
  floats: int,
) -> Dict[str, Any]:
  """One fresh server, one closed-loop load; its figures."""
  with Workdir(base) as workdir:
    server = Server(workdir, durability)
    try:
      cpu_before = server.cpu_seconds()
      out = load(driver, server.address, writers, items_per_writer, floats)
      cpu = server.cpu_seconds() - cpu_before
      metrics = server.metrics()
      stored = server.size()
    finally:
      server.kill()
  latencies = sorted(l / 1000 for l in out['latencies_us'])
  total = out['confirmed'] + out['warmup_confirmed']
  records = metrics.get('tf_reverb_wal_records_total', 0)
  fsyncs = metrics.get('tf_reverb_wal_fsyncs_total', 0)
  writes = metrics.get('tf_reverb_wal_batch_records_count', 0)
  fsync_s = metrics.get('tf_reverb_wal_fsync_duration_seconds_sum', 0)
  if stored != min(concurrent_clients.MAX_SIZE, total):
    raise RuntimeError(f'{durability}: {stored} items stored, {total} sent')
  return dict(
    durability=durability,
    writers=writers,
    item_bytes=floats * 4,
    items=out['confirmed'],
    items_per_s=out['confirmed'] / out['send_seconds'],
    mb_per_s=out['confirmed'] * floats * 4 / out['send_seconds'] / 1e6,
    p50_ms=percentile(latencies, 0.50),
    p99_ms=percentile(latencies, 0.99),
    # Server CPU (user + system) per 1000 items, warm-up items included.
    cpu_ms_per_k=cpu * 1e6 / total,
    # The log's counters over the whole run, warm-up items included: its
    # records (an item's chunk and its insert are 2), write(2) calls of the
    # writer thread (one per batch), fdatasyncs and their mean duration.
    records=records,
    writes=writes,
    fsyncs=fsyncs,
    records_per_write=records / writes if writes else 0,
    records_per_fsync=records / fsyncs if fsyncs else 0,
    fsync_ms=fsync_s * 1000 / fsyncs if fsyncs else 0,
    wal_bytes=metrics.get('tf_reverb_wal_written_bytes_total', 0),
  )


def writes(args: argparse.Namespace, driver: str) -> List[Dict[str, Any]]:
  cells = [
    ('small', SMALL_FLOATS, 1, args.small_items),
    ('small', SMALL_FLOATS, 100, args.small_items_per_writer),
    ('large', LARGE_FLOATS, 1, args.large_items),
    ('large', LARGE_FLOATS, 100, args.large_items_per_writer),
  ]
  print(
    '1. Writes: closed-loop writers, items per writer '
    + ', '.join(f'{n} ({w} x {f * 4:,} B)' for _, f, w, n in cells)
    + f'; {args.repeats} repeats',
    flush=True,
  )
  runs = []
  for repeat in range(args.repeats):
    for size, floats, writers, items in cells:
      order = list(DURABILITIES)
      shift = repeat % len(order)  # every repeat another one goes first
      for durability in order[shift:] + order[:shift]:
        r = write_run(driver, args.dir, durability, writers, items, floats)
        r.update(repeat=repeat, size=size)
        runs.append(r)
        print(
          f'  [{repeat}] {size} x {writers:3d} writers {durability:5}: '
          f'{r["items_per_s"]:8,.0f} items/s {r["mb_per_s"]:7.1f} MB/s '
          f'p50/p99 {r["p50_ms"]:.2f}/{r["p99_ms"]:.2f} ms',
          flush=True,
        )

  print()
  print(
    f'{"item":>9} {"writers":>7} {"log":>5} {"items/s":>8} {"MB/s":>6} '
    f'{"p50 ms":>7} {"p99 ms":>7} {"x off items/s":>13} '
    f'{"x off p99":>9} {"CPU ms/1k":>9} {"records":>8} {"fsyncs":>7} '
    f'{"records/write":>13} {"records/fsync":>13} {"fsync ms":>8}'
  )
  rows = []
  for size, floats, writers, _ in cells:
    for durability in DURABILITIES:
      mine = [
        r
        for r in runs
        if r['size'] == size
        and r['writers'] == writers
        and r['durability'] == durability
      ]
      ratios, p99_ratios = [], []
      for repeat in range(args.repeats):
        pair = {
          r['durability']: r
          for r in runs
          if r['size'] == size
          and r['writers'] == writers
          and r['repeat'] == repeat
        }
        ratios.append(
          pair[durability]['items_per_s'] / pair['off']['items_per_s']
        )
        p99_ratios.append(pair[durability]['p99_ms'] / pair['off']['p99_ms'])
      row = dict(
        size=size,
        item_bytes=floats * 4,
        writers=writers,
        durability=durability,
        **{
          key: statistics.median(r[key] for r in mine)
          for key in (
            'items_per_s',
            'mb_per_s',
            'p50_ms',
            'p99_ms',
            'cpu_ms_per_k',
            'records',
            'fsyncs',
            'records_per_write',
            'records_per_fsync',
            'fsync_ms',
          )
        },
        ratio=statistics.median(ratios),
        ratios=ratios,
        p99_ratio=statistics.median(p99_ratios),
      )
      rows.append(row)
      wal = durability != 'off'
      print(
        f'{floats * 4:>7,} B {writers:7d} {durability:>5} '
        f'{row["items_per_s"]:8,.0f} {row["mb_per_s"]:6.1f} '
        f'{row["p50_ms"]:7.2f} {row["p99_ms"]:7.2f} '
        f'{row["ratio"]:13.2f} {row["p99_ratio"]:9.2f} '
        f'{row["cpu_ms_per_k"]:9.0f} '
        + (
          f'{row["records"]:8,.0f} {row["fsyncs"]:7,.0f} '
          f'{row["records_per_write"]:13.1f} '
          f'{row["records_per_fsync"]:13.1f} {row["fsync_ms"]:8.2f}'
          if wal
          else f'{"-":>8} {"-":>7} {"-":>13} {"-":>13} {"-":>8}'
        )
      )
  print(
    '(medians over the repeats; "x off" = the ratio to the log off within '
    'each repeat, its median; CPU: the server\'s per 1000 items; records, '
    'fsyncs, records per write(2) and per fdatasync, and the mean fdatasync '
    "from /metrics over the run, warm-up included: an item's chunk and "
    'its insert are 2 records)'
  )
  return rows


def goals_of_writes(rows: List[Dict[str, Any]]) -> List[str]:
  lines = []
  for row in rows:
    per_repeat = ', '.join(f'{x:.2f}' for x in row['ratios'])
    if row['durability'] == 'async' and row['size'] == 'small':
      met = 'met' if row['ratio'] >= GOAL_ASYNC else 'NOT met'
      lines.append(
        f'async within 10% of off, small items, {row["writers"]} writers: '
        f'{row["ratio"]:.2f}x ({per_repeat}): {met}'
      )
    if row['durability'] == 'sync' and row['writers'] == 100:
      met = 'met' if row['ratio'] >= GOAL_SYNC else 'NOT met'
      lines.append(
        f'sync >= 50% of off, 100 writers, {row["size"]} items: '
        f'{row["ratio"]:.2f}x ({per_repeat}): {met}'
      )
  return lines


# --------------------------------------------------------------------------
# 2. Checkpoints.


def checkpoints(args: argparse.Namespace, driver: str) -> Dict[str, Any]:
  items = args.ckpt_items
  change = max(1, items // 100)
  writers = 20
  print(
    f'2. Checkpoints: {items:,} items of {CKPT_FLOATS * 4:,} B, checkpointed, '
    f'then {args.repeats} rounds of +{change} items (1%) / incremental / full',
    flush=True,
  )
  saves: Dict[str, List[Dict[str, float]]] = {
    'base': [],
    'incremental': [],
    'full': [],
  }
  with Workdir(args.dir) as workdir:
    server = Server(workdir, 'off')
    try:

      def save(kind: str) -> None:
        before = dir_bytes(server.checkpoint_dir)
        start = time.monotonic()
        path = server.client.checkpoint(full=kind == 'full')
        seconds = time.monotonic() - start
        written = dir_bytes(server.checkpoint_dir) - before
        reported = server.metrics()['tf_reverb_checkpoint_last_save_bytes']
        files = {
          name: os.path.getsize(os.path.join(path, name))
          for name in sorted(os.listdir(path))
        }
        saves[kind].append(
          dict(seconds=seconds, bytes=written, reported=reported, files=files)
        )
        print(
          f'  {kind:11}: {written / 1e6:7.2f} MB written in {seconds:.3f} s '
          f'(server: {reported / 1e6:.2f} MB; '
          + ', '.join(f'{n} {b / 1e6:.2f}' for n, b in files.items() if b)
          + ')',
          flush=True,
        )

      load(
        driver,
        server.address,
        writers,
        items // writers,
        CKPT_FLOATS,
        warmup=False,
      )
      if items % writers:
        load(driver, server.address, 1, items % writers, CKPT_FLOATS, False)
      save('base')
      for _ in range(args.repeats):
        load(driver, server.address, 1, change, CKPT_FLOATS, warmup=False)
        save('incremental')
        save('full')
      size = server.size()
    finally:
      server.kill()
  if size != items + args.repeats * change:
    raise RuntimeError(f'{size} items in the table')
  result = {}
  for kind in ('incremental', 'full'):
    result[kind] = {
      key: statistics.median(s[key] for s in saves[kind])
      for key in ('seconds', 'bytes', 'reported')
    }
  result['base'] = saves['base'][0]
  result['byte_ratio'] = statistics.median(
    i['bytes'] / f['bytes'] for i, f in zip(saves['incremental'], saves['full'])
  )
  result['time_ratio'] = statistics.median(
    i['seconds'] / f['seconds']
    for i, f in zip(saves['incremental'], saves['full'])
  )
  print()
  print(
    f'{"checkpoint after +1%":>22} {"written MB":>10} {"server MB":>9} {"save s":>7}'
  )
  for kind in ('incremental', 'full'):
    r = result[kind]
    print(
      f'{kind:>22} {r["bytes"] / 1e6:10.2f} {r["reported"] / 1e6:9.2f} '
      f'{r["seconds"]:7.3f}'
    )
  print(
    f'incremental / full: {100 * result["byte_ratio"]:.2f}% of the bytes, '
    f'{100 * result["time_ratio"]:.0f}% of the time (medians of '
    f'{args.repeats} rounds)'
  )
  last = saves['incremental'][-1]['files']
  table_items = items + args.repeats * change
  print(
    f'of the last incremental one, items.tfrecord (every item\'s record, '
    f'{table_items:,} items) is {last.get("items.tfrecord", 0) / 1e6:.2f} MB '
    f'({last.get("items.tfrecord", 0) / table_items:.0f} B an item), '
    f'chunks.tfrecord (the {change} new chunks) '
    f'{last.get("chunks.tfrecord", 0) / 1e6:.2f} MB'
  )
  result['last_incremental_files'] = last
  return result


# --------------------------------------------------------------------------
# 3. Restarts.


def restart(
  workdir: str, durability: str, expected: int, what: str
) -> Dict[str, Any]:
  """Starts a server on `workdir`, checks it holds `expected` items, and
  kills it; how long it took to serve, and what its log says."""
  server = Server(workdir, durability)
  try:
    size = server.size()
    r = dict(
      what=what,
      started_s=server.started_s,
      serving_s=server.serving_s,
      replayed_records=server.field('event=replayed ', 'records'),
      replay_ms=server.field('event=replayed ', 'elapsed_ms'),
      restore_ms=server.field(
        'component=checkpointer event=loaded ', 'elapsed_ms'
      ),
    )
  finally:
    server.kill()
  if size != expected:
    raise RuntimeError(f'{what}: {size} items back, {expected} written')
  print(
    f'  {what}: serving after {r["serving_s"]:.3f} s (started line '
    f'{r["started_s"]:.3f} s)'
    + (
      f', replayed {r["replayed_records"]:,} records in {r["replay_ms"]} ms'
      if r['replayed_records']
      else ''
    )
    + (
      f', checkpoint loaded in {r["restore_ms"]} ms'
      if r['restore_ms'] is not None
      else ''
    ),
    flush=True,
  )
  return r


def restarts(args: argparse.Namespace, driver: str) -> Dict[str, Any]:
  items = args.ckpt_items
  writers = 20
  print(
    f'3. Restarts: {items:,} items of {CKPT_FLOATS * 4:,} B written with the '
    f'log on (sync), no checkpoint; SIGKILL and restart, {args.repeats} times; '
    'then the same from a checkpoint',
    flush=True,
  )
  runs: Dict[str, List[Dict[str, Any]]] = {}
  with Workdir(args.dir) as workdir:
    server = Server(workdir, 'sync')
    empty = dict(serving_s=server.serving_s, started_s=server.started_s)
    try:
      load(
        driver, server.address, writers, items // writers, CKPT_FLOATS, False
      )
      if items % writers:
        load(driver, server.address, 1, items % writers, CKPT_FLOATS, False)
      wal_bytes = server.metrics()['tf_reverb_wal_written_bytes_total']
    finally:
      server.kill()
    runs['log'] = [
      restart(workdir, 'sync', items, 'from the log')
      for _ in range(args.repeats)
    ]
    server = Server(workdir, 'sync')
    try:
      server.client.checkpoint(full=True)
    finally:
      server.kill()
    checkpoint_bytes = dir_bytes(server.checkpoint_dir)
    runs['checkpoint'] = [
      restart(workdir, 'sync', items, 'from a checkpoint')
      for _ in range(args.repeats)
    ]
  result: Dict[str, Any] = dict(
    empty=empty, wal_mb=wal_bytes / 1e6, checkpoint_mb=checkpoint_bytes / 1e6
  )
  for key, mine in runs.items():
    result[key] = {
      field: statistics.median(r[field] for r in mine)
      for field in ('serving_s', 'started_s')
    }
    for field in ('replayed_records', 'replay_ms', 'restore_ms'):
      values = [r[field] for r in mine if r[field] is not None]
      result[key][field] = statistics.median(values) if values else None
  print()
  print(
    f'{"restart":>18} {"serving s":>9} {"replayed records":>16} '
    f'{"replay ms":>9} {"checkpoint load ms":>18} {"on disk MB":>10}'
  )
  print(
    f'{"empty (first)":>18} {empty["serving_s"]:9.3f} {"-":>16} {"-":>9} '
    f'{"-":>18} {"-":>10}'
  )
  for key, name, mb in (
    ('log', 'from the log', result['wal_mb']),
    ('checkpoint', 'from a checkpoint', result['checkpoint_mb']),
  ):
    r = result[key]
    print(
      f'{name:>18} {r["serving_s"]:9.3f} '
      f'{r["replayed_records"] or 0:16,.0f} {r["replay_ms"] or 0:9.0f} '
      f'{r["restore_ms"] if r["restore_ms"] is not None else "-":>18} '
      f'{mb:10.1f}'
    )
  print(
    f'(medians of {args.repeats} restarts, every one with all {items:,} items '
    'back; "serving" = from starting the process to a ServerInfo answered; '
    'the files are in the page cache, as after a process crash)'
  )
  return result


# --------------------------------------------------------------------------


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument(
    '--quick', action='store_true', help='small counts, under a minute'
  )
  parser.add_argument('--repeats', type=int, help='default 5 (--quick: 1)')
  parser.add_argument('--small_items', type=int, help='1 writer, 400 B items')
  parser.add_argument(
    '--small_items_per_writer', type=int, help='100 writers, 400 B items'
  )
  parser.add_argument('--large_items', type=int, help='1 writer, 100 KiB')
  parser.add_argument(
    '--large_items_per_writer', type=int, help='100 writers, 100 KiB'
  )
  parser.add_argument(
    '--ckpt_items', type=int, help='4 KiB items of parts 2 and 3'
  )
  parser.add_argument(
    '--dir', help='where the directories go (default: tempfile\'s)'
  )
  parser.add_argument('--json', help='also write the figures to this file')
  parser.add_argument(
    '--parts', default='1,2,3', help='which parts to run (default all)'
  )
  args = parser.parse_args()
  defaults = dict(
    repeats=(1, 5),
    small_items=(1_000, 10_000),
    small_items_per_writer=(50, 300),
    large_items=(200, 2_000),
    large_items_per_writer=(5, 40),
    ckpt_items=(5_000, 20_000),
  )
  for key, (quick, full) in defaults.items():
    if getattr(args, key) is None:
      setattr(args, key, quick if args.quick else full)
  parts = {int(p) for p in args.parts.split(',') if p}

  os.environ.setdefault(
    'PYTHON_BIN_PATH', os.path.join(ROOT, '.venv', 'bin', 'python')
  )
  driver = concurrent_clients.driver_binary()
  base = args.dir or tempfile.gettempdir()
  os.makedirs(base, exist_ok=True)
  args.dir = tempfile.mkdtemp(prefix='wal_benchmark_', dir=base)
  fs = subprocess.run(
    ['df', '--output=fstype', args.dir], capture_output=True, text=True
  ).stdout.split()[-1:]
  print(
    f'wal_benchmark: {os.cpu_count()} cores, load average '
    f'{os.getloadavg()[0]:.1f}, directories on {", ".join(fs) or "?"} '
    f'({args.dir})',
    flush=True,
  )
  figures: Dict[str, Any] = {}
  try:
    if 1 in parts:
      figures['writes'] = writes(args, driver)
      print()
    if 2 in parts:
      figures['checkpoints'] = checkpoints(args, driver)
      print()
    if 3 in parts:
      figures['restarts'] = restarts(args, driver)
      print()
  finally:
    shutil.rmtree(args.dir, ignore_errors=True)

  print('Goals (printed, not asserted):')
  if 'writes' in figures:
    for line in goals_of_writes(figures['writes']):
      print('  ' + line)
  if 'checkpoints' in figures:
    ratio = figures['checkpoints']['byte_ratio']
    met = 'met' if ratio <= GOAL_INCREMENTAL else 'NOT met'
    print(
      f'  incremental after 1% <= 2% of a full checkpoint\'s bytes: '
      f'{100 * ratio:.2f}%: {met}'
    )
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(figures, f, indent=1)


if __name__ == '__main__':
  main()
