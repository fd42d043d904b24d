"""TrajectoryWriter / TrajectoryColumn through the public API, real servers."""

import time

import numpy as np
import pytest

import tf_reverb as reverb
from tests.conftest import run_python
from tests.conftest import uniform_table


def queue_table(name='queue', max_size=1):
  """A queue: inserts block once `max_size` items wait to be sampled."""
  return reverb.Table.queue(name, max_size)


@pytest.fixture
def client(server):
  return reverb.Client(f'localhost:{server.port}')


def sample_one(client, table='my_table'):
  return next(client.sample(table, emit_timesteps=False, timeout=60))


def test_items_over_history_slices_round_trip(client):
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for i in range(4):
      writer.append({'obs': np.full((2,), i, np.int32), 'r': np.float32(i)})
    writer.create_item(
      'my_table',
      priority=3.0,
      trajectory={
        'obs': writer.history['obs'][-3:],
        'r': writer.history['r'][-1],
      },
    )
  assert client.server_info()['my_table'].current_size == 1
  sample = sample_one(client)
  assert sample.info.priority == 3.0
  obs, r = sample.data
  np.testing.assert_array_equal(obs, [[1, 1], [2, 2], [3, 3]])
  assert obs.dtype == np.int32
  assert r.shape == () and float(r) == 3.0


def test_many_items_share_chunks_and_arrive_in_order(server):
  client = reverb.Client(f'localhost:{server.port}')
  writer = client.trajectory_writer(num_keep_alive_refs=5)
  for i in range(50):
    writer.append({'x': np.array([i, -i], np.int64)})
    if i >= 4:
      writer.create_item('my_table', 1.0, {'x': writer.history['x'][-5:]})
  writer.flush()
  assert client.server_info()['my_table'].current_size == 46
  seen = set()
  for sample in client.sample('my_table', 200, emit_timesteps=False):
    x = sample.data[0]
    assert x.shape == (5, 2)
    start = int(x[0, 0])
    np.testing.assert_array_equal(x[:, 0], np.arange(start, start + 5))
    np.testing.assert_array_equal(x[:, 1], -x[:, 0])
    seen.add(start)
  assert len(seen) > 30


def test_history_access_and_indexing(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  with pytest.raises(RuntimeError, match='history cannot be accessed before'):
    _ = writer.history
  for i in range(5):
    writer.append({'a': np.float32(i)})
  history = writer.history['a']
  assert len(history) == 5
  assert history[-1].is_squeezed and len(history[-1]) == 1
  assert history[4].numpy() == 4.0
  np.testing.assert_array_equal(history[2:5].numpy(), [2, 3, 4])
  np.testing.assert_array_equal(history[[2, 4]].numpy(), [2, 4])
  np.testing.assert_array_equal(history[-3::2].numpy(), [2, 4])
  with pytest.raises(TypeError):
    history['x']
  # Only the last 3 references are retained.
  with pytest.raises(ValueError, match='cannot contain any None data'):
    history[1]
  with pytest.raises(ValueError, match='cannot contain any None data'):
    history[0:3]
  with pytest.raises(IndexError):
    history[5]


def test_history_of_bare_value_steps_is_the_one_column(client):
  with client.trajectory_writer(num_keep_alive_refs=3) as writer:
    with pytest.raises(RuntimeError, match='before `append`'):
      writer.history  # pylint: disable=pointless-statement
    for i in range(3):
      writer.append(np.array([i, 10 * i], np.int64))
    history = writer.history
    assert len(history) == 3
    np.testing.assert_array_equal(history[-1].numpy(), [2, 20])
    writer.create_item('my_table', 1.0, history[-2:])
    scalar_writer = client.trajectory_writer(num_keep_alive_refs=2)
    scalar_writer.append(7)
    scalar_writer.append(8)
    assert scalar_writer.history[-1].numpy() == 8
    scalar_writer.create_item('my_table', 1.0, scalar_writer.history[-1])
    scalar_writer.flush()
  samples = {
    int(s.info.key): s.data
    for s in client.sample('my_table', num_samples=20, emit_timesteps=False)
  }
  datas = {tuple(np.ravel(d[0]).tolist()) for d in samples.values()}
  assert datas == {(1, 10, 2, 20), (8,)}


def test_trajectory_column_api(client):
  writer = client.trajectory_writer(num_keep_alive_refs=4)
  for i in range(3):
    writer.append({'a': np.full((2, 3), i, np.uint8)})
  column = writer.history['a'][:]
  assert len(column) == 3
  assert not column.is_squeezed
  assert column.shape == (3, 2, 3)
  assert column.dtype == np.uint8
  assert column.numpy().shape == (3, 2, 3)
  assert column[0].is_squeezed and column[0].shape == (2, 3)
  assert len(column[1:]) == 2 and len(column[[0, 2]]) == 2
  assert len(list(column)) == 3
  ref = list(column)[0]
  assert not ref.expired and ref.shape == [2, 3] and ref.dtype == np.uint8
  with pytest.raises(ValueError, match='exactly one data reference'):
    reverb.TrajectoryColumn(list(column), squeeze=True)
  with pytest.raises(ValueError, match='None data references'):
    reverb.TrajectoryColumn([ref, None])


def test_expired_references_raise(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  writer.append({'a': np.float32(0)})
  column = writer.history['a'][-1]
  writer.append({'a': np.float32(1)})
  ref = list(column)[0]
  assert ref.expired
  with pytest.raises(RuntimeError, match='expired'):
    column.numpy()
  with pytest.raises(ValueError, match='Error in column 0.*expired'):
    writer.create_item('my_table', 1.0, column)


def test_new_columns_are_added_and_back_filled(client):
  writer = client.trajectory_writer(num_keep_alive_refs=4)
  writer.append({'a': np.int32(0)})
  writer.append({'a': np.int32(1), 'b': np.float32(1)})
  history = writer.history
  assert set(history) == {'a', 'b'}
  assert len(history['b']) == 2
  with pytest.raises(ValueError, match='None data references'):
    history['b'][0]
  writer.append({'a': np.int32(2)})  # b absent at this step
  writer.create_item('my_table', 1.0, [history['a'][-3:], history['b'][1]])
  writer.flush()
  a, b = sample_one(client).data
  np.testing.assert_array_equal(a, [0, 1, 2])
  assert float(b) == 1.0


def test_repeated_flat_step_layouts_map_values_to_their_columns(client):
  # A layout seen before takes the writer's fast path: values must still land
  # in the columns of their paths, whatever the key order or the columns
  # added since, and references come back in the step's own structure.
  writer = client.trajectory_writer(num_keep_alive_refs=8)

  def values(step_refs):
    return {
      k: None if r is None else int(r.numpy()) for k, r in step_refs.items()
    }

  for i in range(2):
    refs = writer.append({'b': np.int32(10 + i), 'a': np.int32(i)})
    assert list(refs) == ['b', 'a']
    assert values(refs) == {'b': 10 + i, 'a': i}
  refs = writer.append({'a': np.int32(2), 'b': np.int32(12)})
  assert list(refs) == ['a', 'b'] and values(refs) == {'a': 2, 'b': 12}
  writer.append({'c': np.int32(23), 'a': np.int32(3), 'b': np.int32(13)})
  refs = writer.append({'b': np.int32(14), 'a': np.int32(4)})  # c unset
  assert values(refs) == {'b': 14, 'a': 4}
  refs = writer.append({'b': None, 'a': np.int32(5)})
  assert values(refs) == {'b': None, 'a': 5}
  # Same keys, but a value of another Python type (same dtype).
  refs = writer.append({'b': np.int32(16), 'a': np.array(6, np.int32)})
  assert values(refs) == {'b': 16, 'a': 6}
  history = writer.history
  np.testing.assert_array_equal(
    history['a'][0:7].numpy(), [0, 1, 2, 3, 4, 5, 6]
  )
  np.testing.assert_array_equal(history['b'][0:5].numpy(), [10, 11, 12, 13, 14])
  assert int(history['b'][6].numpy()) == 16
  assert int(history['c'][3].numpy()) == 23
  for index in (4, 5, 6):
    with pytest.raises(ValueError, match='None data references'):
      history['c'][index]

  empty = client.trajectory_writer(num_keep_alive_refs=2)
  for _ in range(2):
    assert empty.append({}) == {} and empty.append([]) == []
  assert empty.episode_steps == 4

  tuples = client.trajectory_writer(num_keep_alive_refs=2)
  for i in range(3):
    refs = tuples.append((np.int32(i), np.float32(-i)))
    assert isinstance(refs, tuple) and float(refs[1].numpy()) == -i
  lists = client.trajectory_writer(num_keep_alive_refs=2)
  for i in range(3):
    refs = lists.append([np.int32(i)])
    assert isinstance(refs, list) and int(refs[0].numpy()) == i


def test_none_leaves_and_returned_references(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  refs = writer.append({'a': np.int32(0), 'b': None})
  assert refs['b'] is None and refs['a'].numpy() == 0
  assert len(writer.history['b']) == 1


def test_partial_steps(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'a': np.int32(5)}, partial_step=True)
  assert writer.episode_steps == 0
  with pytest.raises(
    ValueError,
    match=r"Field \('a',\) has already been set in "
    r'the active step.*but got: 5',
  ):
    writer.append({'a': np.int32(5)}, partial_step=True)
  writer.append({'b': np.float32(1)})
  assert writer.episode_steps == 1
  assert len(writer.history['a']) == 1 and len(writer.history['b']) == 1
  writer.create_item(
    'my_table', 1.0, (writer.history['a'][-1], writer.history['b'][-1])
  )
  writer.flush()
  a, b = sample_one(client).data
  assert int(a) == 5 and float(b) == 1.0


def test_dtype_and_shape_errors_name_the_column(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'a': np.int32(1), 'b': np.zeros(2, np.float32)})
  with pytest.raises(
    ValueError,
    match=r"wrong dtype provided for column \('a',\)"
    '. Got float but expected int32',
  ):
    writer.append({'a': np.float32(1), 'b': np.zeros(2, np.float32)})
  with pytest.raises(
    ValueError,
    match=r"incompatible shape provided for column "
    r"\('b',\)",
  ):
    writer.append({'a': np.int32(1), 'b': np.zeros(3, np.float32)})
  assert writer.episode_steps == 1


def test_create_item_argument_errors(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append([np.int32(1)])
  with pytest.raises(TypeError, match='TrajectoryColumn'):
    writer.create_item('my_table', 1.0, [np.int32(1)])
  with pytest.raises(ValueError, match='at least one column'):
    writer.create_item('my_table', 1.0, [])
  with pytest.raises(ValueError, match='NaN'):
    writer.create_item('my_table', float('nan'), writer.history[0][-1])
  with pytest.raises(
    ValueError, match="table 'nope' since the table could not be found"
  ):
    writer.create_item('nope', 1.0, writer.history[0][-1])


def test_validate_items_false_makes_unknown_table_sticky(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1, validate_items=False)
  writer.append([np.int32(1)])
  writer.create_item('nope', 1.0, writer.history[0][-1])
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    writer.flush()
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    writer.append([np.int32(2)])


def test_signature_validation():
  tf = pytest.importorskip('tensorflow')
  table = reverb.Table(
    'sig',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
    signature={
      'obs': tf.TensorSpec([None, 2], tf.float32),
      'r': tf.TensorSpec([], tf.int64),
    },
  )
  with reverb.Server([table]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.trajectory_writer(num_keep_alive_refs=3)
    for i in range(3):
      writer.append({'obs': np.zeros(2, np.float32), 'r': np.int64(i)})
    history = writer.history
    writer.create_item(
      'sig', 1.0, {'obs': history['obs'][-2:], 'r': history['r'][-1]}
    )
    with pytest.raises(
      ValueError, match='inconsistent with the table signature'
    ):
      writer.create_item(
        'sig', 1.0, {'obs': history['obs'][-2:], 'r': history['r'][-2:]}
      )
    with pytest.raises(ValueError, match='1 columns but the signature has 2'):
      writer.create_item(
        'sig', 1.0, [history['obs'][-2:], history['r'][-1]][:1]
      )
    writer.flush()
    assert client.server_info()['sig'].current_size == 1


def test_flush_timeout_and_block_until_num_items():
  with reverb.Server([queue_table()]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for i in range(2):
      writer.append([np.int32(i)])
      writer.create_item('queue', 1.0, writer.history[0][-1])
    writer.flush(block_until_num_items=1)  # the first item was inserted
    with pytest.raises(
      reverb.DeadlineExceededError,
      match='Flush call did not complete within provided '
      'timeout of 0:00:00.200000',
    ):
      writer.flush(timeout_ms=200)
    with pytest.raises(ValueError):
      writer.flush(block_until_num_items=-1)
    assert next(client.sample('queue', emit_timesteps=False)).data[0] == 0
    writer.flush(timeout_ms=30000)
    assert next(client.sample('queue', emit_timesteps=False)).data[0] == 1


def test_end_episode(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  for i in range(3):
    writer.append({'a': np.int32(i)})
  writer.create_item('my_table', 1.0, {'a': writer.history['a'][:]})
  kept = writer.history['a'][-1]
  writer.end_episode(clear_buffers=False)
  assert client.server_info()['my_table'].current_size == 1
  assert writer.episode_steps == 0
  assert kept.numpy() == 2  # still readable: its chunk was finalized
  assert len(writer.history['a']) == 3
  writer.append({'a': np.int32(7)})
  writer.end_episode()
  assert len(writer.history['a']) == 0
  # The writer lets go of the cell once its background threads are done with
  # the confirmed item: they free requests and items outside the writer's
  # lock, possibly just after end_episode returned (seen under load).
  deadline = time.monotonic() + 60
  while not list(kept)[0].expired and time.monotonic() < deadline:
    time.sleep(0.01)
  assert list(kept)[0].expired
  info = client.server_info()['my_table']
  assert info.num_episodes == 1


def test_end_episode_timeout_resets_nothing():
  with reverb.Server([queue_table()]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    for i in range(2):
      writer.append([np.int32(i)])
      writer.create_item('queue', 1.0, writer.history[0][-1])
    with pytest.raises(
      reverb.DeadlineExceededError, match='End episode call did not complete'
    ):
      writer.end_episode(timeout_ms=0)
    assert writer.episode_steps == 2
    assert len(writer.history[0]) == 2
    next(client.sample('queue', emit_timesteps=False))
    writer.end_episode(timeout_ms=30000)
    assert writer.episode_steps == 0


def test_configure(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  with pytest.raises(ValueError):
    writer.configure(('a',), num_keep_alive_refs=0, max_chunk_length=None)
  with pytest.raises(ValueError):
    writer.configure(('a',), num_keep_alive_refs=2, max_chunk_length=3)
  writer.configure(('a',), num_keep_alive_refs=6, max_chunk_length=3)
  assert writer.max_num_keep_alive_refs == 6
  for i in range(6):
    writer.append({'a': np.int32(i), 'b': np.int32(i)})
  # 'a' keeps 6 references; 'b' only the default 2.
  np.testing.assert_array_equal(writer.history['a'][:].numpy(), range(6))
  with pytest.raises(ValueError, match='expired'):
    writer.create_item('my_table', 1.0, writer.history['b'][:])
  writer.append({'a': np.int32(6), 'b': np.int32(6)}, partial_step=False)
  with pytest.raises(RuntimeError, match='Flush must be called before'):
    writer.configure(('a',), num_keep_alive_refs=5, max_chunk_length=5)


def test_inputs_numpy_scalars_strings_and_nests(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  step = {
    'f': 1.5,
    'i': 3,
    'b': True,
    's': 'hello',
    'nested': (np.arange(3, dtype=np.int16), [np.uint8(9)]),
  }
  writer.append(step)
  writer.create_item('my_table', 1.0, tree_map_last(writer.history))
  writer.flush()
  data = sample_one(client).data
  # dm-tree order: b, f, i, nested/0, nested/1/0, s
  assert data[0].dtype == np.bool_ and bool(data[0])
  assert data[1].dtype == np.float64 and float(data[1]) == 1.5
  assert data[2].dtype == np.int64 and int(data[2]) == 3
  np.testing.assert_array_equal(data[3], [0, 1, 2])
  assert data[4].dtype == np.uint8 and int(data[4]) == 9
  assert data[5] == b'hello'


def tree_map_last(history):
  import tree  # pylint: disable=g-import-not-at-top

  return tree.map_structure(lambda h: h[-1], history)


def test_eager_tf_tensors(client):
  tf = pytest.importorskip('tensorflow')
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'x': tf.constant([1.0, 2.0]), 'y': tf.constant(4, tf.int64)})
  writer.append({'x': tf.constant([3.0, 4.0]), 'y': tf.constant(5, tf.int64)})
  writer.create_item(
    'my_table', 1.0, {'x': writer.history['x'][:], 'y': writer.history['y'][-1]}
  )
  writer.flush()
  x, y = sample_one(client).data
  np.testing.assert_array_equal(x, [[1, 2], [3, 4]])
  assert int(y) == 5


def test_close(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  writer.append([np.int32(1)])
  writer.close()
  with pytest.raises(RuntimeError, match='Close has been called'):
    writer.append([np.int32(2)])
  with pytest.raises(RuntimeError, match='Close has been called'):
    writer.flush()


def test_context_manager_flushes(client):
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append([np.int32(1)])
    writer.create_item('my_table', 1.0, writer.history[0][-1])
  assert client.server_info()['my_table'].current_size == 1


def test_num_keep_alive_refs_must_be_positive(client):
  with pytest.raises(ValueError):
    client.trajectory_writer(num_keep_alive_refs=0)


def test_keeps_working_across_server_restart_without_duplicates():
  server = reverb.Server([uniform_table()])
  port = server.port
  client = reverb.Client(f'localhost:{port}')
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for i in range(3):
    writer.append([np.int32(i)])
    writer.create_item('my_table', 1.0, writer.history[0][-1])
  writer.flush()
  assert client.server_info()['my_table'].current_size == 3
  server.stop()
  server = reverb.Server([uniform_table()], port=port)
  try:
    for i in range(3, 5):
      writer.append([np.int32(i)])
      writer.create_item('my_table', 1.0, writer.history[0][-1])
    writer.flush(timeout_ms=30000)
    assert client.server_info()['my_table'].current_size == 2
    values = {
      int(s.data[0])
      for s in client.sample('my_table', 50, emit_timesteps=False)
    }
    assert values == {3, 4}
  finally:
    server.stop()


def test_import_does_not_load_tensorflow():
  run_python(
    'import sys, numpy as np, tf_reverb as reverb\n'
    'from tests.conftest import uniform_table\n'
    's = reverb.Server([uniform_table()])\n'
    'c = reverb.Client(f"localhost:{s.port}")\n'
    'with c.trajectory_writer(2) as w:\n'
    '  w.append({"a": np.int32(1)})\n'
    '  w.create_item("my_table", 1.0, w.history["a"][-1])\n'
    'assert "tensorflow" not in sys.modules\n'
  )


@pytest.mark.parametrize('num_keep_alive_refs', [1, 5, 50])
def test_each_item_reaches_the_table_before_the_next_step(num_keep_alive_refs):
  """An actor creating an item per step (default, auto-tuned chunking) sees
  each item in the table without a flush and without appending more steps."""
  with reverb.Server([reverb.Table.queue('q', 100)]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writer = client.trajectory_writer(num_keep_alive_refs=num_keep_alive_refs)
    length = min(3, num_keep_alive_refs)
    for i in range(12):
      writer.append({'obs': np.full(4, i, np.float32), 'step': np.int64(i)})
      if writer.episode_steps < length:
        continue
      writer.create_item(
        'q',
        1.0,
        {
          'obs': writer.history['obs'][-length:],
          'step': writer.history['step'][-1],
        },
      )
      # The timeout only bounds a failure: without the item the queue is empty.
      sample = next(client.sample('q', emit_timesteps=False, timeout=60))
      assert int(sample.data[1]) == i
      np.testing.assert_array_equal(
        sample.data[0][:, 0], np.arange(i - length + 1, i + 1)
      )
    writer.close()
