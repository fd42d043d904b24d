"""Distributed DQN on CartPole with tf_reverb: the product doing its real job.

  python examples/dqn_cartpole.py [--quick] [--resume] [--actors N]

The Bazel-built ``reverb_server`` binary holds the replay data: a prioritized
replay table rate-limited by SampleToInsertRatio, and a weights table; it
checkpoints periodically and on exit. N actor processes run a Keras Q-network
on gymnasium's CartPole and insert every transition with the graph-mode insert
op inside a ``tf.function``. One learner process trains with Keras from a
``TrajectoryDataset.from_table_signature`` pipeline, updates priorities with
``TFClient.update_priorities`` and publishes its weights with the Keras
callback of tf_reverb; actors load them from the weights table.

This process orchestrates: it prints a live progress line, and at the end a
summary paragraph, ``summary.json`` and ``learning_curve.png`` in --run_dir.
``--resume`` continues a killed run from the server's latest checkpoint and
the learner's saved weights. Ctrl-C stops everything cleanly.
"""

import argparse
import base64
import collections
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

import numpy as np

REPLAY = 'replay'
WEIGHTS = 'weights'
OBSERVATION_SIZE = 4
NUM_ACTIONS = 2
RANDOM_POLICY_RETURN = 22.0  # mean CartPole-v1 return of a random policy


# ---------------------------------------------------------------------------
# Shared pieces (imported by every process).


def transition_signature():
  """The replay table's signature: one transition, as TFClient.insert stores it.

  TFClient.insert writes one step per item, so every column carries a leading
  time dimension of 1.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {
      'observation': tf.TensorSpec([1, OBSERVATION_SIZE], tf.float32),
      'action': tf.TensorSpec([1], tf.int64),
      'reward': tf.TensorSpec([1], tf.float32),
      'discount': tf.TensorSpec([1], tf.float32),
      'next_observation': tf.TensorSpec([1, OBSERVATION_SIZE], tf.float32),
  }


def make_q_network():
  """The Keras Q-network shared by actors and learner."""
  import keras  # pylint: disable=g-import-not-at-top
  return keras.Sequential([
      keras.Input((OBSERVATION_SIZE,)),
      keras.layers.Dense(64, activation='relu'),
      keras.layers.Dense(64, activation='relu'),
      keras.layers.Dense(NUM_ACTIONS),
  ])


def limit_threads():
  """Two cores serve four processes: one TF thread each."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)


def ignore_sigint():
  """Children leave Ctrl-C to the orchestrator, which stops them in order."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------
# Actor.


def actor_main(index: int, address: str, config: Dict[str, Any],
               stop: Any, stats: Any) -> None:
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
  client = reverb.Client(address)
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

  def load_weights() -> bool:
    try:
      keras_callbacks.load_latest_weights(client, WEIGHTS, model, timeout=0.05)
    except reverb.DeadlineExceededError:
      return False  # nothing published yet
    return True

  steps = config['initial_steps'] // config['num_actors']
  rng = np.random.default_rng(config['seed'] + index)
  episode = 0
  while not stop.is_set():
    loaded = load_weights()
    observation, _ = env.reset(seed=int(rng.integers(1 << 31)))
    episode_return, done = 0.0, False
    while not done and not stop.is_set():
      fraction = min(1.0, steps / config['epsilon_decay_steps'])
      epsilon = 1.0 + fraction * (config['final_epsilon'] - 1.0)
      action = int(policy(tf.constant(observation, tf.float32),
                          tf.constant(epsilon, tf.float32)))
      next_observation, reward, terminated, truncated, _ = env.step(action)
      try:
        insert({
            'observation': tf.constant(observation, tf.float32),
            'action': tf.constant(action, tf.int64),
            'reward': tf.constant(reward, tf.float32),
            'discount': tf.constant(0.0 if terminated else 1.0, tf.float32),
            'next_observation': tf.constant(next_observation, tf.float32),
        })
      except tf.errors.OpError:
        return  # the server is shutting down
      observation = next_observation
      episode_return += reward
      steps += 1
      done = terminated or truncated
    if done:
      episode += 1
      stats.put(('episode', index, episode_return, steps, epsilon, loaded,
                 time.time()))


# ---------------------------------------------------------------------------
# Learner.


def learner_main(address: str, config: Dict[str, Any], stop: Any,
                 stats: Any) -> None:
  """Trains with Keras from a TrajectoryDataset; publishes weights."""
  ignore_sigint()
  limit_threads()
  # pylint: disable=g-import-not-at-top
  import keras
  import tensorflow as tf
  import tf_reverb as reverb
  from tf_reverb import keras_callbacks
  # pylint: enable=g-import-not-at-top

  tf_client = reverb.TFClient(address)
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
      next_q = tf.gather(self.target_network(t['next_observation']),
                         next_action, axis=1, batch_dims=1)
      target = tf.stop_gradient(t['reward'] + gamma * t['discount'] * next_q)
      with tf.GradientTape() as tape:
        q = tf.gather(self.q_network(t['observation']), t['action'], axis=1,
                      batch_dims=1)
        td_error = target - q
        loss = tf.reduce_mean(keras.losses.Huber(reduction=None)(
            target[:, None], q[:, None]))
      variables = self.q_network.trainable_variables
      self.optimizer.apply_gradients(
          zip(tape.gradient(loss, variables), variables))
      tf_client.update_priorities(
          REPLAY, keys, tf.cast(tf.abs(td_error) + 1e-3, tf.float64))
      return {'loss': loss, 'td_error': tf.reduce_mean(tf.abs(td_error))}

  def squeeze(sample):
    data = {k: v[0] for k, v in sample.data.items()}
    return sample.info.key, data

  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=address, table=REPLAY,
      max_in_flight_samples_per_worker=2 * config['batch_size'],
      rate_limiter_timeout_ms=config['sample_timeout_ms'])
  dataset = (dataset.map(squeeze)
             .batch(config['batch_size'], drop_remainder=True)
             .prefetch(2))

  learner = DQNLearner()
  learner.compile(optimizer=keras.optimizers.Adam(config['learning_rate']),
                  jit_compile=False)
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
        stats.put(('learner', self.batches, float(logs['loss']), time.time(),
                   publisher.version))
      if stop.is_set():
        self.model.stop_training = True

  class QNetworkPublisher(keras_callbacks.WeightsPublisher):
    """Publishes the online Q-network (what actors run), not the target."""

    def set_model(self, model):
      super().set_model(model.q_network)

  publisher = QNetworkPublisher(
      reverb.Client(address), WEIGHTS,
      every_n_batches=config['publish_every'], every_n_epochs=None)
  coordinator = Coordinator()
  learner.fit(dataset, epochs=1_000_000, steps_per_epoch=100, verbose=0,
              callbacks=[publisher, coordinator])
  learner.q_network.save_weights(weights_path)
  stats.put(('learner_done', coordinator.batches, publisher.version,
             time.time()))


# ---------------------------------------------------------------------------
# Orchestrator.


def server_config(config: Dict[str, Any]) -> Dict[str, Any]:
  """The reverb_server configuration (JSON form of ReverbServerConfig)."""
  # pylint: disable=g-import-not-at-top
  import tf_reverb as reverb
  from tf_reverb import reverb_types
  # pylint: enable=g-import-not-at-top
  limiter = reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=config['samples_per_insert'],
      min_size_to_sample=config['min_replay_size'],
      error_buffer=config['min_replay_size'] * config['samples_per_insert'])
  signature = reverb_types.encode_signature(transition_signature())
  return {
      'port': 0,
      'tables': [{
          'table_name': REPLAY,
          'sampler': {'prioritized': {'priority_exponent': 0.6}},
          'remover': {'fifo': True},
          'max_size': config['replay_size'],
          'rate_limiter': {
              'samples_per_insert': limiter.samples_per_insert,
              'min_size_to_sample': limiter.min_size_to_sample,
              'min_diff': limiter.min_diff,
              'max_diff': limiter.max_diff,
          },
          'signature': base64.b64encode(signature).decode(),
      }, {
          'table_name': WEIGHTS,  # keras_callbacks.weights_table's layout
          'sampler': {'lifo': True},
          'remover': {'fifo': True},
          'max_size': 1,
          'rate_limiter': {'samples_per_insert': 1.0, 'min_size_to_sample': 1,
                           'min_diff': -1e300, 'max_diff': 1e300},
      }],
  }


class Run:
  """Starts, watches and stops the server, the actors and the learner."""

  def __init__(self, args: argparse.Namespace):
    self.args = args
    self.run_dir = os.path.abspath(args.run_dir)
    os.makedirs(self.run_dir, exist_ok=True)
    self.state_path = os.path.join(self.run_dir, 'state.json')
    previous = {}
    if args.resume and os.path.exists(self.state_path):
      with open(self.state_path) as f:
        previous = json.load(f)
    elif not args.resume:
      for name in os.listdir(self.run_dir):  # a fresh run starts empty
        if name in ('checkpoints', 'learner.weights.h5', 'state.json'):
          subprocess.run(['rm', '-rf', os.path.join(self.run_dir, name)],
                         check=True)
    self.config = dict(
        num_actors=args.actors, seed=args.seed, resume=args.resume,
        initial_steps=previous.get('env_steps', 0),
        epsilon_decay_steps=args.epsilon_decay_steps, final_epsilon=0.05,
        discount=0.99, batch_size=64, learning_rate=1e-3,
        target_update_every=200, publish_every=50, samples_per_insert=8.0,
        min_replay_size=500, replay_size=50_000, sample_timeout_ms=5000,
        learner_weights=os.path.join(self.run_dir, 'learner.weights.h5'))
    self.returns: List[float] = list(previous.get('returns', []))
    self.return_steps: List[int] = list(previous.get('return_steps', []))
    self.env_steps = previous.get('env_steps', 0)
    self.actor_steps = collections.defaultdict(int)
    self.weights_loaded = previous.get('weights_loaded', 0)
    self.learner_batches = 0
    self.weights_published = 0
    self.rates: List[Dict[str, float]] = []
    self.failed: List[str] = []
    self.start = time.time()

  # -- processes --------------------------------------------------------------

  def start_server(self) -> None:
    from tf_reverb.server_executable import server_main  # pylint: disable=g-import-not-at-top
    config_path = os.path.join(self.run_dir, 'server.json')
    with open(config_path, 'w') as f:
      json.dump(server_config(self.config), f)
    self.checkpoint_dir = os.path.join(self.run_dir, 'checkpoints')
    self.server_log = open(os.path.join(self.run_dir, 'server.log'), 'w')
    self.server = subprocess.Popen(
        [server_main.BINARY_PATH, f'--config_file={config_path}',
         f'--checkpoint_dir={self.checkpoint_dir}',
         f'--checkpoint_interval_seconds={self.args.checkpoint_interval}'],
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in self.server.stderr:
      self.server_log.write(line)
      match = re.search(r'event=started port=(\d+)', line)
      if match:
        self.address = f'localhost:{match.group(1)}'
        break
    else:
      raise RuntimeError('reverb_server did not start; see server.log')
    # Keep draining the server's log so it never blocks on a full pipe.
    import threading  # pylint: disable=g-import-not-at-top
    threading.Thread(target=self._copy_server_log, daemon=True).start()

  def _copy_server_log(self) -> None:
    for line in self.server.stderr:
      self.server_log.write(line)
      self.server_log.flush()

  def start_workers(self) -> None:
    context = mp.get_context('spawn')
    self.stop_event = context.Event()
    self.stats = context.Queue()
    self.actors = [
        context.Process(target=actor_main, name=f'actor-{i}',
                        args=(i, self.address, self.config, self.stop_event,
                              self.stats))
        for i in range(self.args.actors)
    ]
    self.learner = context.Process(
        target=learner_main, name='learner',
        args=(self.address, self.config, self.stop_event, self.stats))
    for process in self.actors + [self.learner]:
      process.start()

  def stop(self) -> None:
    """Actors first, then the learner, then the server (final checkpoint)."""
    self.stop_event.set()
    for process in self.actors:
      process.join(timeout=10)
    self.learner.join(timeout=30)
    self.drain_stats()
    # Anything still blocked (e.g. an insert held by the rate limiter) is
    # released when the server drains and stops.
    self.server.send_signal(signal.SIGTERM)
    try:
      self.server.wait(timeout=60)
    except subprocess.TimeoutExpired:
      self.server.kill()
    for process in self.actors + [self.learner]:
      process.join(timeout=10)
      if process.is_alive():
        process.kill()
    self.drain_stats()

  # -- progress ---------------------------------------------------------------

  def drain_stats(self) -> None:
    while True:
      try:
        message = self.stats.get_nowait()
      except queue.Empty:
        return
      kind = message[0]
      if kind == 'episode':
        _, actor, episode_return, steps, _, loaded, _ = message
        self.returns.append(episode_return)
        self.actor_steps[actor] = steps
        self.env_steps = sum(self.actor_steps.values())
        self.return_steps.append(self.env_steps)
        self.weights_loaded += int(loaded)
      elif kind == 'learner':
        # Counted as it goes, so a learner stopped the hard way still counts.
        self.learner_batches, self.weights_published = message[1], message[4]
      elif kind == 'learner_done':
        self.learner_batches, self.weights_published = message[1], message[2]

  def mean_return(self, last: int = 20) -> float:
    return float(np.mean(self.returns[-last:])) if self.returns else 0.0

  def watch(self) -> None:
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
    client = reverb.Client(self.address)
    previous = None
    deadline = self.start + self.args.minutes * 60
    while time.time() < deadline:
      time.sleep(1.0)
      self.drain_stats()
      dead = [p.name for p in self.actors + [self.learner] if not p.is_alive()]
      if dead:
        print(f'\n{", ".join(dead)} stopped unexpectedly; shutting down')
        self.failed = dead
        break
      info = client.server_info(timeout=10)[REPLAY]
      counts = (time.time(), info.rate_limiter_info.insert_stats.completed,
                info.rate_limiter_info.sample_stats.completed)
      if previous is not None:
        dt = counts[0] - previous[0]
        self.rates.append({
            'time': counts[0] - self.start,
            'inserts_per_s': (counts[1] - previous[1]) / dt,
            'samples_per_s': (counts[2] - previous[2]) / dt,
        })
        rate = self.rates[-1]
        print(f'\r[{counts[0] - self.start:5.0f}s] steps {self.env_steps:7d} '
              f'episodes {len(self.returns):5d} return(last 20) '
              f'{self.mean_return():6.1f} | inserts/s '
              f'{rate["inserts_per_s"]:6.0f} samples/s '
              f'{rate["samples_per_s"]:7.0f} | replay {info.current_size:6d} '
              f'| learner steps {self.learner_batches:6d}', end='', flush=True)
      previous = counts
      self.inserted, self.sampled = counts[1], counts[2]
      self.replay_size = info.current_size
      if (len(self.returns) >= 20 and
          self.mean_return() >= self.args.target_return):
        break
    print()

  # -- results ----------------------------------------------------------------

  def save_state(self) -> None:
    with open(self.state_path, 'w') as f:
      json.dump({'env_steps': self.env_steps, 'returns': self.returns,
                 'return_steps': self.return_steps,
                 'weights_loaded': self.weights_loaded}, f)

  def checkpoints(self) -> List[str]:
    if not os.path.isdir(self.checkpoint_dir):
      return []
    return sorted(os.path.join(self.checkpoint_dir, d)
                  for d in os.listdir(self.checkpoint_dir)
                  if os.path.exists(os.path.join(self.checkpoint_dir, d, 'DONE')))

  def plot(self, path: str) -> None:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7))
    returns = np.asarray(self.returns)
    if len(returns):
      window = min(20, len(returns))
      smooth = np.convolve(returns, np.ones(window) / window, mode='valid')
      top.plot(self.return_steps, returns, '.', alpha=0.3, label='episode return')
      top.plot(self.return_steps[window - 1:], smooth,
               label=f'mean of last {window}')
    top.axhline(RANDOM_POLICY_RETURN, color='grey', ls='--', label='random policy')
    top.set_xlabel('environment steps')
    top.set_ylabel('return')
    top.set_title('DQN on CartPole-v1 with tf_reverb')
    top.legend(loc='upper left')
    if self.rates:
      times = [r['time'] for r in self.rates]
      bottom.plot(times, [r['inserts_per_s'] for r in self.rates], label='inserts/s')
      bottom.plot(times, [r['samples_per_s'] for r in self.rates], label='samples/s')
    bottom.set_xlabel('seconds')
    bottom.set_ylabel('items per second')
    bottom.legend(loc='upper left')
    figure.tight_layout()
    figure.savefig(path, dpi=100)

  def report(self) -> Dict[str, Any]:
    elapsed = time.time() - self.start
    checkpoints = self.checkpoints()
    summary = {
        'elapsed_seconds': elapsed,
        'env_steps': self.env_steps,
        'episodes': len(self.returns),
        'mean_return_last_20': self.mean_return(),
        'best_mean_return_20': max(
            (float(np.mean(self.returns[i - 20:i]))
             for i in range(20, len(self.returns) + 1)), default=0.0),
        'random_policy_return': RANDOM_POLICY_RETURN,
        'items_inserted': getattr(self, 'inserted', 0),
        'samples_consumed': getattr(self, 'sampled', 0),
        'learner_steps': self.learner_batches,
        'priority_updates': self.learner_batches * self.config['batch_size'],
        'weights_published': self.weights_published,
        'weights_loaded': self.weights_loaded,
        'replay_size': getattr(self, 'replay_size', 0),
        'checkpoints': checkpoints,
        'failed_processes': self.failed,
        'plot': os.path.join(self.run_dir, 'learning_curve.png'),
    }
    with open(os.path.join(self.run_dir, 'summary.json'), 'w') as f:
      json.dump(summary, f, indent=2)
    self.plot(summary['plot'])
    print(
        f'\nIn {elapsed / 60:.1f} minutes, {self.args.actors} actors played '
        f'{summary["episodes"]} episodes ({self.env_steps} steps) and inserted '
        f'{summary["items_inserted"]} transitions into the reverb_server; the '
        f'learner consumed {summary["samples_consumed"]} samples in '
        f'{self.learner_batches} Keras training steps, updated '
        f'{summary["priority_updates"]} priorities and published its weights '
        f'{self.weights_published} times (actors loaded them '
        f'{self.weights_loaded} times). The mean return over the last 20 '
        f'episodes is {summary["mean_return_last_20"]:.1f} (random policy: '
        f'~{RANDOM_POLICY_RETURN:.0f}; best 20-episode mean '
        f'{summary["best_mean_return_20"]:.1f}). The replay table holds '
        f'{summary["replay_size"]} items; the latest checkpoint is '
        f'{checkpoints[-1] if checkpoints else "missing"}. Learning curve: '
        f'{summary["plot"]}')
    return summary


def parse_args() -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument('--quick', action='store_true',
                      help='a short run (under 3 minutes)')
  parser.add_argument('--resume', action='store_true',
                      help="continue from the run's last checkpoint")
  parser.add_argument('--minutes', type=float, default=None,
                      help='time budget (default 15, or 2.5 with --quick)')
  parser.add_argument('--target_return', type=float, default=None,
                      help='stop once the mean of the last 20 returns reaches '
                      'this (default 195, or 100 with --quick)')
  parser.add_argument('--epsilon_decay_steps', type=int, default=None)
  parser.add_argument('--checkpoint_interval', type=int, default=30)
  parser.add_argument('--run_dir', default='runs/dqn_cartpole')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  if args.minutes is None:
    args.minutes = 2.5 if args.quick else 15.0
  if args.target_return is None:
    args.target_return = 100.0 if args.quick else 195.0
  if args.epsilon_decay_steps is None:
    args.epsilon_decay_steps = 5_000 if args.quick else 10_000
  return args


def main() -> None:
  args = parse_args()
  run = Run(args)
  print(f'Run directory: {run.run_dir}')
  run.start_server()
  print(f'reverb_server listening at {run.address}; starting {args.actors} '
        'actors and the learner')
  run.start_workers()
  try:
    run.watch()
  except KeyboardInterrupt:
    print('\nInterrupted: stopping actors, learner and server')
  finally:
    run.stop()
    run.save_state()
  summary = run.report()
  sys.exit(1 if summary['failed_processes'] else 0)


if __name__ == '__main__':
  main()
