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
    client.insert([step, tf.strings.as_string(step)], tf.constant(['my_table']),
                  tf.constant([1.0], tf.float64))
    return step

  for i in range(3):
    act(tf.constant(i, tf.int64))

  @tf.function
  def learn():
    sample = client.sample('my_table', [tf.int64, tf.string])
    client.update_priorities('my_table', tf.reshape(sample.info.key, [1]),
                             tf.constant([7.0], tf.float64))
    return sample

  sample = learn()
  value = int(sample.data[0].numpy()[0])
  assert value in (0, 1, 2)
  assert sample.data[1].numpy().tolist() == [str(value).encode()]
  assert sample.info.times_sampled.numpy() >= 1
  py_client = reverb.Client(address)
  priorities = {s.info.key: s.info.priority
                for s in py_client.sample('my_table', 30, emit_timesteps=False)}
  assert priorities[int(sample.info.key.numpy())] == 7.0
  assert py_client.server_info()['my_table'].current_size == 3


def test_sample_returns_the_whole_item(server):
  reverb.Client(f'localhost:{server.port}').insert(
      np.arange(6, dtype=np.float32).reshape(2, 3), {'my_table': 1.0})
  sample = reverb.TFClient(f'localhost:{server.port}').sample(
      'my_table', tf.float32)
  assert sample.data.shape == (1, 2, 3)


def test_dtype_mismatch_is_an_invalid_argument(server):
  reverb.Client(f'localhost:{server.port}').insert(1.0, {'my_table': 1.0})
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Column 0 .* dtype double but int32 was requested'):
    reverb.TFClient(f'localhost:{server.port}').sample('my_table', tf.int32)


def test_insert_validates_tables_and_priorities(server):
  client = reverb.TFClient(f'localhost:{server.port}')
  with pytest.raises(ValueError, match='rank 1 string'):
    client.insert([tf.constant(1)], tf.constant('my_table'),
                  tf.constant([1.0], tf.float64))
  with pytest.raises(ValueError, match='float64'):
    client.insert([tf.constant(1)], tf.constant(['my_table']),
                  tf.constant([1.0], tf.float32))


def test_unknown_table_surfaces_as_tf_error(server):
  client = reverb.TFClient(f'ipv4:127.0.0.1:{server.port}')
  with pytest.raises(tf.errors.NotFoundError, match='Priority table nope'):
    client.insert([tf.constant(1)], tf.constant(['nope']),
                  tf.constant([1.0], tf.float64))
