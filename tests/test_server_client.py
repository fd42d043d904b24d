"""Server, Table and Client over real sockets (in-process and gRPC paths)."""

import pickle
import time

import numpy as np
import pytest

import tf_reverb as reverb
from conftest import uniform_table


@pytest.fixture(
  params=['localhost', 'ipv4:127.0.0.1'], ids=['in_process', 'grpc']
)
def client(request, server):
  """A client of `server`, through the in-process shortcut or plain gRPC."""
  return reverb.Client(f'{request.param}:{server.port}')


def test_port_none_picks_a_free_port_and_port_zero_reports_the_bound_one():
  with reverb.Server([uniform_table()]) as server:
    assert server.port > 0
  with reverb.Server([uniform_table()], port=0) as server:
    assert server.port > 0
    info = reverb.Client(f'ipv4:127.0.0.1:{server.port}').server_info(
      timeout=60
    )
    assert list(info) == ['my_table']


def test_server_requires_unique_tables():
  with pytest.raises(ValueError, match='At least one table'):
    reverb.Server([])
  with pytest.raises(ValueError, match='same name: a'):
    reverb.Server([uniform_table('a'), uniform_table('a')])


def test_stop_is_idempotent_and_repr_names_tables():
  server = reverb.Server([uniform_table('x')])
  assert 'name=x' in repr(server)
  server.stop()
  server.stop()


def test_insert_and_sample_round_trip(client):
  step = {
    'obs': np.arange(6, dtype=np.float32).reshape(2, 3),
    'reward': 1.5,
    'done': np.bool_(True),
    'id': np.uint64(2**63 + 5),
    'name': 'cart',
  }
  client.insert(step, {'my_table': 2.0})
  sample = next(client.sample('my_table', emit_timesteps=False))
  assert isinstance(sample, reverb.ReplaySample)
  assert sample.info.priority == 2.0
  assert sample.info.times_sampled == 1
  assert sample.info.table_size == 1
  assert sample.info.probability == 1.0
  # dm-tree order: done, id, name, obs, reward; leading time dim of 1.
  done, ident, name, obs, reward = sample.data
  assert done.dtype == np.bool_ and done.tolist() == [True]
  assert ident.dtype == np.uint64 and ident.tolist() == [2**63 + 5]
  assert name.tolist() == [b'cart']
  np.testing.assert_array_equal(obs, step['obs'][None])
  assert reward.dtype == np.float64 and reward.tolist() == [1.5]


def test_sample_emits_timesteps_by_default(client):
  client.insert([np.int32(7), np.zeros(2)], {'my_table': 1.0})
  (timestep,) = next(client.sample('my_table'))
  assert timestep.data[0] == 7
  assert timestep.data[1].shape == (2,)


def test_one_insert_reaches_several_tables():
  tables = [uniform_table('a'), uniform_table('b')]
  with reverb.Server(tables) as server:
    client = reverb.Client(f'ipv4:127.0.0.1:{server.port}')
    client.insert(np.ones(3), {'a': 1.0, 'b': 3.0})
    info = client.server_info()
    assert info['a'].current_size == 1 and info['b'].current_size == 1
    assert next(client.sample('b', emit_timesteps=False)).info.priority == 3.0


def test_unknown_table_is_a_runtime_error(client):
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    client.insert(1, {'nope': 1.0})
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    next(client.sample('nope'))


def test_insert_needs_priorities(client):
  with pytest.raises(ValueError, match='priorities'):
    client.insert(1, {})


def test_sample_timeout_raises_deadline_exceeded(client):
  start = time.monotonic()
  with pytest.raises(reverb.DeadlineExceededError):
    next(client.sample('my_table', timeout=0.2))
  assert time.monotonic() - start < 60  # gave up, did not hang


def test_sample_blocks_until_an_insert_arrives(server, client):
  import threading  # pylint: disable=g-import-not-at-top

  writer = threading.Timer(
    0.3,
    lambda: reverb.Client(f'localhost:{server.port}').insert(
      42, {'my_table': 1.0}
    ),
  )
  writer.start()
  sample = next(client.sample('my_table', emit_timesteps=False, timeout=30))
  writer.join()
  assert sample.data[0].tolist() == [42]


def test_server_info_reports_table_state(client):
  for i in range(3):
    client.insert(i, {'my_table': 1.0})
  list(client.sample('my_table', 2))
  info = client.server_info()['my_table']
  assert info.name == 'my_table'
  assert info.current_size == 3
  assert info.max_size == 1000
  assert info.sampler_options.uniform
  assert info.remover_options.fifo
  assert info.rate_limiter_info.insert_stats.completed == 3
  assert info.rate_limiter_info.sample_stats.completed == 2
  assert info.rate_limiter_info.min_size_to_sample == 1
  assert info.num_episodes == 3
  assert info.signature is None


def test_mutate_priorities_and_reset(client):
  client.insert(1, {'my_table': 1.0})
  key = next(client.sample('my_table', emit_timesteps=False)).info.key
  client.mutate_priorities('my_table', updates={key: 5.0})
  assert (
    next(client.sample('my_table', emit_timesteps=False)).info.priority == 5.0
  )
  client.mutate_priorities('my_table', deletes=[key])
  assert client.server_info()['my_table'].current_size == 0
  client.insert(2, {'my_table': 1.0})
  client.reset('my_table')
  info = client.server_info()['my_table']
  assert info.current_size == 0
  assert info.rate_limiter_info.insert_stats.completed == 0


def test_max_size_evicts_with_the_remover(client):
  with reverb.Server([uniform_table('small', max_size=2)]) as server:
    client = reverb.Client(f'ipv4:127.0.0.1:{server.port}')
    for i in range(5):
      client.insert(i, {'small': 1.0})
    values = {
      int(s.data[0][0])
      for s in client.sample('small', 20, emit_timesteps=False)
    }
    assert values == {3, 4}


def test_client_is_picklable_and_has_reverb_repr():
  client = reverb.Client('localhost:1234')
  clone = pickle.loads(pickle.dumps(client))
  assert clone.server_address == 'localhost:1234'
  assert repr(client) == 'Client, server_address=localhost:1234'


def test_server_info_timeout_on_unreachable_server():
  import portpicker  # pylint: disable=g-import-not-at-top

  client = reverb.Client(f'ipv4:127.0.0.1:{portpicker.pick_unused_port()}')
  with pytest.raises(reverb.DeadlineExceededError, match='timeout of 1s'):
    client.server_info(timeout=1)


def test_stop_cancels_a_blocked_sample():
  # A gRPC sampler retries a stopped server (it may come back, as Reverb's
  # does); the caller's timeout bounds the wait.
  import threading  # pylint: disable=g-import-not-at-top

  server = reverb.Server([uniform_table()])
  errors = []

  def blocked_sample():
    try:
      next(
        reverb.Client(f'ipv4:127.0.0.1:{server.port}').sample(
          'my_table', timeout=3
        )
      )
    except reverb.DeadlineExceededError as e:
      errors.append(e)

  thread = threading.Thread(target=blocked_sample)
  thread.start()
  time.sleep(0.5)
  server.stop()
  thread.join(timeout=30)
  assert not thread.is_alive()
  assert len(errors) == 1


def test_wait_returns_once_another_thread_stops_the_server():
  import threading  # pylint: disable=g-import-not-at-top

  server = reverb.Server([uniform_table()])
  stopper = threading.Timer(0.2, server.stop)
  stopper.start()
  server.wait()
  stopper.join()
  with pytest.raises(reverb.DeadlineExceededError):
    reverb.Client(f'ipv4:127.0.0.1:{server.port}').server_info(timeout=1)
