"""dm-reverb 0.14 clients writing into tf_reverb tables with signatures.

Run with the Python of a venv holding dm-reverb (TF 2.15, Python 3.11):

  /path/to/dm-venv/bin/python tests/interop/dm_reverb_signature_client.py HOST:PORT

The server must host 'steps' with signature {'obs': float32[2],
'step': int32[]} and 'traj' with {'obs': float32[3, 2], 'step': int32[]}
(FIFO, MinSize(1)). Every legitimate item of dm-reverb's writers must be
accepted by the server's signature check; an item dm-reverb does not check
(validate_items=False) must be rejected by the server. Prints 'ALL OK'.
"""

import sys

import numpy as np
import reverb


def _step(i):
  return {'obs': np.full((2,), i, np.float32), 'step': np.int32(i)}


def main(address: str) -> None:
  client = reverb.Client(address)

  # Client.insert and the legacy Writer: [1, *step] and [3, *step] items
  # against step-shaped signatures.
  client.insert(_step(0), priorities={'steps': 1.0})
  with client.writer(max_sequence_length=3) as writer:
    for i in range(3):
      writer.append(_step(i))
    writer.create_item('steps', num_timesteps=3, priority=1.0)
    writer.create_item('steps', num_timesteps=1, priority=1.0)

  # TrajectoryWriter: a [3, 2] obs and a squeezed step.
  with client.trajectory_writer(num_keep_alive_refs=3) as writer:
    for i in range(3):
      writer.append(_step(i))
    writer.create_item(
      'traj',
      priority=1.0,
      trajectory={
        'obs': writer.history['obs'][-3:],
        'step': writer.history['step'][-1],
      },
    )
  info = client.server_info()
  assert info['steps'].current_size == 3, info['steps']
  assert info['traj'].current_size == 1, info['traj']
  print('legitimate items ok')

  # Unchecked by dm-reverb, rejected by the server: a 2-row obs.
  writer = client.trajectory_writer(num_keep_alive_refs=3, validate_items=False)
  for i in range(2):
    writer.append(_step(i))
  writer.create_item(
    'traj',
    priority=1.0,
    trajectory={
      'obs': writer.history['obs'][-2:],
      'step': writer.history['step'][-1],
    },
  )
  try:
    writer.flush()
    raise AssertionError('the server accepted a [2, 2] obs')
  except (RuntimeError, ValueError) as e:
    assert 'inconsistent with the table signature' in str(e), e
    assert "('obs',)" in str(e), e
  writer.close()
  assert client.server_info()['traj'].current_size == 1
  print('server-side rejection ok')
  print('ALL OK')


if __name__ == '__main__':
  main(sys.argv[1])
