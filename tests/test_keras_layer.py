"""tf_reverb.keras.InsertLayer: inserts as a side effect, returns its inputs."""

import numpy as np
import tensorflow as tf

import tf_reverb as reverb
from tf_reverb import keras as reverb_keras


def _count(server):
  return (
    reverb.Client(f'localhost:{server.port}')
    .server_info()['my_table']
    .current_size
  )


def test_layer_inserts_in_eager_calls_predict_and_tf_function(server):
  address = f'localhost:{server.port}'
  inputs = tf.keras.Input((3,))
  hidden = reverb_keras.InsertLayer(address, 'my_table', priority=2.0)(inputs)
  outputs = tf.keras.layers.Dense(1, kernel_initializer='ones')(hidden)
  model = tf.keras.Model(inputs, outputs)
  x = np.arange(6, dtype=np.float32).reshape(2, 3)

  np.testing.assert_allclose(model(x).numpy(), [[3.0], [12.0]])  # unchanged
  assert _count(server) == 1
  sample = next(reverb.Client(address).sample('my_table', emit_timesteps=False))
  np.testing.assert_array_equal(sample.data[0], x[None])  # the whole batch
  assert sample.info.priority == 2.0

  model.predict(np.ones((8, 3), np.float32), batch_size=4, verbose=0)
  assert _count(server) == 3  # one item per predict batch

  @tf.function
  def run(batch):
    return model(batch)

  run(tf.ones((1, 3)))
  run(tf.zeros((1, 3)))
  assert _count(server) == 5


def test_weights_channel_names_are_exported():
  assert reverb_keras.WeightsPublisher is not None
  assert callable(reverb_keras.load_latest_weights)
  table = reverb_keras.weights_table('w')
  assert table.info.max_size == 1
