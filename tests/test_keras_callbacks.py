"""WeightsPublisher / load_latest_weights with a real Keras model and server."""

import numpy as np
import pytest

import tf_reverb as reverb

tf = pytest.importorskip('tensorflow')


def make_model(seed):
  tf.keras.utils.set_random_seed(seed)
  model = tf.keras.Sequential(
    [
      tf.keras.Input(shape=(3,)),
      tf.keras.layers.Dense(4, activation='relu'),
      tf.keras.layers.Dense(1),
    ]
  )
  model.compile(optimizer='sgd', loss='mse')
  return model


def test_publish_every_n_batches_and_load_into_actor_model():
  with reverb.Server([reverb.weights_table('weights')]) as server:
    address = f'localhost:{server.port}'
    learner = make_model(0)
    publisher = reverb.WeightsPublisher(
      address, 'weights', every_n_batches=2, every_n_epochs=None
    )
    x = np.random.RandomState(0).rand(32, 3).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    learner.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[publisher])
    # 8 batches -> publishes after batches 2, 4, 6, 8; nothing new at the end.
    assert publisher.version == 4
    info = reverb.Client(address).server_info()['weights']
    assert info.rate_limiter_info.insert_stats.completed == 4
    assert info.current_size == 1  # only the newest weights are kept

    actor = make_model(1)
    assert not all(
      np.array_equal(a, b)
      for a, b in zip(actor.get_weights(), learner.get_weights())
    )
    version = reverb.load_latest_weights(address, 'weights', actor, timeout=60)
    assert version == 4
    for got, want in zip(actor.get_weights(), learner.get_weights()):
      np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(
      actor.predict(x, verbose=0), learner.predict(x, verbose=0)
    )
    # Loading does not consume the weights.
    assert reverb.load_latest_weights(address, 'weights', actor) == 4


def test_publish_every_epoch_and_on_train_end():
  with reverb.Server([reverb.weights_table('weights')]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    model = make_model(0)
    publisher = reverb.WeightsPublisher(client, 'weights', every_n_epochs=2)
    x = np.zeros((4, 3), np.float32)
    model.fit(
      x, x[:, :1], batch_size=4, epochs=3, verbose=0, callbacks=[publisher]
    )
    assert publisher.version == 2  # after epoch 2, then at the end of fit


def test_errors():
  with reverb.Server([reverb.weights_table('weights')]) as server:
    address = f'localhost:{server.port}'
    with pytest.raises(ValueError):
      reverb.WeightsPublisher(address, 'weights', every_n_batches=0)
    with pytest.raises(reverb.DeadlineExceededError):
      reverb.load_latest_weights(address, 'weights', make_model(0), timeout=0.2)
    publisher = reverb.WeightsPublisher(address, 'weights')
    publisher.set_model(make_model(0))
    publisher.publish()
    other = tf.keras.Sequential(
      [tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)]
    )
    with pytest.raises(ValueError, match='arrays but the model has'):
      reverb.load_latest_weights(address, 'weights', other)
