"""TFClient ops in graph mode, in-process and against another process."""

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb


@pytest.fixture(params=['in_process', 'binary'])
def address(request, server, binary_server):
  if request.param == 'in_process':
    return f'localhost:{server.port}'
  return binary_server('--port=0').address


def test_insert_sample_and_update_priorities_in_tf_function(address):
  client = reverb.TFClient(address)

  @tf.function
  def act(step):
    client.insert(
      [step, tf.strings.as_string(step)],
      tf.constant(['my_table']),
      tf.constant([1.0], tf.float64),
    )
    return step

  for i in range(3):
    act(tf.constant(i, tf.int64))

  @tf.function
  def learn():
    sample = client.sample('my_table', [tf.int64, tf.string])
    client.update_priorities(
      'my_table',
      tf.reshape(sample.info.key, [1]),
      tf.constant([7.0], tf.float64),
    )
    return sample

  sample = learn()
  value = int(sample.data[0].numpy())
  assert value in (0, 1, 2)
  assert sample.data[1].numpy() == str(value).encode()
  assert sample.info.times_sampled.numpy() >= 1
  py_client = reverb.Client(address)
  priorities = {
    s.info.key: s.info.priority
    for s in py_client.sample('my_table', 30, emit_timesteps=False)
  }
  assert priorities[int(sample.info.key.numpy())] == 7.0
  assert py_client.server_info()['my_table'].current_size == 3


STEP = [
  np.float32(1.5),
  np.arange(4, dtype=np.int64),
  np.array(b'abc'),
  np.array([b'x', b'yz']),
]
STEP_DTYPES = [tf.float32, tf.int64, tf.string, tf.string]


def assert_is_step(data):
  """`data` is STEP with its inserted shapes (no leading time dimension)."""
  assert [tuple(t.shape) for t in data] == [(), (4,), (), (2,)]
  assert data[0].numpy() == 1.5
  assert data[1].numpy().tolist() == [0, 1, 2, 3]
  assert data[2].numpy() == b'abc'
  assert data[3].numpy().tolist() == [b'x', b'yz']


@pytest.mark.parametrize('writer', ['tf_client', 'client'])
def test_single_step_items_come_back_with_the_inserted_shapes(address, writer):
  if writer == 'client':
    reverb.Client(address).insert(STEP, {'my_table': 1.0})
  else:
    reverb.TFClient(address).insert(
      [tf.constant(x) for x in STEP],
      tf.constant(['my_table']),
      tf.constant([1.0], tf.float64),
    )
  client = reverb.TFClient(address)
  assert_is_step(client.sample('my_table', STEP_DTYPES).data)
  assert_is_step(
    tf.function(lambda: client.sample('my_table', STEP_DTYPES))().data
  )


def test_sample_keeps_the_nest_of_the_dtypes(server):
  address = f'localhost:{server.port}'
  reverb.Client(address).insert(
    {'a': np.int32(3), 'b': np.zeros([2, 2])}, {'my_table': 1.0}
  )
  sample = reverb.TFClient(address).sample(
    'my_table', {'a': tf.int32, 'b': tf.float64}
  )
  assert sample.data['a'].numpy() == 3
  assert sample.data['b'].shape == (2, 2)


def test_longer_items_are_truncated_to_their_first_timestep(server):
  address = f'localhost:{server.port}'
  with reverb.Client(address).trajectory_writer(num_keep_alive_refs=3) as w:
    for i in range(3):
      w.append({'obs': np.full([2], i, np.float32), 'id': str(i)})
    w.create_item(
      'my_table',
      1.0,
      {
        'obs': w.history['obs'][:],  # 3 rows
        'id': w.history['id'][:],
        'last_obs': w.history['obs'][-1],  # squeezed: one timestep as it is
      },
    )
  sample = reverb.TFClient(address).sample(
    'my_table', {'obs': tf.float32, 'id': tf.string, 'last_obs': tf.float32}
  )
  assert sample.data['obs'].numpy().tolist() == [0.0, 0.0]
  assert sample.data['id'].numpy() == b'0'
  assert sample.data['last_obs'].numpy().tolist() == [2.0, 2.0]


DTYPE_MISMATCH = 'Column 1 .* dtype int64 but int32 was requested'


def test_dtype_mismatch_is_an_invalid_argument_eagerly(server):
  address = f'localhost:{server.port}'
  reverb.Client(address).insert(STEP, {'my_table': 1.0})
  client = reverb.TFClient(address)
  wrong = [tf.float32, tf.int32, tf.string, tf.string]
  with pytest.raises(tf.errors.InvalidArgumentError, match=DTYPE_MISMATCH):
    client.sample('my_table', wrong)
  with pytest.raises(
    tf.errors.InvalidArgumentError,
    match='Column 0 .* dtype float but string was requested',
  ):
    client.sample('my_table', [tf.string] * 4)
  # The process survives and the client still works.
  assert_is_step(client.sample('my_table', STEP_DTYPES).data)


def test_dtype_mismatch_is_an_invalid_argument_in_tf_function(server):
  address = f'localhost:{server.port}'
  reverb.Client(address).insert(STEP, {'my_table': 1.0})
  client = reverb.TFClient(address)
  sample = tf.function(
    lambda: (
      client.sample(
        'my_table', [tf.float32, tf.int32, tf.string, tf.string]
      ).data
    )
  )
  with pytest.raises(tf.errors.InvalidArgumentError, match=DTYPE_MISMATCH):
    sample()


def test_dtype_mismatch_is_an_invalid_argument_in_a_v1_session(server):
  address = f'localhost:{server.port}'
  reverb.Client(address).insert(STEP, {'my_table': 1.0})
  with tf.Graph().as_default():
    client = reverb.TFClient(address)
    wrong = client.sample(
      'my_table', [tf.float32, tf.int32, tf.string, tf.string]
    )
    right = client.sample('my_table', STEP_DTYPES)
    with tf.compat.v1.Session() as session:
      with pytest.raises(tf.errors.InvalidArgumentError, match=DTYPE_MISMATCH):
        session.run(wrong.data)
      values = session.run(right.data)
  assert values[0] == 1.5
  assert values[1].tolist() == [0, 1, 2, 3]
  assert values[2] == b'abc'
  assert values[3].tolist() == [b'x', b'yz']


@pytest.mark.parametrize(
  'dtypes', [[tf.float32, tf.int64], STEP_DTYPES + [tf.int32], []]
)
def test_wrong_number_of_dtypes_is_an_invalid_argument(server, dtypes):
  address = f'localhost:{server.port}'
  reverb.Client(address).insert(STEP, {'my_table': 1.0})
  client = reverb.TFClient(address)
  match = f'has 4 columns but {len(dtypes)} dtypes were requested'
  with pytest.raises(tf.errors.InvalidArgumentError, match=match):
    client.sample('my_table', dtypes)
  with pytest.raises(tf.errors.InvalidArgumentError, match=match):
    tf.function(lambda: client.sample('my_table', dtypes).info.key)()


def test_non_scalar_table_is_an_invalid_argument(server):
  client = reverb.TFClient(f'localhost:{server.port}')
  with pytest.raises(
    tf.errors.InvalidArgumentError, match='table must be a scalar'
  ):
    client.sample(tf.constant(['my_table', 'my_table']), [tf.int32])
  with pytest.raises(
    tf.errors.InvalidArgumentError, match='table must be a scalar'
  ):
    client.update_priorities(
      tf.constant(['my_table']),
      tf.constant([1], tf.uint64),
      tf.constant([1.0], tf.float64),
    )


def test_insert_validates_tables_and_priorities(server):
  client = reverb.TFClient(f'localhost:{server.port}')
  with pytest.raises(ValueError, match='rank 1 string'):
    client.insert(
      [tf.constant(1)], tf.constant('my_table'), tf.constant([1.0], tf.float64)
    )
  with pytest.raises(ValueError, match='float64'):
    client.insert(
      [tf.constant(1)],
      tf.constant(['my_table']),
      tf.constant([1.0], tf.float32),
    )


def test_unknown_table_surfaces_as_tf_error(server):
  client = reverb.TFClient(f'ipv4:127.0.0.1:{server.port}')
  with pytest.raises(tf.errors.NotFoundError, match='Priority table nope'):
    client.insert(
      [tf.constant(1)], tf.constant(['nope']), tf.constant([1.0], tf.float64)
    )
