"""Table semantics through the public API: selectors, limiters, lifecycle."""

import threading

import numpy as np
import pytest

import tf_reverb as reverb


def _serve(*tables):
  server = reverb.Server(list(tables))
  return server, reverb.Client(f'localhost:{server.port}')


def _values(client, table, n):
  return [
    int(s.data[0][0]) for s in client.sample(table, n, emit_timesteps=False)
  ]


def test_queue_blocks_the_insert_that_overflows_until_a_sample():
  server, client = _serve(reverb.Table.queue('q', 2))
  with server:
    client.insert(0, {'q': 1.0})
    client.insert(1, {'q': 1.0})
    third = threading.Thread(target=client.insert, args=(2, {'q': 1.0}))
    third.start()
    third.join(timeout=0.5)
    assert third.is_alive(), 'the third insert into a full queue went through'
    assert _values(client, 'q', 1) == [0]
    third.join(timeout=30)
    assert not third.is_alive()
    assert _values(client, 'q', 2) == [1, 2]
    assert client.server_info()['q'].current_size == 0


def test_stack_samples_newest_first():
  server, client = _serve(reverb.Table.stack('s', 10))
  with server:
    for i in range(3):
      client.insert(i, {'s': 1.0})
    assert _values(client, 's', 3) == [2, 1, 0]


def test_sample_to_insert_ratio_blocks_inserts_beyond_the_buffer():
  table = reverb.Table(
    'r',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.SampleToInsertRatio(1.0, 1, 2.0),
  )
  server, client = _serve(table)
  with server:
    for i in range(3):
      client.insert(i, {'r': 1.0})
    assert not table.can_insert(1)
    fourth = threading.Thread(target=client.insert, args=(3, {'r': 1.0}))
    fourth.start()
    fourth.join(timeout=0.5)
    assert fourth.is_alive()
    _values(client, 'r', 1)
    fourth.join(timeout=30)
    assert not fourth.is_alive()
    assert table.info.current_size == 4


def test_prioritized_probabilities_match_the_spec():
  table = reverb.Table(
    'p',
    reverb.selectors.Prioritized(0.8),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  server, client = _serve(table)
  with server:
    client.insert(0, {'p': 2.0})
    client.insert(1, {'p': 0.5})
    probabilities = {}
    for sample in client.sample('p', 200, emit_timesteps=False):
      probabilities[sample.info.priority] = sample.info.probability
    assert probabilities[2.0] == pytest.approx(0.75195, abs=1e-5)
    assert probabilities[0.5] == pytest.approx(0.24805, abs=1e-5)


@pytest.mark.parametrize('address', ['localhost', 'ipv4:127.0.0.1'])
def test_negative_priority_is_rejected_and_the_table_stays_healthy(address):
  table = reverb.Table(
    'p',
    reverb.selectors.Prioritized(1.0),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  with reverb.Server([table]) as server:
    client = reverb.Client(f'{address}:{server.port}')
    with pytest.raises(ValueError, match='Priority must not be negative'):
      client.insert(0, {'p': -1.0})
    with pytest.raises(ValueError, match='Priority must not be NaN'):
      client.insert(0, {'p': float('nan')})
    assert table.info.current_size == 0
    client.insert(1, {'p': 1.0})
    client.insert(2, {'p': 3.0})
    keys = {
      int(s.data[0][0]): s.info.key
      for s in client.sample('p', 50, emit_timesteps=False)
    }
    assert set(keys) == {1, 2}
    # One bad update among good ones: nothing of the request is applied.
    with pytest.raises(ValueError, match='negative'):
      client.mutate_priorities(
        'p', updates={keys[1]: 5.0, keys[2]: -2.0}, deletes=[keys[2]]
      )
    priorities = {
      int(s.data[0][0]): s.info.priority
      for s in client.sample('p', 50, emit_timesteps=False)
    }
    assert priorities == {1: 1.0, 2: 3.0}


def test_non_prioritized_tables_accept_negative_priorities_like_reverb():
  server, client = _serve(
    reverb.Table(
      'u',
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      10,
      reverb.rate_limiters.MinSize(1),
    )
  )
  with server:
    client.insert(0, {'u': -5.0})
    assert next(client.sample('u', emit_timesteps=False)).info.priority == -5.0


def test_heaps_pick_extreme_priorities_and_break_ties_by_age():
  min_table = reverb.Table(
    'min',
    reverb.selectors.MinHeap(),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  max_table = reverb.Table(
    'max',
    reverb.selectors.MaxHeap(),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  server, client = _serve(min_table, max_table)
  with server:
    for value, priority in [(0, 2.0), (1, 1.0), (2, 3.0), (3, 1.0)]:
      client.insert(value, {'min': priority, 'max': priority})
    assert _values(client, 'min', 2) == [1, 1]
    assert _values(client, 'max', 1) == [2]


def test_max_times_sampled_deletes_items():
  table = reverb.Table(
    't',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
    max_times_sampled=2,
  )
  server, client = _serve(table)
  with server:
    client.insert(0, {'t': 1.0})
    client.insert(1, {'t': 1.0})
    assert _values(client, 't', 4) == [0, 0, 1, 1]
    info = table.info
    assert info.current_size == 0
    assert info.num_unique_samples == 2
    assert info.num_deleted_episodes == 2


def test_reinserting_a_key_only_updates_its_priority():
  table = reverb.Table(
    't',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  server, client = _serve(table)
  with server:
    client.insert(0, {'t': 1.0})
    key = next(client.sample('t', emit_timesteps=False)).info.key
    client.mutate_priorities('t', updates={key: 4.0, 12345: 1.0})
    assert table.info.current_size == 1
    assert next(client.sample('t', emit_timesteps=False)).info.priority == 4.0


def test_replace_builds_an_empty_table_with_changed_settings():
  table = reverb.Table(
    't',
    reverb.selectors.Prioritized(0.6),
    reverb.selectors.Lifo(),
    10,
    reverb.rate_limiters.SampleToInsertRatio(2.0, 3, 10.0),
    max_times_sampled=3,
  )
  replaced = table.replace(name='t2', max_size=20)
  info = replaced.info
  assert info.name == 't2' and info.max_size == 20
  assert info.sampler_options.prioritized.priority_exponent == 0.6
  assert info.remover_options.lifo
  assert info.max_times_sampled == 3
  assert info.rate_limiter_info.samples_per_insert == 2.0
  assert info.rate_limiter_info.min_diff == 6.0 - 10.0
  assert info.current_size == 0


def test_many_concurrent_writers_samplers_and_updaters():
  table = reverb.Table(
    't',
    reverb.selectors.Prioritized(1.0),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
  )
  server, _ = _serve(table)
  errors = []

  def run(fn):
    try:
      fn()
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  def writer(seed):
    client = reverb.Client(f'ipv4:127.0.0.1:{server.port}')
    for i in range(50):
      client.insert(np.full(4, seed * 1000 + i), {'t': 1.0 + i})

  def sampler():
    client = reverb.Client(f'localhost:{server.port}')
    keys = [s.info.key for s in client.sample('t', 100, emit_timesteps=False)]
    client.mutate_priorities('t', updates={k: 2.0 for k in keys[:20]})

  with server:
    threads = [
      threading.Thread(target=run, args=(lambda s=s: writer(s),))
      for s in range(4)
    ]
    threads += [threading.Thread(target=run, args=(sampler,)) for _ in range(3)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=120)
    assert not errors, errors
    info = table.info
    assert info.rate_limiter_info.insert_stats.completed == 200
    assert info.rate_limiter_info.sample_stats.completed == 300
    assert info.current_size == 100
