"""The TensorFlow agent: a Keras Q-network, graph-mode inserts, Keras fit.

The actors run the Keras Q-network and insert every transition with the
graph-mode insert op of ``TFClient`` inside a ``tf.function``; the learner
trains with Keras from a ``TrajectoryDataset.from_table_signature``
pipeline, updates priorities with ``TFClient.update_priorities`` and
publishes its weights with the Keras callback of tf_reverb; actors load
them with ``keras_callbacks.load_latest_weights``.
"""

import os
import time
from typing import Any, Dict
import warnings

import numpy as np

from dqn.common import NUM_ACTIONS
from dqn.common import OBSERVATION_SIZE
from dqn.common import REPLAY
from dqn.common import RPC_TIMEOUT_S
from dqn.common import STOP_POLL_MS
from dqn.common import WEIGHTS
from dqn.common import ignore_sigint


def make_q_network():
  """The Keras Q-network shared by actors and learner."""
  import keras  # pylint: disable=g-import-not-at-top

  return keras.Sequential(
    [
      keras.Input((OBSERVATION_SIZE,)),
      keras.layers.Dense(64, activation='relu'),
      keras.layers.Dense(64, activation='relu'),
      keras.layers.Dense(NUM_ACTIONS),
    ]
  )


def limit_threads():
  """Two cores serve four processes: one TF thread each."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)


# ---------------------------------------------------------------------------
# Actor.


def actor_main(
  index: int, address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Runs episodes, inserting each transition with the graph-mode insert op."""
  ignore_sigint()
  limit_threads()
  # pylint: disable=g-import-not-at-top
  import gymnasium as gym
  import tensorflow as tf
  import tree
  import tf_reverb as reverb
  from tf_reverb import keras_callbacks
  # pylint: enable=g-import-not-at-top

  env = gym.make('CartPole-v1')
  model = make_q_network()
  tf_client = reverb.TFClient(address)
  client = reverb.Client(config['weights_address'] or address)
  tables = tf.constant([REPLAY])
  priorities = tf.constant([1.0], tf.float64)

  @tf.function
  def policy(observation, epsilon):
    q_values = model(observation[None])[0]
    greedy = tf.argmax(q_values, output_type=tf.int64)
    explore = tf.random.uniform([]) < epsilon
    random_action = tf.random.uniform([], 0, NUM_ACTIONS, dtype=tf.int64)
    return tf.where(explore, random_action, greedy)

  @tf.function
  def insert(transition):
    tf_client.insert(tree.flatten(transition), tables, priorities)

  published = False

  def load_weights() -> bool:
    # Asks whether the learner published yet instead of sampling with a short
    # timeout: on a busy machine a short timeout also fires when weights
    # exist, and the actor would keep playing its initial policy. Once
    # published, the weights table is never empty (max_size 1, sampling does
    # not consume), so a load only waits for the server's answer.
    nonlocal published
    if not published:
      published = (
        client.server_info(timeout=RPC_TIMEOUT_S)[WEIGHTS].current_size > 0
      )
      if not published:
        return False
    keras_callbacks.load_latest_weights(
      client, WEIGHTS, model, timeout=RPC_TIMEOUT_S
    )
    return True

  steps = config['initial_steps'] // config['num_actors']
  rng = np.random.default_rng(config['seed'] + index)
  episode = 0
  while not stop.is_set():
    try:
      loaded = load_weights()
    except (RuntimeError, reverb.ReverbError):  # transport errors, deadlines
      if stop.is_set():
        return  # the server is shutting down
      raise
    observation, _ = env.reset(seed=int(rng.integers(1 << 31)))
    episode_return, done = 0.0, False
    while not done and not stop.is_set():
      fraction = min(1.0, steps / config['epsilon_decay_steps'])
      epsilon = 1.0 + fraction * (config['final_epsilon'] - 1.0)
      action = int(
        policy(
          tf.constant(observation, tf.float32), tf.constant(epsilon, tf.float32)
        )
      )
      next_observation, reward, terminated, truncated, _ = env.step(action)
      try:
        insert(
          {
            'observation': tf.constant(observation, tf.float32),
            'action': tf.constant(action, tf.int64),
            'reward': tf.constant(reward, tf.float32),
            'discount': tf.constant(0.0 if terminated else 1.0, tf.float32),
            'next_observation': tf.constant(next_observation, tf.float32),
          }
        )
      except tf.errors.OpError:
        return  # the server is shutting down
      observation = next_observation
      episode_return += reward
      steps += 1
      done = terminated or truncated
    if done:
      episode += 1
      stats.put(
        ('episode', index, episode_return, steps, epsilon, loaded, time.time())
      )
  # Inserts nothing more: the learner may stop while this process exits
  # (TensorFlow's teardown takes seconds on a busy machine).
  stats.put(('actor_stopped', index))


# ---------------------------------------------------------------------------
# Learner.


def learner_main(
  address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Trains with Keras from a TrajectoryDataset; publishes weights."""
  ignore_sigint()
  limit_threads()
  # pylint: disable=g-import-not-at-top
  import keras
  import tensorflow as tf
  import tf_reverb as reverb
  from tf_reverb import keras_callbacks
  # pylint: enable=g-import-not-at-top

  # Priority updates go to every shard (a key unknown to one is ignored).
  priority_clients = [
    reverb.TFClient(a) for a in config['shard_addresses'] or [address]
  ]
  gamma = config['discount']

  class DQNLearner(keras.Model):
    """Double DQN with prioritized replay; priorities go back to the table."""

    def __init__(self):
      super().__init__()
      self.q_network = make_q_network()
      self.target_network = make_q_network()
      self.target_network.set_weights(self.q_network.get_weights())

    def call(self, observation):
      return self.q_network(observation)

    def train_step(self, data):
      keys, t = data
      next_action = tf.argmax(self.q_network(t['next_observation']), axis=1)
      next_q = tf.gather(
        self.target_network(t['next_observation']),
        next_action,
        axis=1,
        batch_dims=1,
      )
      target = tf.stop_gradient(t['reward'] + gamma * t['discount'] * next_q)
      with tf.GradientTape() as tape:
        q = tf.gather(
          self.q_network(t['observation']), t['action'], axis=1, batch_dims=1
        )
        td_error = target - q
        loss = tf.reduce_mean(
          keras.losses.Huber(reduction=None)(target[:, None], q[:, None])
        )
      variables = self.q_network.trainable_variables
      self.optimizer.apply_gradients(
        zip(tape.gradient(loss, variables), variables)
      )
      for tf_client in priority_clients:
        tf_client.update_priorities(
          REPLAY, keys, tf.cast(tf.abs(td_error) + 1e-3, tf.float64)
        )
      return {'loss': loss, 'td_error': tf.reduce_mean(tf.abs(td_error))}

  def squeeze(sample):
    data = {k: v[0] for k, v in sample.data.items()}
    return sample.info.key, data

  # The table's rate limiter paces the learner against the actors, so the
  # learner may wait for data for as long as the actors take (a busy machine,
  # TensorFlow's start-up). A sampling dataset ends after
  # rate_limiter_timeout_ms without data; it is restarted until the run
  # stops, so a wait never ends training and a learner waiting for data
  # that will not come (the actors have stopped) still stops.
  samples = reverb.TrajectoryDataset.from_table_signature(
    server_address=address,
    table=REPLAY,
    max_in_flight_samples_per_worker=2 * config['batch_size'],
    num_workers_per_iterator=config['sampler_workers'],
    max_samples_per_stream=config['samples_per_stream'],
    rate_limiter_timeout_ms=STOP_POLL_MS,
  ).map(squeeze)
  until_stopped = tf.data.Dataset.range(1 << 62).take_while(
    lambda _: tf.reshape(
      tf.py_function(lambda: not stop.is_set(), [], tf.bool), []
    )
  )
  dataset = (
    until_stopped.flat_map(lambda _: samples)
    .batch(config['batch_size'], drop_remainder=True)
    .prefetch(2)
  )

  learner = DQNLearner()
  learner.compile(
    optimizer=keras.optimizers.Adam(config['learning_rate']), jit_compile=False
  )
  learner.build((None, OBSERVATION_SIZE))
  weights_path = config['learner_weights']
  if config['resume'] and os.path.exists(weights_path):
    learner.q_network.load_weights(weights_path)
    learner.target_network.set_weights(learner.q_network.get_weights())

  class Coordinator(keras.callbacks.Callback):
    """Target updates, progress reports and the stop signal."""

    def __init__(self):
      super().__init__()
      self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
      self.batches += 1
      if self.batches % config['target_update_every'] == 0:
        learner.target_network.set_weights(learner.q_network.get_weights())
      if self.batches % 50 == 0:
        stats.put(
          (
            'learner',
            self.batches,
            float(logs['loss']),
            time.time(),
            publisher.version,
          )
        )
      if stop.is_set():
        self.model.stop_training = True

  class QNetworkPublisher(keras_callbacks.WeightsPublisher):
    """Publishes the online Q-network (what actors run), not the target."""

    def set_model(self, model):
      super().set_model(model.q_network)

  publisher = QNetworkPublisher(
    reverb.Client(config['weights_address'] or address),
    WEIGHTS,
    every_n_batches=config['publish_every'],
    every_n_epochs=None,
  )
  coordinator = Coordinator()
  with warnings.catch_warnings():
    # The dataset ends on purpose when the run stops (above); Keras reports
    # the end of any dataset of unknown length as "ran out of data".
    warnings.filterwarnings('ignore', message='Your input ran out of data')
    # One epoch that lasts until the run stops: the dataset's end (or the
    # coordinator) ends it; with more epochs Keras would start the next one.
    # shuffle=False: the replay table decides what is sampled (Keras warns
    # that it cannot shuffle a tf.data.Dataset).
    learner.fit(
      dataset,
      epochs=1,
      verbose=0,
      shuffle=False,
      callbacks=[publisher, coordinator],
    )
  learner.q_network.save_weights(weights_path)
  stats.put(
    ('learner_done', coordinator.batches, publisher.version, time.time())
  )
