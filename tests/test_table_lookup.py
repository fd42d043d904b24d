"""Looking into a table without sampling it: Client.lookup, table_stats and
scan, on one server and on two reverb_server shards.

None of them counts as a sample: times sampled, the rate limiter's counters
and max_times_sampled stay as they were.
"""

import numpy as np
import pytest

import tf_reverb as reverb
from shard_processes import ShardProcess
from shard_processes import ipv4_target


def _table(name='t'):
  return reverb.Table(
    name,
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    1000,
    reverb.rate_limiters.MinSize(1),
    max_times_sampled=5,
  )


def _value(sample) -> int:
  return int(np.asarray(sample.data[0]).reshape(-1)[0])


def _counters(client, table='t'):
  info = client.server_info()[table]
  return (
    info.current_size,
    info.rate_limiter_info.insert_stats.completed,
    info.rate_limiter_info.sample_stats.completed,
    info.num_unique_samples,
  )


@pytest.fixture
def filled():
  """A server whose table t holds values 0..19 with priority value + 1, the
  first three sampled."""
  with reverb.Server([_table()]) as server:
    client = server.localhost_client()
    for i in range(20):
      client.insert([np.int64(i)], priorities={'t': float(i + 1)})
    yield server, client


def test_scan_yields_every_item_once_in_insertion_order(filled):
  _, client = filled
  before = _counters(client)
  batches = list(client.scan('t', batch_size=6))
  assert [len(b) for b in batches] == [6, 6, 6, 2]
  items = [s for b in batches for s in b]
  assert [_value(s) for s in items] == list(range(20))
  assert [float(s.info.priority) for s in items] == [i + 1.0 for i in range(20)]
  assert all(float(s.info.probability) == 0 for s in items)
  assert _counters(client) == before  # not a sample


def test_scan_does_not_block_writers_and_sees_old_items_once(filled):
  _, client = filled
  seen = []
  for batch in client.scan('t', batch_size=5):
    seen += [_value(s) for s in batch]
    # Writers go on between batches; deleting one the scan has not reached.
    client.insert([np.int64(100 + len(seen))], priorities={'t': 1.0})
    if len(seen) == 5:
      (key,) = [
        int(s.info.key)
        for b in client.scan('t', 20)
        for s in b
        if _value(s) == 19
      ]
      client.mutate_priorities('t', deletes=[key])
  old = [v for v in seen if v < 100]
  assert old == list(range(19))  # each once, in order; 19 was deleted
  assert len(seen) == len(set(seen))


def test_lookup_finds_items_reports_missing_and_is_not_a_sample(filled):
  _, client = filled
  by_value = {_value(s): s for b in client.scan('t') for s in b}
  sampled = next(client.sample('t', 1, emit_timesteps=False))
  sampled_key = int(sampled.info.key)
  before = _counters(client)
  keys = [int(by_value[3].info.key), 12345, sampled_key]
  for _ in range(2):
    result = client.lookup('t', keys, timeout=60)
    assert result.missing == [12345]
    assert list(result.items) == [keys[0], sampled_key]
    item = result.items[keys[0]]
    assert _value(item) == 3
    assert float(item.info.priority) == 4.0
    assert int(item.info.times_sampled) == 0
    assert int(result.items[sampled_key].info.times_sampled) == 1
    assert int(item.info.table_size) == 20
  assert _counters(client) == before


def test_table_stats(filled):
  _, client = filled
  for _ in client.sample('t', 4, emit_timesteps=False):
    pass
  stats = client.table_stats('t', timeout=60)
  assert stats.size == 20
  assert stats.total_priority == sum(range(1, 21))
  assert (stats.min_priority, stats.max_priority) == (1.0, 20.0)
  assert sum(stats.times_sampled.values()) == 20
  assert sum(t * n for t, n in stats.times_sampled.items()) == 4
  assert sum(stats.age_counts) == 20
  assert len(stats.age_counts) == len(stats.age_bucket_seconds) + 1
  assert 0 <= stats.min_age_seconds <= stats.max_age_seconds
  empty = reverb.Client(client._server_address).table_stats('t')  # pylint: disable=protected-access
  assert empty.size == 20


def test_errors(filled):
  _, client = filled
  with pytest.raises(ValueError, match='batch_size'):
    next(client.scan('t', batch_size=0))
  with pytest.raises(Exception, match='nope'):
    client.lookup('nope', [1])
  with pytest.raises(Exception, match='nope'):
    client.table_stats('nope')


def test_a_timeout_ends_a_call_to_a_server_that_is_not_there():
  import portpicker  # pylint: disable=g-import-not-at-top

  client = reverb.Client(f'localhost:{portpicker.pick_unused_port()}')
  with pytest.raises(reverb.errors.DeadlineExceededError):
    client.lookup('t', [1], timeout=0.2)
  with pytest.raises(reverb.errors.DeadlineExceededError):
    client.table_stats('t', timeout=0.2)
  with pytest.raises(reverb.errors.DeadlineExceededError):
    next(client.scan('t', timeout=0.2))


_CONFIG = '''
tables { table_name: "t" sampler { uniform: true } remover { fifo: true }
         max_size: 1000 rate_limiter { samples_per_insert: 1
         min_size_to_sample: 1 min_diff: -1e9 max_diff: 1e9 } }
'''


def test_sharded_lookup_stats_and_scan_cover_every_shard():
  shards = [ShardProcess(config=_CONFIG) for _ in range(2)]
  try:
    for s, shard in enumerate(shards):
      direct = reverb.Client(shard.address)
      for i in range(5 + 5 * s):  # 5 on shard 0, 10 on shard 1
        direct.insert([np.int64(s * 100 + i)], priorities={'t': 1.0 + s})
    client = reverb.Client(ipv4_target(shards))
    items = [s for b in client.scan('t', batch_size=4) for s in b]
    values = [_value(s) for s in items]
    assert sorted(values) == list(range(5)) + list(range(100, 110))
    # Each shard's items come in its insertion order.
    assert values == list(range(5)) + list(range(100, 110)) or values == (
      list(range(100, 110)) + list(range(5))
    )
    keys = [int(s.info.key) for s in items]
    result = client.lookup('t', keys + [7], timeout=60)
    assert result.missing == [7]
    assert sorted(_value(s) for s in result.items.values()) == sorted(values)
    stats = client.table_stats('t', timeout=60)
    assert stats.size == 15
    assert stats.total_priority == 5 * 1.0 + 10 * 2.0
    assert (stats.min_priority, stats.max_priority) == (1.0, 2.0)
    assert stats.times_sampled == {0: 15}
    # A shard that is down: lookup and stats go on without it.
    shards[0].kill()
    result = client.lookup('t', keys, timeout=60)
    assert len(result.items) == 10 and len(result.missing) == 5
    assert client.table_stats('t', timeout=60).size == 10
    with pytest.raises(RuntimeError, match=shards[0].address):
      list(client.scan('t', timeout=5))
  finally:
    for shard in shards:
      shard.kill()
