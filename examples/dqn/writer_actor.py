"""The actor loop of the PyTorch and JAX agents: TrajectoryWriter inserts.

An actor plays CartPole-v1 ε-greedily with its framework's Q-network (a
``Policy``: ``set_weights(flat)`` and ``q_values(observation)``) and writes
each step with ``Client.trajectory_writer``: the step ``{observation,
action, reward, discount}`` is appended once, and the item of transition t
references step t and the observation of step t+1, so consecutive items
share their observations instead of sending them twice. The last step of an
episode is padded (action 0, reward 0, discount 0, as Acme's adders do) to
carry the final observation. Imports no framework: the agent passes its
policy.
"""

import time
from typing import Any, Dict

import numpy as np

from dqn import common

# Items an actor may have queued or unconfirmed at the server: its writes
# follow the replay table's rate limiter within a few steps, as the
# TensorFlow actors' one insert at a time does.
MAX_PENDING_ITEMS = 4


class Stopped(Exception):
  """The run is stopping: the actor inserts nothing more."""


def _flush(writer: Any, stop: Any, pending: int) -> None:
  """writer.flush(pending), rechecking the stop event while it waits.

  The rate limiter holds inserts while the learner is behind; once the run
  stops, nothing may sample any more, so the wait is given up.
  """
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

  while True:
    try:
      writer.flush(pending, timeout_ms=common.STOP_POLL_MS)
      return
    except reverb.errors.DeadlineExceededError:
      if stop.is_set():
        raise Stopped() from None


def run_actor(
  index: int,
  address: str,
  config: Dict[str, Any],
  stop: Any,
  stats: Any,
  policy: Any,
) -> None:
  """Runs episodes until `stop` is set; reports each on `stats`."""
  # pylint: disable=g-import-not-at-top
  import gymnasium as gym
  import tf_reverb as reverb
  # pylint: enable=g-import-not-at-top

  env = gym.make('CartPole-v1')
  client = reverb.Client(address)
  weights_client = reverb.Client(config['weights_address'] or address)
  # Two steps kept: an item references the previous step and this one.
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  published = False

  def load_weights() -> bool:
    # As the TensorFlow actor: asks whether the learner published yet
    # instead of sampling with a short timeout (which also fires on a busy
    # machine when weights exist).
    nonlocal published
    if not published:
      info = weights_client.server_info(timeout=common.RPC_TIMEOUT_S)
      published = info[common.WEIGHTS].current_size > 0
      if not published:
        return False
    _, flat = common.latest_weights(weights_client)
    policy.set_weights(flat)
    return True

  def append(observation, action, reward, discount) -> None:
    writer.append(
      {
        'observation': np.asarray(observation, np.float32),
        'action': np.int64(action),
        'reward': np.float32(reward),
        'discount': np.float32(discount),
      }
    )
    if writer.episode_steps < 2:
      return
    # The transition of the previous step: its data and this observation.
    history = writer.history
    writer.create_item(
      common.REPLAY,
      priority=1.0,
      trajectory={
        'observation': history['observation'][-2],
        'action': history['action'][-2],
        'reward': history['reward'][-2],
        'discount': history['discount'][-2],
        'next_observation': history['observation'][-1],
      },
    )
    _flush(writer, stop, MAX_PENDING_ITEMS)

  steps = config['initial_steps'] // config['num_actors']
  rng = np.random.default_rng(config['seed'] + index)
  episode = 0
  try:
    while not stop.is_set():
      loaded = load_weights()
      observation, _ = env.reset(seed=int(rng.integers(1 << 31)))
      episode_return, done = 0.0, False
      while not done and not stop.is_set():
        eps = common.epsilon(steps, config)
        if rng.random() < eps:
          action = int(rng.integers(common.NUM_ACTIONS))
        else:
          action = int(np.argmax(policy.q_values(observation)))
        next_observation, reward, terminated, truncated, _ = env.step(action)
        append(observation, action, reward, 0.0 if terminated else 1.0)
        observation = next_observation
        episode_return += reward
        steps += 1
        done = terminated or truncated
      if done:
        # The final observation, in a padding step, completes the last item.
        append(observation, 0, 0.0, 0.0)
        _flush(writer, stop, 0)
        writer.end_episode(timeout_ms=common.RPC_TIMEOUT_S * 1000)
        episode += 1
        stats.put(
          ('episode', index, episode_return, steps, eps, loaded, time.time())
        )
  except Stopped:
    pass
  except (RuntimeError, reverb.ReverbError):  # transport errors, deadlines
    if not stop.is_set():
      raise
    # else the server is shutting down
  writer.close()  # without flushing: the run is stopping
  stats.put(('actor_stopped', index))
