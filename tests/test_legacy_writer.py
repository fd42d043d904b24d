"""The legacy step-oriented Writer (Client.writer), real servers."""

import threading

import numpy as np
import pytest

import tf_reverb as reverb


@pytest.fixture
def client(server):
  return reverb.Client(f'localhost:{server.port}')


def test_items_over_last_timesteps(client):
  with client.writer(max_sequence_length=3) as writer:
    for i in range(5):
      writer.append({'obs': np.full((2,), i, np.float32), 'a': np.int64(i)})
      if i >= 1:
        writer.create_item('my_table', num_timesteps=2, priority=float(i))
  assert client.server_info()['my_table'].current_size == 4
  by_priority = {}
  for sample in client.sample('my_table', 100, emit_timesteps=False):
    by_priority[sample.info.priority] = sample.data
  assert set(by_priority) == {1.0, 2.0, 3.0, 4.0}
  a, obs = by_priority[3.0]
  np.testing.assert_array_equal(a, [2, 3])
  np.testing.assert_array_equal(obs, [[2, 2], [3, 3]])
  # Timestep mode splits along the leading dimension.
  steps = next(client.sample('my_table'))
  assert len(steps) == 2


def test_append_sequence(client):
  writer = client.writer(max_sequence_length=4, chunk_length=2)
  writer.append_sequence(
    [np.arange(4, dtype=np.int32), np.ones((4, 3), np.float64)]
  )
  writer.create_item('my_table', 4, 1.0)
  writer.close()
  a, b = next(client.sample('my_table', emit_timesteps=False)).data
  np.testing.assert_array_equal(a, [0, 1, 2, 3])
  assert b.shape == (4, 3)
  with pytest.raises(ValueError, match='rank >= 1'):
    client.writer(2).append_sequence([np.int32(1)])
  with pytest.raises(ValueError, match='same leading'):
    client.writer(2).append_sequence([np.zeros(2), np.zeros(3)])


def test_delta_encoded_round_trip(client):
  writer = client.writer(max_sequence_length=4, delta_encoded=True)
  rows = [np.array([10, 13, 16], np.int32) * (i + 1) for i in range(4)]
  for row in rows:
    writer.append([row, np.float32(1)])
  writer.create_item('my_table', 4, 1.0)
  writer.close()
  ints, floats = next(client.sample('my_table', emit_timesteps=False)).data
  np.testing.assert_array_equal(ints, np.stack(rows))
  np.testing.assert_array_equal(floats, [1, 1, 1, 1])


def test_argument_validation(client):
  with pytest.raises(ValueError):
    client.writer(0)
  with pytest.raises(ValueError):
    client.writer(2, chunk_length=3)
  with pytest.raises(ValueError):
    client.writer(2, chunk_length=0)
  with pytest.raises(ValueError):
    client.writer(2, max_in_flight_items=0)
  writer = client.writer(2)
  writer.append([np.int32(1)])
  with pytest.raises(
    ValueError, match='Number of tensors per timestep was inconsistent'
  ):
    writer.append([np.int32(1), np.int32(2)])
  with pytest.raises(ValueError, match='positive integer'):
    writer.create_item('my_table', 0, 1.0)
  with pytest.raises(ValueError, match='larger than number of buffered'):
    writer.create_item('my_table', 2, 1.0)
  writer.append([np.int32(2)])
  with pytest.raises(ValueError, match='max_sequence_length'):
    writer.create_item('my_table', 3, 1.0)
  with pytest.raises(ValueError, match='NaN'):
    writer.create_item('my_table', 1, float('nan'))
  with pytest.raises(ValueError, match='could not be found'):
    writer.create_item('nope', 1, 1.0)
  with pytest.raises(ValueError):
    writer.append([np.float32(1)])  # dtype differs from the column's


def test_close_twice_and_reuse(client):
  writer = client.writer(1)
  writer.close()
  with pytest.raises(ValueError, match='close\\(\\) has already been called'):
    writer.close()
  with pytest.raises(ValueError, match='Cannot reuse already closed Writer'):
    with writer:
      pass


def test_flush_sends_items_of_the_open_chunk(client):
  writer = client.writer(max_sequence_length=10, chunk_length=10)
  writer.append([np.int32(1)])
  writer.create_item('my_table', 1, 1.0)
  assert client.server_info()['my_table'].current_size == 0  # chunk still open
  writer.flush()
  assert client.server_info()['my_table'].current_size == 1
  writer.close()


def test_max_in_flight_items_bounds_pending_items():
  with reverb.Server([reverb.Table.queue('queue', 1)]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.writer(1, max_in_flight_items=2)
    for i in range(3):
      writer.append([np.int32(i)])
      writer.create_item('queue', 1, 1.0)
    done = threading.Event()

    def create_fourth():
      writer.append([np.int32(3)])
      writer.create_item('queue', 1, 1.0)
      done.set()

    thread = threading.Thread(target=create_fourth)
    thread.start()
    assert not done.wait(0.3)  # blocked: two items already pending
    values = [
      int(
        next(client.sample('queue', emit_timesteps=False, timeout=30)).data[0][
          0
        ]
      )
      for _ in range(4)
    ]
    thread.join(30)
    assert done.is_set()
    assert values == [0, 1, 2, 3]
    writer.close()


def test_signature_accepts_step_shapes():
  tf = pytest.importorskip('tensorflow')
  table = reverb.Table(
    'sig',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
    signature=[tf.TensorSpec([2], tf.float32)],
  )
  with reverb.Server([table]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.writer(3)
    for _ in range(3):
      writer.append([np.zeros(2, np.float32)])
    writer.create_item('sig', 3, 1.0)
    writer.close()
    bad = client.writer(1)
    bad.append([np.zeros(3, np.float32)])
    with pytest.raises(ValueError, match='signature'):
      bad.create_item('sig', 1, 1.0)
