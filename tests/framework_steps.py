"""Helpers shared by tests/test_torch_dataset.py and tests/test_jax_iterator.py:
a table filled with numbered items, and one step of framework tensors
through every writer, read back as numpy (the writers must take
``torch.Tensor`` and ``jax.Array`` leaves as they take numpy arrays).
"""

from typing import Any, Dict

import numpy as np

import tf_reverb as reverb
from tf_reverb import structured_writer as structured


def address(server: reverb.Server) -> str:
  """The loopback address of an in-process server."""
  return f'localhost:{server.port}'


def fill(
  server: reverb.Server, table: str, n: int, action_dtype: Any
) -> reverb.Client:
  """Items i = 0..n-1 of `table`: obs float32 [3] of i and action i of
  `action_dtype` (squeezed columns). Returns the client that wrote them."""
  client = reverb.Client(address(server))
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i in range(n):
      writer.append(
        {'obs': np.full([3], i, np.float32), 'action': action_dtype(i)}
      )
      writer.create_item(
        table,
        1.0,
        {
          'obs': writer.history['obs'][-1],
          'action': writer.history['action'][-1],
        },
      )
  return client


# Every way of writing an item: TrajectoryWriter, the legacy Writer, the
# StructuredWriter and Client.insert.
WRITERS = ('trajectory_writer', 'writer', 'structured_writer', 'insert')


def write_one_item(
  client: reverb.Client, table: str, kind: str, step: Dict[str, Any]
) -> None:
  """Writes `step` (a flat dict) as one item of `table` with writer `kind`."""
  keys = sorted(step)
  if kind == 'trajectory_writer':
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      writer.append(step)
      writer.create_item(
        table, 1.0, {key: writer.history[key][-1] for key in keys}
      )
  elif kind == 'writer':
    with client.writer(max_sequence_length=1) as writer:
      writer.append(step)
      writer.create_item(table, num_timesteps=1, priority=1.0)
  elif kind == 'structured_writer':
    pattern = structured.pattern_from_transform(
      step, lambda s: {key: s[key][-1] for key in keys}
    )
    writer = client.structured_writer(
      [structured.create_config(pattern, table)]
    )
    writer.append(step)
    writer.flush()
  elif kind == 'insert':
    client.insert(step, {table: 1.0})
  else:
    raise ValueError(f'unknown writer {kind}')


def round_trip(
  client: reverb.Client, table: str, kind: str, step: Dict[str, Any]
) -> Dict[str, np.ndarray]:
  """Writes `step` with `kind` into the queue `table` and samples it back:
  key -> the column's value with the shape of the step's leaf."""
  write_one_item(client, table, kind, step)
  sample = next(client.sample(table, emit_timesteps=False, timeout=30))
  values = {}
  for key, column in zip(sorted(step), sample.data):
    column = np.asarray(column)
    # Client.insert and the legacy Writer give a time dimension of 1.
    values[key] = (
      column.reshape(column.shape[1:])
      if kind
      in (
        'insert',
        'writer',
      )
      else column
    )
  return values
