"""A PyTorch training loop fed by tf_reverb.NumpyIterator (no TensorFlow).

An in-process replay server holds transitions (obs, action, reward,
next_obs) of a toy environment; a NumpyIterator samples batches of 64 with
C++ threads (prefetching while the GPU/CPU trains) and the learner runs
DQN-style TD regression steps on a small MLP, updating priorities as it
goes. Needs PyTorch (``pip install torch``; not a tf_reverb requirement):

  python examples/torch_training_step.py [--steps 200]
"""

import argparse
import sys
import time

import numpy as np
import torch

import tf_reverb as reverb

OBS, ACTIONS, GAMMA = 8, 4, 0.9


def fill(client: reverb.Client, n: int, rng: np.random.Generator) -> None:
  """Inserts n random transitions of a linear toy environment."""
  for _ in range(n):
    obs = rng.normal(size=OBS).astype(np.float32)
    action = np.int64(rng.integers(ACTIONS))
    reward = np.float32(obs[action])  # the best action is the largest feature
    next_obs = rng.normal(size=OBS).astype(np.float32)
    client.insert(
      {'obs': obs, 'action': action, 'reward': reward, 'next_obs': next_obs},
      {'replay': 1.0},
    )


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument('--steps', type=int, default=200)
  parser.add_argument('--batch_size', type=int, default=64)
  args = parser.parse_args()

  server = reverb.Server(
    [
      reverb.Table(
        'replay',
        reverb.selectors.Prioritized(0.6),
        reverb.selectors.Fifo(),
        max_size=10_000,
        rate_limiter=reverb.rate_limiters.MinSize(100),
      )
    ]
  )
  address = f'localhost:{server.port}'
  client = reverb.Client(address)
  fill(client, 2000, np.random.default_rng(0))

  model = torch.nn.Sequential(
    torch.nn.Linear(OBS, 64), torch.nn.ReLU(), torch.nn.Linear(64, ACTIONS)
  )
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
  # Column order is dm-tree's (sorted keys); `structure` names them again.
  structure = {'action': None, 'next_obs': None, 'obs': None, 'reward': None}
  iterator = reverb.NumpyIterator(
    address,
    'replay',
    batch_size=args.batch_size,
    max_in_flight_samples_per_worker=2 * args.batch_size,
    max_samples=args.steps * args.batch_size,
    structure=structure,
  )

  start = time.monotonic()
  for step, batch in enumerate(iterator):
    # Each column is one contiguous array [batch, 1, ...] (Client.insert items
    # have one timestep); torch.from_numpy shares the memory.
    data = {k: torch.from_numpy(v[:, 0]) for k, v in batch.data.items()}
    q = model(data['obs']).gather(1, data['action'][:, None])[:, 0]
    with torch.no_grad():
      target = data['reward'] + GAMMA * model(data['next_obs']).max(1).values
    td_error = target - q
    loss = (td_error**2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # Prioritized replay: new priorities from the TD errors.
    client.mutate_priorities(
      'replay',
      updates=dict(
        zip(
          batch.info.key.tolist(),
          (td_error.abs().detach().numpy() + 1e-3).tolist(),
        )
      ),
    )
    if step % 50 == 0:
      print(f'step {step:4d}  loss {loss.item():.4f}')
  elapsed = time.monotonic() - start
  print(
    f'{args.steps} steps of {args.batch_size} in {elapsed:.2f}s '
    f'({args.steps * args.batch_size / elapsed:,.0f} samples/s)'
  )
  server.stop()


if __name__ == '__main__':
  sys.exit(main())
