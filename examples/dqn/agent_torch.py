"""The PyTorch agent: no TensorFlow anywhere.

The actors run a PyTorch Q-network ε-greedily and write every step with the
TrajectoryWriter (``writer_actor``); they load the learner's weights (the
flat format of ``common``) from the weights table. The learner reads
batches through ``tf_reverb.torch.ReplayDataset`` in a ``DataLoader``,
trains a double DQN with a target network and Adam, sets the sampled
items' priorities to their absolute TD errors with
``tf_reverb.torch.update_priorities`` and publishes its weights every
``publish_every`` batches.
"""

import os
import time
from typing import Any, Dict

import numpy as np
import torch

from dqn import common
from dqn import writer_actor


class QNetwork(torch.nn.Module):
  """The MLP of common.parameter_shapes, readable as the flat format."""

  def __init__(self, seed: int):
    super().__init__()
    sizes = (common.OBSERVATION_SIZE, *common.HIDDEN_SIZES, common.NUM_ACTIONS)
    self.layers = torch.nn.ModuleList(
      torch.nn.Linear(inputs, outputs)
      for inputs, outputs in zip(sizes[:-1], sizes[1:])
    )
    self.set_flat(common.flatten_parameters(common.initial_parameters(seed)))

  def forward(self, observation: torch.Tensor) -> torch.Tensor:
    x = observation
    for layer in self.layers[:-1]:
      x = torch.relu(layer(x))
    return self.layers[-1](x)

  def flat(self) -> np.ndarray:
    """The parameters in the flat format (kernels [inputs, outputs])."""
    parameters = []
    for layer in self.layers:
      parameters += [
        layer.weight.detach().T.numpy(),
        layer.bias.detach().numpy(),
      ]
    return common.flatten_parameters(parameters)

  def set_flat(self, flat: np.ndarray) -> None:
    parameters = common.unflatten_parameters(flat)
    with torch.no_grad():
      for i, layer in enumerate(self.layers):
        kernel, bias = parameters[2 * i], parameters[2 * i + 1]
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
        layer.bias.copy_(torch.from_numpy(np.array(bias)))


def limit_threads() -> None:
  """Two cores serve four processes: one PyTorch thread each."""
  torch.set_num_threads(1)
  torch.set_num_interop_threads(1)


class Policy:
  """The actors' Q-network (see writer_actor)."""

  def __init__(self, seed: int):
    self.network = QNetwork(seed)

  def set_weights(self, flat: np.ndarray) -> None:
    self.network.set_flat(flat)

  def q_values(self, observation: np.ndarray) -> np.ndarray:
    with torch.no_grad():
      observation = torch.as_tensor(observation, dtype=torch.float32)
      return self.network(observation).numpy()


def actor_main(
  index: int, address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Runs episodes, writing each step with the TrajectoryWriter."""
  common.ignore_sigint()
  limit_threads()
  writer_actor.run_actor(
    index, address, config, stop, stats, Policy(config['seed'])
  )


def learner_main(
  address: str, config: Dict[str, Any], stop: Any, stats: Any
) -> None:
  """Trains from tf_reverb.torch.ReplayDataset; publishes weights."""
  common.ignore_sigint()
  limit_threads()
  # pylint: disable=g-import-not-at-top
  import tf_reverb as reverb

  from tf_reverb import torch as reverb_torch
  # pylint: enable=g-import-not-at-top

  gamma = config['discount']
  q_network = QNetwork(config['seed'])
  weights_path = config['learner_weights']
  if config['resume'] and os.path.exists(weights_path):
    q_network.set_flat(np.load(weights_path))
  target_network = QNetwork(config['seed'])
  target_network.set_flat(q_network.flat())
  optimizer = torch.optim.Adam(
    q_network.parameters(), lr=config['learning_rate'], eps=1e-7
  )
  # On a sharded address (--ray) a priority update goes to every shard (a
  # key unknown to one is ignored); shard 0 carries the weights.
  priority_client = reverb.Client(address)
  weights_client = reverb.Client(config['weights_address'] or address)

  def train_step(t: Dict[str, torch.Tensor]):
    """Double DQN: the online network picks, the target network values."""
    with torch.no_grad():
      next_action = q_network(t['next_observation']).argmax(1, keepdim=True)
      next_q = target_network(t['next_observation']).gather(1, next_action)
      target = t['reward'] + gamma * t['discount'] * next_q[:, 0]
    q = q_network(t['observation']).gather(1, t['action'][:, None])[:, 0]
    loss = torch.nn.functional.huber_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss.detach()), (target - q).detach()

  # As in the TensorFlow learner: sampling ends after rate_limiter_timeout_ms
  # without data and is restarted until the run stops, so a wait never ends
  # training and a learner waiting for data that will not come still stops.
  dataset = reverb_torch.ReplayDataset(
    address,
    common.REPLAY,
    config['batch_size'],
    max_in_flight_samples_per_worker=2 * config['batch_size'],
    num_workers_per_iterator=config['sampler_workers'],
    max_samples_per_stream=config['samples_per_stream'],
    rate_limiter_timeout_ms=common.STOP_POLL_MS,
    structure=common.transition_signature('torch'),
  )
  # The dataset batches itself (batch_size=None); it prefetches in C++.
  loader = torch.utils.data.DataLoader(dataset, batch_size=None)
  batches, version = 0, 0
  while not stop.is_set():
    for sample in loader:
      loss, td_error = train_step(sample.data)
      reverb_torch.update_priorities(
        priority_client, common.REPLAY, sample.info.key, td_error.abs() + 1e-3
      )
      batches += 1
      if batches % config['target_update_every'] == 0:
        target_network.load_state_dict(q_network.state_dict())
      if batches % config['publish_every'] == 0:
        version += 1
        common.publish_weights(weights_client, version, q_network.flat())
      if batches % 50 == 0:
        stats.put(('learner', batches, loss, time.time(), version))
      if stop.is_set():
        break
  np.save(weights_path, q_network.flat())
  stats.put(('learner_done', batches, version, time.time()))
