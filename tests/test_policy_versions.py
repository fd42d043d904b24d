"""Policy-version limits (staleness): items carry the version of the policy
that produced them, a learner sets the table's current version, and a table
with ``max_staleness=K`` never lets out an item older than ``current - K``.

Real servers: in-process, and reverb_server shards for the sharded client,
the config file and recovery from a write-ahead log after SIGKILL.
"""

import os
import random
import signal
import threading

import numpy as np
import pytest

import tf_reverb as reverb
from shard_processes import ShardProcess
from shard_processes import ipv4_target


def _table(max_staleness=None, evict_stale=False, name='t', max_size=10_000):
  return reverb.Table(
    name,
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    max_size,
    reverb.rate_limiters.MinSize(1),
    max_staleness=max_staleness,
    evict_stale=evict_stale,
  )


def _versions_of(client, keys):
  found = client.lookup('t', keys)
  return {k: int(s.info.policy_version) for k, s in found.items.items()}


def test_table_options_are_validated():
  with pytest.raises(ValueError, match='max_staleness'):
    _table(max_staleness=-1)
  with pytest.raises(ValueError, match='evict_stale needs max_staleness'):
    _table(evict_stale=True)


def test_items_carry_their_writers_version_or_the_tables_current_one():
  with reverb.Server([_table()]) as server:
    client = server.localhost_client()
    assert client.set_policy_version('t', 4) == 0
    client.insert([np.int64(1)], priorities={'t': 1.0})  # the current: 4
    client.insert([np.int64(2)], priorities={'t': 1.0}, policy_version=2)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      writer.append([np.int64(3)])
      writer.create_item('t', 1.0, [writer.history[0][-1:]], policy_version=9)
    with client.writer(max_sequence_length=1) as writer:
      writer.append([np.int64(4)])
      writer.create_item('t', 1, 1.0, policy_version=1)
    by_value = {}
    for batch in client.scan('t'):
      for sample in batch:
        assert isinstance(sample.info, reverb.replay_sample.VersionedSampleInfo)
        value = int(np.asarray(sample.data[0]).reshape(-1)[0])
        by_value[value] = int(sample.info.policy_version)
    assert by_value == {1: 4, 2: 2, 3: 9, 4: 1}

    # Sampling reports Reverb's SampleInfo unless asked for the version.
    plain = next(client.sample('t', emit_timesteps=False))
    assert type(plain.info) is reverb.replay_sample.SampleInfo  # pylint: disable=unidiomatic-typecheck
    versioned = next(
      client.sample('t', emit_timesteps=False, emit_policy_version=True)
    )
    value = int(np.asarray(versioned.data[0]).reshape(-1)[0])
    assert int(versioned.info.policy_version) == by_value[value]
    with reverb.NumpyIterator(
      f'localhost:{server.port}',
      't',
      batch_size=8,
      max_samples=8,
      emit_policy_version=True,
    ) as batches:
      batch = next(batches)
    assert batch.info.policy_version.dtype == np.int64
    values = batch.data[0].reshape(-1)
    assert [int(v) for v in batch.info.policy_version] == [
      by_value[int(v)] for v in values
    ]

    info = client.server_info()['t']
    assert info.policy_version == 4 and info.max_staleness is None


def test_bad_versions_raise():
  with reverb.Server([_table(max_staleness=1)]) as server:
    client = server.localhost_client()
    client.set_policy_version('t', 5)
    with pytest.raises(ValueError, match='only grow'):
      client.set_policy_version('t', 4)
    client.set_policy_version('t', 5)  # the same again is fine
    with pytest.raises(ValueError, match='must be >= 0'):
      client.set_policy_version('t', -1)
    with pytest.raises(ValueError, match='policy_version'):
      client.insert([np.int64(1)], priorities={'t': 1.0}, policy_version=-2)
    with pytest.raises(TypeError, match='policy_version'):
      client.insert([np.int64(1)], priorities={'t': 1.0}, policy_version=1.5)
    with pytest.raises(RuntimeError, match='nope'):
      client.set_policy_version('nope', 1)
    assert client.server_info()['t'].current_size == 0


def test_stale_items_are_not_sampled_and_evicted_with_the_flag():
  tables = [_table(max_staleness=1), _table(1, True, name='e')]
  with reverb.Server(tables) as server:
    client = server.localhost_client()
    for version in range(4):
      client.insert(
        [np.int64(version)],
        priorities={'t': 1.0, 'e': 1.0},
        policy_version=version,
      )
    assert client.set_policy_version('t', 3) == 2
    assert client.set_policy_version('e', 3) == 2
    for table in ('t', 'e'):
      seen = {
        int(np.asarray(s.data[0]).reshape(-1)[0])
        for s in client.sample(table, 50, emit_timesteps=False)
      }
      assert seen == {2, 3}
    stats = client.table_stats('t')
    assert (stats.size, stats.stale_items, stats.policy_version) == (4, 2, 3)
    stats = client.table_stats('e')
    assert (stats.size, stats.stale_items) == (2, 0)
    # Nothing fresh left: sampling waits (here: times out) as on an empty
    # table, although the table holds items.
    client.set_policy_version('t', 10)
    with pytest.raises(reverb.errors.DeadlineExceededError):
      next(client.sample('t', timeout=0.05))
    assert client.server_info()['t'].current_size == 4


def test_a_learner_bumping_versions_while_writers_write_never_sees_stale():
  """Writers insert items of the version they last saw (some lag behind by
  more than K); the learner raises the version between sample batches. No
  sample may be older than the version set before it was requested minus K.
  """
  max_staleness = 2
  with reverb.Server([_table(max_staleness)]) as server:
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    current = [0]
    stop = threading.Event()
    errors = []

    def write(seed):
      rng = random.Random(seed)
      writer_client = reverb.Client(address)
      try:
        with writer_client.trajectory_writer(num_keep_alive_refs=1) as writer:
          step = 0
          while not stop.is_set():
            lag = rng.randrange(0, max_staleness + 3)
            writer.append([np.int64(step)])
            writer.create_item(
              't',
              1.0,
              [writer.history[0][-1:]],
              policy_version=max(0, current[0] - lag),
            )
            step += 1
            if step % 20 == 0:
              writer.flush()
      except Exception as e:  # pylint: disable=broad-except
        errors.append(e)

    writers = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for w in writers:
      w.start()
    checked = 0
    try:
      for version in range(1, 61):
        client.set_policy_version('t', version)
        current[0] = version
        for sample in client.sample(
          't', 16, emit_timesteps=False, emit_policy_version=True
        ):
          assert int(sample.info.policy_version) >= version - max_staleness, (
            version,
            sample.info,
          )
          checked += 1
    finally:
      stop.set()
      for w in writers:
        w.join()
    assert not errors, errors
    assert checked == 60 * 16
    stats = client.table_stats('t')
    assert stats.stale_items > 0  # the lagging writers did write stale items


_CONFIG = '''
tables { table_name: "t" sampler { uniform: true } remover { fifo: true }
         max_size: 1000 max_staleness: 1 rate_limiter { samples_per_insert: 1
         min_size_to_sample: 1 min_diff: -1e9 max_diff: 1e9 } }
'''


def test_the_sharded_client_sets_every_shard():
  shards = [ShardProcess(config=_CONFIG) for _ in range(2)]
  try:
    for s, shard in enumerate(shards):
      direct = reverb.Client(shard.address)
      assert direct.server_info()['t'].max_staleness == 1
      for version in range(3):
        direct.insert(
          [np.int64(s * 10 + version)],
          priorities={'t': 1.0},
          policy_version=version,
        )
    client = reverb.Client(ipv4_target(shards))
    assert client.set_policy_version('t', 2) == 2  # version 0 on each shard
    for shard in shards:
      assert reverb.Client(shard.address).table_stats('t').policy_version == 2
    stats = client.table_stats('t')
    assert (stats.size, stats.stale_items, stats.policy_version) == (6, 2, 2)
    seen = {
      int(np.asarray(s.data[0]).reshape(-1)[0])
      for s in client.sample('t', 100, emit_timesteps=False)
    }
    assert seen == {1, 2, 11, 12}
  finally:
    for shard in shards:
      shard.kill()


def test_versions_survive_a_kill_with_the_write_ahead_log(tmp_path):
  args = [
    f'--wal_dir={tmp_path}/wal',
    '--wal_durability=sync',
  ]
  checkpoints = str(tmp_path / 'checkpoints')
  shard = ShardProcess(
    config=_CONFIG, checkpoint_dir=checkpoints, extra_args=args
  )
  try:
    client = reverb.Client(shard.address)
    for version in range(4):
      client.insert(
        [np.int64(version)], priorities={'t': 1.0}, policy_version=version
      )
    client.checkpoint()  # version 0 and the items in the checkpoint ...
    client.set_policy_version('t', 3)  # ... the new version only in the log
    shard.signal(signal.SIGKILL)
    shard.process.wait()
  finally:
    shard.kill()
  restarted = ShardProcess(
    config=_CONFIG, checkpoint_dir=checkpoints, extra_args=args
  )
  try:
    client = reverb.Client(restarted.address)
    stats = client.table_stats('t')
    assert (stats.size, stats.stale_items, stats.policy_version) == (4, 2, 3)
    versions = _versions_of(
      client, [s.info.key for b in client.scan('t') for s in b]
    )
    assert sorted(versions.values()) == [0, 1, 2, 3]
  finally:
    restarted.kill()
  assert os.path.isdir(checkpoints)


def test_the_graph_mode_insert_op_takes_a_policy_version():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  with reverb.Server([_table()]) as server:
    client = server.localhost_client()
    client.set_policy_version('t', 3)
    tf_client = reverb.TFClient(f'localhost:{server.port}')

    @tf.function
    def insert(value, version):
      tf_client.insert(
        [value],
        tf.constant(['t']),
        tf.constant([1.0], tf.float64),
        policy_version=version,
      )

    # One graph, versions changing from call to call.
    for value, version in ((0, 1), (1, 5)):
      insert(tf.constant(value, tf.int64), tf.constant(version, tf.int64))
    tf_client.insert(
      [tf.constant(2, tf.int64)],
      tf.constant(['t']),
      tf.constant([1.0], tf.float64),
    )  # the table's current version
    with pytest.raises(tf.errors.InvalidArgumentError, match='policy_version'):
      insert(tf.constant(3, tf.int64), tf.constant(-1, tf.int64))
    with pytest.raises(ValueError, match='scalar'):
      tf_client.insert(
        [tf.constant(4, tf.int64)],
        tf.constant(['t']),
        tf.constant([1.0], tf.float64),
        policy_version=[1, 2],
      )
    versions = {}
    for batch in client.scan('t'):
      for sample in batch:
        value = int(np.asarray(sample.data[0]).reshape(-1)[0])
        versions[value] = int(sample.info.policy_version)
    assert versions == {0: 1, 1: 5, 2: 3}


_UNIFORM_FRESH = '''
tables { table_name: "t" sampler { uniform: true } remover { fifo: true }
         max_size: 1000 max_staleness: 0 rate_limiter { samples_per_insert: 1
         min_size_to_sample: 1 min_diff: -1e9 max_diff: 1e9 } }
'''


def test_a_sharded_client_weighs_uniform_shards_by_their_fresh_items():
  """Shard 0 holds 20 fresh items; shard 1 holds 20 of which 18 are stale:
  one table of 22 sampleable items gives shard 1 2/22 of the samples."""
  shards = [ShardProcess(config=_UNIFORM_FRESH) for _ in range(2)]
  try:
    for s, shard in enumerate(shards):
      direct = reverb.Client(shard.address)
      direct.set_policy_version('t', 1)
      for i in range(20):
        version = 1 if s == 0 or i < 2 else 0
        direct.insert(
          [np.int64(s * 100 + i)], priorities={'t': 1.0}, policy_version=version
        )
    client = reverb.Client(ipv4_target(shards))
    n = 2200
    on_second = sum(
      int(np.asarray(s.data[0]).reshape(-1)[0]) >= 100
      for s in client.sample('t', n, emit_timesteps=False)
    )
    # Expected 200 (binomial sd 13.5); splitting by item count would give
    # about 1,100.
    assert 130 < on_second < 280, on_second
  finally:
    for shard in shards:
      shard.kill()
