"""The JAX agent: no TensorFlow anywhere, and no library beyond JAX.

The actors run a jitted JAX Q-network ε-greedily and write every step with
the TrajectoryWriter (``writer_actor``); they load the learner's weights
(the flat format of ``common``) from the weights table. The learner reads
batches through ``tf_reverb.jax.ReplayIterator``, trains a double DQN with
a target network and a hand-written Adam in one jitted step, sets the
sampled items' priorities to their absolute TD errors with
``tf_reverb.jax.update_priorities`` and publishes its weights every
``publish_every`` batches. The parameters are a list of arrays in the
order of the flat format: kernel, bias, kernel, bias, ...
"""

import os

# Before JAX is imported: the CPU only (no probing for accelerators), and
# one thread per process (two cores serve four processes).
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault(
  'XLA_FLAGS',
  '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1',
)

import time  # pylint: disable=g-import-not-at-top,wrong-import-position
from typing import Any, Dict, List, Tuple  # pylint: disable=g-import-not-at-top,wrong-import-position

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from dqn import common  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn import writer_actor  # pylint: disable=g-import-not-at-top,wrong-import-position

Params = List[jax.Array]


def to_params(flat: np.ndarray) -> Params:
  return [jnp.asarray(p) for p in common.unflatten_parameters(flat)]


def to_flat(params: Params) -> np.ndarray:
  return common.flatten_parameters([np.asarray(p) for p in params])


def q_network(params: Params, observation: jax.Array) -> jax.Array:
  """The MLP of common.parameter_shapes: ReLU hidden layers, linear output."""
  x = observation
  for i in range(0, len(params) - 2, 2):
    x = jax.nn.relu(x @ params[i] + params[i + 1])
  return x @ params[-2] + params[-1]


class Policy:
  """The actors' Q-network (see writer_actor)."""

  def __init__(self, seed: int):
    self.params = to_params(
      common.flatten_parameters(common.initial_parameters(seed))
    )
    self._q_values = jax.jit(q_network)

  def set_weights(self, flat: np.ndarray) -> None:
    self.params = to_params(flat)

  def q_values(self, observation: np.ndarray) -> np.ndarray:
    return np.asarray(
      self._q_values(self.params, np.asarray(observation, np.float32))
    )


def actor_main(
  index: int, address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Runs episodes, writing each step with the TrajectoryWriter."""
  common.ignore_sigint()
  writer_actor.run_actor(
    index, address, config, stop, stats, Policy(config['seed'])
  )


# ---------------------------------------------------------------------------
# Learner.

AdamState = Tuple[jax.Array, Params, Params]  # step, first and second moments


def adam_init(params: Params) -> AdamState:
  zeros = [jnp.zeros_like(p) for p in params]
  return jnp.zeros([], jnp.int32), zeros, list(zeros)


def adam_update(
  params: Params,
  grads: Params,
  state: AdamState,
  learning_rate: float,
  beta1: float = 0.9,
  beta2: float = 0.999,
  epsilon: float = 1e-7,
) -> Tuple[Params, AdamState]:
  """One Adam step (Kingma & Ba, with Keras' epsilon)."""
  step, m, v = state
  step = step + 1
  m = [beta1 * a + (1 - beta1) * g for a, g in zip(m, grads)]
  v = [beta2 * a + (1 - beta2) * g * g for a, g in zip(v, grads)]
  scale = learning_rate * jnp.sqrt(1 - beta2**step) / (1 - beta1**step)
  params = [
    p - scale * a / (jnp.sqrt(b) + epsilon) for p, a, b in zip(params, m, v)
  ]
  return params, (step, m, v)


def huber(x: jax.Array) -> jax.Array:
  return jnp.where(jnp.abs(x) <= 1.0, 0.5 * x * x, jnp.abs(x) - 0.5)


def make_train_step(gamma: float, learning_rate: float):
  """The jitted double-DQN step: (params, target, adam, batch) -> updated."""

  def loss_fn(params, target_params, t):
    next_action = jnp.argmax(q_network(params, t['next_observation']), axis=1)
    next_q = jnp.take_along_axis(
      q_network(target_params, t['next_observation']),
      next_action[:, None],
      axis=1,
    )[:, 0]
    target = jax.lax.stop_gradient(t['reward'] + gamma * t['discount'] * next_q)
    q = jnp.take_along_axis(
      q_network(params, t['observation']),
      t['action'][:, None].astype(jnp.int32),
      axis=1,
    )[:, 0]
    td_error = target - q
    return jnp.mean(huber(td_error)), td_error

  @jax.jit
  def train_step(params, target_params, adam_state, t):
    (loss, td_error), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      params, target_params, t
    )
    params, adam_state = adam_update(params, grads, adam_state, learning_rate)
    return params, adam_state, loss, td_error

  return train_step


def learner_main(
  address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Trains from tf_reverb.jax.ReplayIterator; publishes weights."""
  common.ignore_sigint()
  # pylint: disable=g-import-not-at-top
  import tf_reverb as reverb

  from tf_reverb import jax as reverb_jax
  # pylint: enable=g-import-not-at-top

  params = to_params(
    common.flatten_parameters(common.initial_parameters(config['seed']))
  )
  weights_path = config['learner_weights']
  if config['resume'] and os.path.exists(weights_path):
    params = to_params(np.load(weights_path))
  target_params = list(params)
  adam_state = adam_init(params)
  train_step = make_train_step(config['discount'], config['learning_rate'])
  # On a sharded address (--ray) a priority update goes to every shard (a
  # key unknown to one is ignored); shard 0 carries the weights.
  priority_client = reverb.Client(address)
  weights_client = reverb.Client(config['weights_address'] or address)

  batches, version = 0, 0
  # As in the TensorFlow learner: sampling ends after rate_limiter_timeout_ms
  # without data and is restarted until the run stops, so a wait never ends
  # training and a learner waiting for data that will not come still stops.
  while not stop.is_set():
    with reverb_jax.ReplayIterator(
      address,
      common.REPLAY,
      config['batch_size'],
      max_in_flight_samples_per_worker=2 * config['batch_size'],
      num_workers_per_iterator=config['sampler_workers'],
      max_samples_per_stream=config['samples_per_stream'],
      rate_limiter_timeout_ms=common.STOP_POLL_MS,
      structure=common.transition_signature('jax'),
    ) as samples:
      for sample in samples:
        params, adam_state, loss, td_error = train_step(
          params, target_params, adam_state, sample.data
        )
        reverb_jax.update_priorities(
          priority_client,
          common.REPLAY,
          sample.info.key,
          jnp.abs(td_error) + 1e-3,
        )
        batches += 1
        if batches % config['target_update_every'] == 0:
          target_params = list(params)
        if batches % config['publish_every'] == 0:
          version += 1
          common.publish_weights(weights_client, version, to_flat(params))
        if batches % 50 == 0:
          stats.put(('learner', batches, float(loss), time.time(), version))
        if stop.is_set():
          break
  np.save(weights_path, to_flat(params))
  stats.put(('learner_done', batches, version, time.time()))
