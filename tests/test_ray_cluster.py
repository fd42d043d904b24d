"""tf_reverb.ray.ReplayCluster on a local Ray cluster (ray.init(num_cpus=2)).

Real reverb_server processes owned by Ray actors, real sockets; shards are
killed with SIGKILL by pid. Every wait is for an event (items confirmed,
samples taken, a pid gone, a restarted actor answering) with a deadline only
as a hang guard.

Writers, datasets and priority updates go through the sharded
``cluster.address`` (a sharded ``Client`` sends mutate_priorities to every
shard); checks of one shard use ``ReplayCluster.shard_clients``.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Set

import numpy as np
import pytest

import tf_reverb as reverb

ray = pytest.importorskip(
  'ray', reason='Ray is not installed (scripts/setup.sh installs it)'
)
from tf_reverb import ray as reverb_ray  # pylint: disable=g-import-not-at-top

# Hang guards (seconds); no wait below is expected to come near them.
HANG_GUARD = 180
FLUSH_TIMEOUT_MS = 120_000
# Writers created while looking for ones on each shard (round_robin spreads
# new streams; a handful suffice).
MAX_PROBE_WRITERS = 40


def _wait_for(
  condition: Callable[[], bool], what: str, timeout: float = HANG_GUARD
) -> None:
  """Polls `condition` until true; fails the test after `timeout` seconds."""
  deadline = time.monotonic() + timeout
  while not condition():
    if time.monotonic() > deadline:
      pytest.fail(f'timed out after {timeout}s waiting for {what}')
    time.sleep(0.02)


def _pid_alive(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(') ')[-1][0] != 'Z'
  except (FileNotFoundError, ProcessLookupError):
    # Gone before the open, or between the open and the read (ESRCH).
    return False


@pytest.fixture(scope='module')
def ray_cluster():
  """A local Ray of 2 CPUs for this module; shut down (and its temp dir
  removed) afterwards."""
  temp_dir = tempfile.mkdtemp(prefix='rt', dir='/tmp')  # short: unix sockets
  os.environ.setdefault('RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO', '0')
  ray.init(
    num_cpus=2,
    include_dashboard=False,
    object_store_memory=100 * 1024 * 1024,
    _temp_dir=temp_dir,
    logging_level='WARNING',
  )
  try:
    yield
  finally:
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _tables():
  return [
    # What the dataset samples; prioritized so a priority update shows.
    reverb.Table(
      'replay',
      reverb.selectors.Prioritized(1.0),
      reverb.selectors.Fifo(),
      100_000,
      reverb.rate_limiters.MinSize(1),
    ),
    # Every item once more, drained at the end to see where each one is.
    reverb.Table(
      'ledger',
      reverb.selectors.Fifo(),
      reverb.selectors.Fifo(),
      100_000,
      reverb.rate_limiters.MinSize(1),
      max_times_sampled=1,
    ),
  ]


@pytest.fixture
def cluster(ray_cluster, tmp_path):
  """A 2-shard ReplayCluster checkpointing under tmp_path."""
  del ray_cluster
  c = reverb_ray.ReplayCluster(
    _tables(),
    num_shards=2,
    checkpoint_dir=str(tmp_path / 'checkpoints'),
    resources_per_shard={'num_cpus': 0.5},
  )
  pids = c.shard_pids
  try:
    yield c
  finally:
    c.shutdown()
    # The server pids seen first and last (restarted shards included).
    last = [info['pid'] for info in c._infos]  # pylint: disable=protected-access
    for pid in pids + last:
      assert not _pid_alive(pid), f'reverb_server {pid} outlived shutdown'


def _sizes(cluster, table: str) -> List[int]:
  return [info[table].current_size for info in cluster.server_info(timeout=60)]


def _write(writer, item_id: int) -> None:
  writer.append({'id': np.int64(item_id)})
  trajectory = writer.history['id'][-1:]
  writer.create_item('replay', 1.0, trajectory)
  writer.create_item('ledger', 1.0, trajectory)


class _Ids:
  """Hands out unique item ids."""

  def __init__(self):
    self._next = 0
    self._lock = threading.Lock()

  def take(self) -> int:
    with self._lock:
      self._next += 1
      return self._next


def _writers_on_each_shard(
  cluster,
  client,
  ids: _Ids,
  per_shard: int,
  max_writers: int = MAX_PROBE_WRITERS,
  pause: float = 0.0,
):
  """Creates writers (each writes and flushes one item) until `per_shard` of
  them stream to each shard; returns ({shard: [writers]}, {id: shard}).

  Writers on a shard once `per_shard` were found are closed at once. With a
  `pause`, at most one writer per `pause` seconds: a channel whose connection
  to a restarted shard failed retries it only after gRPC's reconnect backoff
  (up to 30 s), so new streams reach that shard only after some time.
  """
  on_shard: Dict[int, list] = {i: [] for i in range(cluster.num_shards)}
  placed: Dict[int, int] = {}
  before = _sizes(cluster, 'ledger')
  for _ in range(max_writers):
    if all(len(w) >= per_shard for w in on_shard.values()):
      break
    if pause:
      time.sleep(pause)  # pacing the probe, not synchronisation
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    item_id = ids.take()
    _write(writer, item_id)
    writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)
    after = _sizes(cluster, 'ledger')
    (shard,) = [i for i in range(len(after)) if after[i] != before[i]]
    before = after
    placed[item_id] = shard
    if len(on_shard[shard]) >= per_shard:
      writer.close()
    else:
      on_shard[shard].append(writer)
  assert all(len(w) >= per_shard for w in on_shard.values()), (
    f'{max_writers} new writers did not reach every shard: '
    f'{ {s: len(w) for s, w in on_shard.items()} }'
  )
  return on_shard, placed


def _drain_ledgers(cluster) -> Dict[int, List[int]]:
  """Shard -> ids of every item in its ledger (taking them out)."""
  found = {}
  for shard, client in enumerate(cluster.shard_clients()):
    size = client.server_info(60)['ledger'].current_size
    found[shard] = (
      [
        int(sample.data[0][0])
        for sample in client.sample(
          'ledger', size, emit_timesteps=False, timeout=60
        )
      ]
      if size
      else []
    )
  return found


def _dataset(address: str):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  return reverb.TrajectoryDataset(
    address,
    'replay',
    dtypes={'id': tf.int64},
    shapes={'id': tf.TensorShape([1])},
    max_in_flight_samples_per_worker=2,
    num_workers_per_iterator=4,
    # New streams often, so round_robin moves them over the shards.
    max_samples_per_stream=4,
    rate_limiter_timeout_ms=120_000,
  )  # a hang guard: a stalled dataset ends


def _sampled_ids(iterator, n: int) -> List[int]:
  return [int(next(iterator).data['id'].numpy()[0]) for _ in range(n)]


def test_import_tf_reverb_does_not_import_ray():
  code = (
    'import sys, tf_reverb; assert "ray" not in sys.modules, '
    '"import tf_reverb imported ray"; import tf_reverb.ray; '
    'assert "ray" in sys.modules'
  )
  result = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    timeout=HANG_GUARD,
  )
  assert result.returncode == 0, result.stderr


def test_table_configs_are_checked_before_anything_starts():
  with pytest.raises(ValueError, match='num_shards'):
    reverb_ray.ReplayCluster(_tables(), num_shards=0)
  with pytest.raises(TypeError, match='PriorityTableCheckpoint'):
    reverb_ray.ReplayCluster(['replay'], num_shards=1)
  with pytest.raises(ValueError, match='repeated'):
    reverb_ray.ReplayCluster(_tables() + _tables(), num_shards=1)
  with pytest.raises(ValueError, match='resources_per_shard'):
    reverb_ray.ReplayCluster(
      _tables(), num_shards=1, resources_per_shard={'cpus': 1}
    )
  with pytest.raises(ValueError, match="table 'bad'"):
    reverb_ray.server_config(
      [
        {
          'table_name': 'bad',
          'max_size': 0,
          'sampler': {'uniform': True},
          'remover': {'fifo': True},
        }
      ]
    )
  with pytest.raises(ValueError, match='Invalid table config'):
    reverb_ray.server_config([{'table_name': 'bad', 'no_such_field': 1}])


def test_configs_of_tables_and_dicts_match():
  table = reverb.Table(
    't',
    reverb.selectors.Prioritized(0.8),
    reverb.selectors.Fifo(),
    123,
    reverb.rate_limiters.SampleToInsertRatio(2.0, 10, 5.0),
    max_times_sampled=3,
  )
  config = reverb_ray.table_config(table)
  assert config.table_name == 't' and config.max_size == 123
  assert config.max_times_sampled == 3
  assert config.sampler.prioritized.priority_exponent == pytest.approx(0.8)
  assert config.rate_limiter.samples_per_insert == 2.0
  assert config.rate_limiter.min_size_to_sample == 10
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top

  again = reverb_ray.table_config(json_format.MessageToDict(config))
  assert again == config


def test_grpc_target():
  assert reverb_ray.grpc_target(['10.0.0.1:5']) == '10.0.0.1:5'
  assert (
    reverb_ray.grpc_target(['10.0.0.1:5', '10.0.0.2:6'])
    == 'ipv4:10.0.0.1:5,10.0.0.2:6'
  )
  assert (
    reverb_ray.grpc_target(['[::1]:5', '[fe80::1]:6'])
    == 'ipv6:[::1]:5,[fe80::1]:6'
  )
  with pytest.raises(ValueError, match='mix'):
    reverb_ray.grpc_target(['10.0.0.1:5', '[::1]:6'])


def test_items_spread_dataset_reads_both_and_priorities_reach_their_shard(
  cluster,
):
  infos = cluster.shard_infos()
  assert len({info['pid'] for info in infos}) == 2
  assert cluster.address == 'ipv4:' + ','.join(cluster.shard_addresses)
  for info in infos:
    assert not info['address'].startswith('127.'), info  # the node's IP
  client = reverb.Client(cluster.address)
  ids = _Ids()
  on_shard, _ = _writers_on_each_shard(cluster, client, ids, per_shard=2)
  for writers in on_shard.values():
    for writer in writers:
      for _ in range(10):
        _write(writer, ids.take())
      writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)
      writer.close()
  sizes = _sizes(cluster, 'replay')
  assert all(size >= 20 for size in sizes), sizes
  assert sum(sizes) == ids.take() - 1

  # Priorities: a key of each shard, updated through the sharded client
  # (every shard gets the request; keys unknown to a shard are ignored).
  shard_clients = cluster.shard_clients()
  keys = [
    next(c.sample('replay', 1, emit_timesteps=False, timeout=60)).info.key
    for c in shard_clients
  ]
  updates = {keys[0]: 1e6, keys[1]: 5e5}
  client.mutate_priorities('replay', updates=updates)
  for shard, c in enumerate(shard_clients):
    samples = list(c.sample('replay', 20, emit_timesteps=False, timeout=60))
    hits = [s for s in samples if s.info.key == keys[shard]]
    assert hits, f'shard {shard} never sampled its updated key'
    assert all(s.info.priority == updates[keys[shard]] for s in hits)
    assert not [s for s in samples if s.info.key == keys[1 - shard]]

  # Where every item is, then a dataset over the sharded address reads both.
  where = {
    item_id: shard
    for shard, found in _drain_ledgers(cluster).items()
    for item_id in found
  }
  assert len(where) == sum(sizes)
  iterator = iter(_dataset(cluster.address))
  seen: Set[int] = set()
  for _ in range(50):
    seen.update(where[i] for i in _sampled_ids(iterator, 10))
    if seen == {0, 1}:
      break
  assert seen == {0, 1}, 'the dataset sampled only one shard in 500 samples'
  replay_samples = [
    info['replay'].rate_limiter_info.sample_stats.completed
    for info in cluster.server_info(60)
  ]
  assert all(count > 0 for count in replay_samples), replay_samples


class _WriterThread(threading.Thread):
  """Writes items without pause, flushing each, recording for every
  confirmed id the phase it was created and confirmed in."""

  def __init__(self, writer, ids: _Ids, phase: List[int]):
    super().__init__(daemon=True)
    self.writer = writer
    self.ids = ids
    self.phase = phase
    self.stop = threading.Event()
    self.confirmed: Dict[int, tuple] = {}
    self.error = None

  def count(self, created_from: int) -> int:
    return sum(
      1
      for created, _ in list(self.confirmed.values())
      if created >= created_from
    )

  def run(self):
    try:
      while not self.stop.is_set():
        item_id = self.ids.take()
        created = self.phase[0]
        _write(self.writer, item_id)
        self.writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)
        self.confirmed[item_id] = (created, self.phase[0])
    except Exception as e:  # pylint: disable=broad-except
      self.error = e


def _each_wrote(
  threads: List['_WriterThread'], n: int, created_from: int
) -> Callable[[], bool]:
  """A condition: every writer has `n` confirmed items created in phase
  `created_from` or later (and none failed)."""

  def condition():
    for t in threads:
      assert t.error is None, f'writer failed: {t.error!r}'
    return all(t.count(created_from) >= n for t in threads)

  return condition


# Phases of the kill test.
BEFORE_CHECKPOINT, AFTER_CHECKPOINT, AFTER_KILL, AFTER_RESTART = range(4)


def test_killed_shard_restarts_restores_and_takes_traffic(cluster):
  address = cluster.address
  client = reverb.Client(address)
  ids = _Ids()
  on_shard, placed = _writers_on_each_shard(cluster, client, ids, per_shard=2)
  phase = [BEFORE_CHECKPOINT]
  threads = {
    shard: [_WriterThread(w, ids, phase) for w in writers[:2]]
    for shard, writers in on_shard.items()
  }
  all_threads = [t for ts in threads.values() for t in ts]
  for t in all_threads:
    t.start()
  iterator = iter(_dataset(address))
  _sampled_ids(iterator, 5)

  def each_wrote(n: int, created_from: int) -> Callable[[], bool]:
    return _each_wrote(all_threads, n, created_from)

  try:
    _wait_for(each_wrote(20, BEFORE_CHECKPOINT), '20 items of every writer')
    phase[0] = AFTER_CHECKPOINT
    cluster.checkpoint()
    _wait_for(
      each_wrote(10, AFTER_CHECKPOINT),
      '10 items of every writer after the checkpoint',
    )

    # SIGKILL shard 0's server mid-run.
    killed = cluster.shard_infos()[0]
    os.kill(killed['pid'], signal.SIGKILL)
    _wait_for(lambda: not _pid_alive(killed['pid']), 'the killed server gone')
    phase[0] = AFTER_KILL
    # Writers keep going (shard 0's ones on a new stream), the dataset keeps
    # producing.
    _wait_for(
      each_wrote(10, AFTER_KILL), '10 items of every writer after the kill'
    )
    assert len(_sampled_ids(iterator, 40)) == 40

    # Ray restarts the shard; it rebinds its port, so the address holds.
    _wait_for(
      lambda: cluster.shard_infos()[0]['pid'] != killed['pid'],
      'Ray to restart shard 0',
    )
    restarted = cluster.shard_infos()[0]
    assert restarted['reconstructed']
    assert restarted['actor_pid'] != killed['actor_pid']
    assert cluster.address == address
    phase[0] = AFTER_RESTART
    _wait_for(
      each_wrote(5, AFTER_RESTART), '5 items of every writer after the restart'
    )
    for t in all_threads:
      t.stop.set()
    for t in all_threads:
      t.join(HANG_GUARD)

    # It takes traffic again: new writers reach it, the dataset samples it.
    # (HANG_GUARD / 0.2 writers at most: beyond gRPC's 30 s max backoff.)
    on_shard_again, _ = _writers_on_each_shard(
      cluster,
      reverb.Client(address),
      ids,
      per_shard=1,
      max_writers=int(HANG_GUARD / 0.2),
      pause=0.2,
    )
    for writers in on_shard_again.values():
      for writer in writers:
        writer.close()
    samples_before = cluster.server_info(60)[0][
      'replay'
    ].rate_limiter_info.sample_stats.completed

    def restarted_shard_sampled():
      _sampled_ids(iterator, 4)
      return (
        cluster.server_info(60)[0][
          'replay'
        ].rate_limiter_info.sample_stats.completed
        > samples_before
      )

    _wait_for(
      restarted_shard_sampled, 'the dataset to sample the restarted shard'
    )
  finally:
    for t in all_threads:
      t.stop.set()
    for t in all_threads:
      t.join(HANG_GUARD)
  for t in all_threads:
    assert t.error is None, f'writer failed: {t.error!r}'
    t.writer.close()

  found = _drain_ledgers(cluster)
  everywhere = found[0] + found[1]
  assert len(everywhere) == len(set(everywhere)), 'an item is stored twice'
  present = set(everywhere)
  confirmed = {}
  for t in all_threads:
    confirmed.update(t.confirmed)
  # Confirmed before the checkpoint, or created after the kill: never lost.
  for item_id, (created, confirmed_in) in confirmed.items():
    if confirmed_in == BEFORE_CHECKPOINT or created >= AFTER_KILL:
      assert item_id in present, (item_id, created, confirmed_in)
  # Shard 0's checkpointed items are back on shard 0.
  restored = [
    i
    for t in threads[0]
    for i, (_, c) in t.confirmed.items()
    if c == BEFORE_CHECKPOINT
  ]
  restored += [i for i, shard in placed.items() if shard == 0]
  assert restored and set(restored) <= set(found[0])
  # Only shard 0's items confirmed between the checkpoint and the kill may
  # be lost (not checkpointed, no replication).
  lost = set(confirmed) - present
  shard0_window = {
    i
    for t in threads[0]
    for i, (created, c) in t.confirmed.items()
    if c >= AFTER_CHECKPOINT and created < AFTER_KILL
  }
  assert lost <= shard0_window, sorted(lost - shard0_window)


def test_a_killed_shard_with_a_write_ahead_log_loses_no_confirmed_item(
  ray_cluster, tmp_path
):
  """As above, with wal_durability='sync': now nothing confirmed is lost,
  also what shard 0 confirmed between the checkpoint and its SIGKILL, and
  no shard holds an item twice."""
  del ray_cluster
  cluster = reverb_ray.ReplayCluster(
    _tables(),
    num_shards=2,
    checkpoint_dir=str(tmp_path / 'checkpoints'),
    resources_per_shard={'num_cpus': 0.5},
    wal_durability='sync',
  )
  threads = []
  try:
    ids = _Ids()
    on_shard, placed = _writers_on_each_shard(
      cluster, reverb.Client(cluster.address), ids, per_shard=1
    )
    phase = [BEFORE_CHECKPOINT]
    threads = [
      _WriterThread(w, ids, phase) for ws in on_shard.values() for w in ws
    ]
    for t in threads:
      t.start()

    def each_wrote(n: int, created_from: int) -> Callable[[], bool]:
      return _each_wrote(threads, n, created_from)

    _wait_for(each_wrote(10, BEFORE_CHECKPOINT), '10 items of every writer')
    phase[0] = AFTER_CHECKPOINT
    cluster.checkpoint()
    _wait_for(each_wrote(10, AFTER_CHECKPOINT), '10 more of every writer')
    killed = cluster.shard_infos()[0]
    # The phase turns first: whatever is confirmed in it may have been in
    # flight when the shard died.
    phase[0] = AFTER_KILL
    os.kill(killed['pid'], signal.SIGKILL)
    _wait_for(lambda: not _pid_alive(killed['pid']), 'the killed server gone')
    _wait_for(
      lambda: cluster.shard_infos()[0]['pid'] != killed['pid'],
      'Ray to restart shard 0',
    )
    phase[0] = AFTER_RESTART
    # Shard 0's writer reconnects and goes on (its unconfirmed items are
    # sent again: same keys, so never twice).
    _wait_for(each_wrote(3, AFTER_RESTART), '3 items of every writer')
  finally:
    for t in threads:
      t.stop.set()
    for t in threads:
      t.join(HANG_GUARD)
  try:
    for t in threads:
      assert t.error is None, f'writer failed: {t.error!r}'
      t.writer.close()
    found = _drain_ledgers(cluster)
  finally:
    cluster.shutdown()
  for shard in found.values():
    assert len(shard) == len(set(shard)), 'an item is stored twice on a shard'
  confirmed = set(placed)
  for t in threads:
    confirmed |= set(t.confirmed)
  lost = confirmed - set(found[0] + found[1])
  assert not lost, sorted(lost)
  # An item shard 0 logged but had not confirmed when it died is sent again
  # by its writer, possibly to shard 1: only such items may be on both.
  in_flight_at_kill = {
    i
    for t in threads
    for i, (created, confirmed_in) in t.confirmed.items()
    if created < AFTER_KILL <= confirmed_in
  }
  assert set(found[0]) & set(found[1]) <= in_flight_at_kill
  assert {i for i, shard in placed.items() if shard == 0} <= set(found[0])


def test_wal_durability_is_checked_before_anything_starts():
  with pytest.raises(ValueError, match='wal_durability'):
    reverb_ray.ReplayCluster(_tables(), num_shards=1, wal_durability='fast')
  with pytest.raises(ValueError, match='needs checkpoint_dir'):
    reverb_ray.ReplayCluster(_tables(), num_shards=1, wal_durability='sync')


def test_killed_actor_takes_its_server_along_and_is_restarted(cluster):
  client = reverb.Client(cluster.address)
  before = cluster.shard_infos()[1]
  os.kill(before['actor_pid'], signal.SIGKILL)
  _wait_for(
    lambda: not _pid_alive(before['pid']),
    "the server of the killed actor gone (PR_SET_PDEATHSIG)",
  )
  _wait_for(
    lambda: cluster.shard_infos()[1]['pid'] != before['pid'],
    'Ray to restart shard 1',
  )
  after = cluster.shard_infos()[1]
  assert after['address'] == before['address']
  # The restarted server answers on the same address.
  shard_client = reverb.Client(after['address'])
  assert set(shard_client.server_info(60)) == {'replay', 'ledger'}
  del client


# ---------------------------------------------------------------------------
# Two "hosts": network namespaces on one bridge, a Ray node in each.

NETNS_SUBNET = '10.77.{}.'


def _run(*command: str) -> None:
  subprocess.run(
    command, check=True, capture_output=True, text=True, timeout=60
  )


class _Hosts:
  """Network namespaces `<prefix>-a` and `<prefix>-b` (10.77.N.1 and .2),
  each joined by a veth pair to a bridge in the root namespace (10.77.N.254),
  where the clients are. Removed by `close`."""

  def __init__(self):
    tag = os.getpid() % 10000
    self.subnet = NETNS_SUBNET.format(100 + os.getpid() % 100)
    self.bridge = f'trb{tag}'
    self.names = [f'trn{tag}{h}' for h in 'ab']
    self.ips = [self.subnet + '1', self.subnet + '2']
    self._created: List[List[str]] = []
    try:
      _run('ip', 'link', 'add', self.bridge, 'type', 'bridge')
      self._created.append(['ip', 'link', 'del', self.bridge])
      _run('ip', 'addr', 'add', self.subnet + '254/24', 'dev', self.bridge)
      _run('ip', 'link', 'set', self.bridge, 'up')
      for name, ip in zip(self.names, self.ips):
        _run('ip', 'netns', 'add', name)
        self._created.append(['ip', 'netns', 'del', name])
        _run(
          'ip',
          'link',
          'add',
          name,
          'type',
          'veth',
          'peer',
          'name',
          'eth0',
          'netns',
          name,
        )
        self._created.append(['ip', 'link', 'del', name])
        _run('ip', 'link', 'set', name, 'master', self.bridge)
        _run('ip', 'link', 'set', name, 'up')
        self.exec(name, 'ip', 'addr', 'add', ip + '/24', 'dev', 'eth0')
        self.exec(name, 'ip', 'link', 'set', 'eth0', 'up')
        self.exec(name, 'ip', 'link', 'set', 'lo', 'up')
    except Exception:
      self.close()
      raise

  def exec(self, name: str, *command: str) -> None:
    _run('ip', 'netns', 'exec', name, *command)

  def popen(self, name: str, *command: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(['ip', 'netns', 'exec', name, *command], **kwargs)

  def kill_all(self) -> None:
    """SIGKILLs every process left in the namespaces, by pid."""
    for name in self.names:
      pids = subprocess.run(
        ['ip', 'netns', 'pids', name], capture_output=True, text=True
      ).stdout.split()
      for pid in pids:
        try:
          os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
          pass

  def close(self) -> None:
    self.kill_all()
    for command in reversed(self._created):
      subprocess.run(command, capture_output=True, timeout=60)
    self._created = []


def _namespaces_unavailable() -> str:
  if not sys.platform.startswith('linux'):
    return 'network namespaces are Linux-only'
  if os.geteuid() != 0:
    return 'creating network namespaces needs root'
  if not shutil.which('ip'):
    return 'the ip command (iproute2) is missing'
  probe = f'trprobe{os.getpid() % 10000}'
  result = subprocess.run(
    ['ip', 'netns', 'add', probe], capture_output=True, text=True
  )
  if result.returncode != 0:
    return f'ip netns add failed: {result.stderr.strip()}'
  subprocess.run(['ip', 'netns', 'del', probe], capture_output=True)
  return ''


# The driver, run on host a: a 2-shard ReplayCluster on the Ray cluster of
# both hosts, one shard per host (each node offers one 'tf_reverb_shard').
# Commands on stdin, one JSON answer per line on stdout.
DRIVER = r'''
import json, sys, time
import ray
import tf_reverb as reverb
from tf_reverb import ray as reverb_ray
# The nodes start beside this process: wait (bounded) until the head takes
# drivers and both nodes are alive.
deadline = time.monotonic() + 240
while True:
  try:
    ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2],
             logging_level='WARNING')
    break
  except (ConnectionError, RuntimeError):
    ray.shutdown()
    if time.monotonic() > deadline:
      raise
    time.sleep(0.5)  # polling the head, with the deadline as hang guard
while sum(node['Alive'] for node in ray.nodes()) < 2:
  if time.monotonic() > deadline:
    raise RuntimeError(f'the second Ray node did not join: {ray.nodes()}')
  time.sleep(0.2)
cluster = reverb_ray.ReplayCluster(
    [reverb.Table('replay', reverb.selectors.Uniform(),
                  reverb.selectors.Fifo(), 10000,
                  reverb.rate_limiters.MinSize(1)),
     reverb.Table('ledger', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                  10000, reverb.rate_limiters.MinSize(1),
                  max_times_sampled=1)],
    num_shards=2, checkpoint_dir=sys.argv[3],
    resources_per_shard={'num_cpus': 0, 'resources': {'tf_reverb_shard': 1}},
    start_timeout=120)
def answer(value):
  print('ANSWER ' + json.dumps(value), flush=True)
answer(cluster.shard_infos())
for line in sys.stdin:
  command = line.strip()
  if command == 'infos':
    answer(cluster.shard_infos())
  elif command == 'checkpoint':
    answer(cluster.checkpoint())
  elif command == 'quit':
    break
cluster.shutdown()
ray.shutdown()
answer('stopped')
'''


class _RemoteCluster:
  """The ReplayCluster of the driver process, seen from the root namespace."""

  def __init__(self, driver: subprocess.Popen):
    self._driver = driver
    self.infos = self._read()
    self.num_shards = len(self.infos)

  def _read(self):
    import json  # pylint: disable=g-import-not-at-top

    while True:  # Ray may print its own lines too
      line = self._driver.stdout.readline()
      assert line, f'the driver exited: {self._driver.stderr.read()[-3000:]}'
      if line.startswith('ANSWER '):
        return json.loads(line[len('ANSWER ') :])

  def call(self, command: str):
    self._driver.stdin.write(command + '\n')
    self._driver.stdin.flush()
    return self._read()

  def shard_infos(self):
    self.infos = self.call('infos')
    return self.infos

  @property
  def address(self) -> str:
    return reverb_ray.grpc_target([i['address'] for i in self.infos])

  def shard_clients(self):
    return [reverb.Client(i['address']) for i in self.infos]

  def server_info(self, timeout=None):
    return [c.server_info(timeout) for c in self.shard_clients()]


def _start_node(hosts: _Hosts, name: str, env, *command: str):
  """`ray start --block ...` in namespace `name`, returned once it reports
  'Ray runtime started' (killed after HANG_GUARD seconds without it)."""
  node = hosts.popen(
    name,
    *command,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  guard = threading.Timer(HANG_GUARD, node.kill)
  guard.start()
  output = []
  try:
    for line in node.stdout:
      output.append(line)
      if 'Ray runtime started' in line:
        break
    else:
      pytest.fail(f'ray start in {name} ended: {"".join(output)[-3000:]}')
  finally:
    guard.cancel()
  # Keep draining its output so that it never blocks on a full pipe.
  threading.Thread(
    target=lambda: [None for _ in node.stdout], daemon=True
  ).start()
  return node


@pytest.mark.skipif(
  bool(_namespaces_unavailable()), reason=_namespaces_unavailable() or 'n/a'
)
def test_two_hosts_in_network_namespaces(tmp_path):
  ray_bin = os.path.join(os.path.dirname(sys.executable), 'ray')
  hosts = _Hosts()
  nodes = []
  driver = None
  ray_temp = tempfile.mkdtemp(prefix='rn', dir='/tmp')  # short: unix sockets
  try:
    head, worker = hosts.ips
    env = dict(
      os.environ,
      RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO='0',
      RAY_SCHEDULER_EVENTS='0',
    )
    common = [
      '--block',
      '--num-cpus=1',
      '--object-store-memory=' + str(100 * 1024 * 1024),
      '--resources={"tf_reverb_shard": 1}',
      '--disable-usage-stats',
    ]
    # The head first, then the worker, each once it says it runs.
    nodes.append(
      _start_node(
        hosts,
        hosts.names[0],
        env,
        ray_bin,
        'start',
        '--head',
        f'--node-ip-address={head}',
        '--port=6379',
        f'--temp-dir={ray_temp}',
        '--include-dashboard=false',
        *common,
      )
    )
    nodes.append(
      _start_node(
        hosts,
        hosts.names[1],
        env,
        ray_bin,
        'start',
        f'--address={head}:6379',
        f'--node-ip-address={worker}',
        *common,
      )
    )
    driver = hosts.popen(
      hosts.names[0],
      sys.executable,
      '-c',
      DRIVER,
      f'{head}:6379',
      head,
      str(tmp_path / 'checkpoints'),
      env=env,
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    cluster = _RemoteCluster(driver)
    # One shard per host, each at its namespace's address.
    assert sorted(i['ip'] for i in cluster.infos) == sorted(hosts.ips)
    client = reverb.Client(cluster.address)  # from the root namespace
    ids = _Ids()
    on_shard, placed = _writers_on_each_shard(cluster, client, ids, per_shard=1)
    for writers in on_shard.values():
      for writer in writers:
        for _ in range(5):
          _write(writer, ids.take())
        writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)
        writer.close()
    sizes = _sizes(cluster, 'ledger')
    assert all(size >= 6 for size in sizes), sizes
    cluster.call('checkpoint')

    # SIGKILL the server on host b: Ray restarts it there, on its port, with
    # its checkpoint.
    killed = next(i for i in cluster.infos if i['ip'] == worker)
    os.kill(killed['pid'], signal.SIGKILL)
    _wait_for(
      lambda: cluster.shard_infos()[killed['index']]['pid'] != killed['pid'],
      'Ray to restart the shard on host b',
    )
    restarted = cluster.infos[killed['index']]
    assert restarted['address'] == killed['address']
    assert _sizes(cluster, 'ledger')[killed['index']] == sizes[killed['index']]
    assert cluster.call('quit') == 'stopped'
    driver.wait(HANG_GUARD)
  finally:
    if driver is not None and driver.poll() is None:
      driver.kill()
    for node in nodes:
      node.terminate()
    for node in nodes:
      try:
        node.wait(60)
      except subprocess.TimeoutExpired:
        node.kill()
    hosts.close()
    shutil.rmtree(ray_temp, ignore_errors=True)
