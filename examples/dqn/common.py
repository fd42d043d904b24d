"""What every process of the main job shares, whatever the framework.

Table names and sizes, the replay table's signature, the deadlines, the
weights format of the PyTorch and JAX agents and the worker entry point.
Imports neither TensorFlow nor PyTorch nor JAX.
"""

import importlib
import signal
import sys
from typing import Any, Dict, List, Tuple

import numpy as np

REPLAY = 'replay'
WEIGHTS = 'weights'
OBSERVATION_SIZE = 4
NUM_ACTIONS = 2
HIDDEN_SIZES = (64, 64)
RANDOM_POLICY_RETURN = 22.0  # mean CartPole-v1 return of a random policy
# Deadline of calls that must succeed (a local server answering): only a hung
# server reaches it, however busy the machine.
RPC_TIMEOUT_S = 120.0
# How long stopping waits for a process to exit before it is killed.
PROCESS_EXIT_TIMEOUT_S = 120.0
# How long the learner's sampling waits for data before it checks whether the
# run is stopping (it then resumes sampling); not a deadline on anything.
STOP_POLL_MS = 2000

# The agent module of each --framework.
AGENTS = {
  'tensorflow': 'dqn.agent_tf',
  'torch': 'dqn.agent_torch',
  'jax': 'dqn.agent_jax',
}
# The file in the run directory that the learner saves its weights to.
LEARNER_WEIGHTS_FILE = {
  'tensorflow': 'learner.weights.h5',  # Keras' save_weights
  'torch': 'learner.weights.npy',  # the flat format below
  'jax': 'learner.weights.npy',
}


def transition_signature(framework: str) -> Dict[str, Any]:
  """The replay table's signature: one transition per item.

  The TensorFlow actors insert with ``TFClient.insert``, which writes one
  step per item, so every column carries a leading time dimension of 1. The
  PyTorch and JAX actors create items with the TrajectoryWriter over single
  steps of its history (squeezed: no time dimension). Built with
  ``tf_reverb.tensor_spec`` so that the orchestrator needs no TensorFlow.
  """
  from tf_reverb.tensor_spec import TensorSpec  # pylint: disable=g-import-not-at-top

  time = (1,) if framework == 'tensorflow' else ()
  return {
    'observation': TensorSpec(time + (OBSERVATION_SIZE,), np.float32),
    'action': TensorSpec(time, np.int64),
    'reward': TensorSpec(time, np.float32),
    'discount': TensorSpec(time, np.float32),
    'next_observation': TensorSpec(time + (OBSERVATION_SIZE,), np.float32),
  }


def epsilon(steps: int, config: Dict[str, Any]) -> float:
  """ε of the ε-greedy actors: falls linearly from 1 to final_epsilon."""
  fraction = min(1.0, steps / config['epsilon_decay_steps'])
  return 1.0 + fraction * (config['final_epsilon'] - 1.0)


def ignore_sigint() -> None:
  """Children leave Ctrl-C to the orchestrator, which stops them in order."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_worker(name: str, framework: str, function: str, *args: Any) -> None:
  """Runs ``<the framework's agent module>.<function>(*args)``.

  The entry point of the actor and learner processes: the agent module (and
  with it the framework) is imported in the worker only, never in the
  orchestrator. When the function returns, the worker reports whether
  TensorFlow was imported in it on the stats queue (the last argument).
  """
  getattr(importlib.import_module(AGENTS[framework]), function)(*args)
  args[-1].put(('modules', name, 'tensorflow' in sys.modules))


# ---------------------------------------------------------------------------
# The weights format of the PyTorch and JAX agents.
#
# The Q-network is an MLP of OBSERVATION_SIZE -> HIDDEN_SIZES -> NUM_ACTIONS
# with ReLUs. Its parameters travel as ONE float32 vector: for each layer
# its kernel, shaped [inputs, outputs] (Keras' layout, row-major), then its
# bias. Each publish inserts the item {'version': int64, 'weights':
# float32[n]} into the weights table with Client.insert; any framework
# reads it back with numpy.


def parameter_shapes() -> List[Tuple[int, ...]]:
  """The shapes of the parameters, in the order of the flat vector."""
  sizes = (OBSERVATION_SIZE, *HIDDEN_SIZES, NUM_ACTIONS)
  shapes = []
  for inputs, outputs in zip(sizes[:-1], sizes[1:]):
    shapes += [(inputs, outputs), (outputs,)]
  return shapes


def initial_parameters(seed: int) -> List[np.ndarray]:
  """Keras' initialization: Glorot-uniform kernels, zero biases."""
  rng = np.random.default_rng(seed)
  parameters = []
  for shape in parameter_shapes():
    if len(shape) == 2:
      limit = np.sqrt(6.0 / (shape[0] + shape[1]))
      parameters.append(rng.uniform(-limit, limit, shape).astype(np.float32))
    else:
      parameters.append(np.zeros(shape, np.float32))
  return parameters


def flatten_parameters(parameters: List[np.ndarray]) -> np.ndarray:
  """The flat float32 vector of `parameters` (in parameter_shapes' order)."""
  shapes = parameter_shapes()
  if [tuple(p.shape) for p in parameters] != shapes:
    raise ValueError(
      f'parameters of shapes {[tuple(p.shape) for p in parameters]}, '
      f'expected {shapes}'
    )
  return np.concatenate(
    [np.asarray(p, np.float32).reshape(-1) for p in parameters]
  )


def unflatten_parameters(flat: np.ndarray) -> List[np.ndarray]:
  """The parameters packed in `flat` (views into it)."""
  shapes = parameter_shapes()
  sizes = [int(np.prod(s)) for s in shapes]
  if flat.shape != (sum(sizes),):
    raise ValueError(
      f'a weights vector of shape {flat.shape}, expected ({sum(sizes)},)'
    )
  offsets = np.cumsum([0] + sizes)
  return [
    flat[start:end].reshape(shape)
    for start, end, shape in zip(offsets[:-1], offsets[1:], shapes)
  ]


def publish_weights(client: Any, version: int, flat: np.ndarray) -> None:
  """Inserts version `version` of the flat weights into the weights table."""
  client.insert(
    {'version': np.int64(version), 'weights': flat.astype(np.float32)},
    {WEIGHTS: 1.0},
  )


def latest_weights(client: Any) -> Tuple[int, np.ndarray]:
  """The newest published (version, flat weights)."""
  sample = next(
    client.sample(
      WEIGHTS, num_samples=1, emit_timesteps=False, timeout=RPC_TIMEOUT_S
    )
  )
  # Flattened {'version', 'weights'} (sorted keys); Client.insert items have
  # a leading dimension of 1.
  version, weights = sample.data
  return int(version[0]), weights[0]
