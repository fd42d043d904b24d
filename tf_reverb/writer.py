"""The legacy step-oriented ``Writer`` (``Client.writer``, docs/concepts/writers-and-patterns.md).

Built on the C++ TrajectoryWriter: every flattened column of the steps is
chunked `chunk_length` steps at a time, and ``create_item`` makes an item over
the last `num_timesteps` steps of every column (all columns unsqueezed, so
sampled columns have a leading time dimension). Items referencing a chunk that
is still open are held until it completes, ``flush`` or ``close``. At most
`max_in_flight_items` items are pending (queued or unconfirmed); more block.
The references of the last `max_sequence_length` steps stay in C++
(``pybind.StepHistory``): appending and creating items make no Python object
per cell.
"""

import logging
import math
from typing import Any, Optional

import tree

from tf_reverb import _dtypes
from tf_reverb import _options
from tf_reverb import pybind

__all__ = ['Writer']


class Writer:
  """Writes timesteps and creates items over the most recent ones.

  Use ``Client.writer`` to create one.
  """

  def __init__(self, cpp_writer: Any, max_sequence_length: int):
    """Wraps a ``pybind.TrajectoryWriter`` (use Client.writer)."""
    self._writer = cpp_writer
    self._max_sequence_length = max_sequence_length
    self._steps = pybind.StepHistory(max_sequence_length)
    self._num_columns: Optional[int] = None
    self._closed = False

  def __enter__(self) -> 'Writer':
    if self._closed:
      raise ValueError('Cannot reuse already closed Writer')
    return self

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    if not self._closed:
      self.close()

  def __del__(self):
    if not getattr(self, '_closed', True):
      logging.warning('Writer deleted without calling .close(); closing it.')
      try:
        self.close()
      except Exception:  # pylint: disable=broad-except
        logging.exception('Closing the Writer failed.')

  def __repr__(self) -> str:
    return (
      f'Writer(max_sequence_length={self._max_sequence_length}, '
      f'buffered_steps={len(self._steps)}, closed={self._closed})'
    )

  def _check_open(self) -> None:
    if self._closed:
      raise RuntimeError('Writer has been closed.')

  def append(self, data: Any) -> None:
    """Appends one timestep (a nest of arrays, scalars or eager tensors).

    Raises:
      ValueError: if the number of leaves differs from the first timestep's,
        or a leaf's dtype/shape differs from earlier values of its column.
    """
    self._check_open()
    flat = tree.flatten(data)
    if self._num_columns is None:
      self._num_columns = len(flat)
    elif len(flat) != self._num_columns:
      raise ValueError(
        'Number of tensors per timestep was inconsistent. Previously '
        f'received {self._num_columns} tensors but got {len(flat)} now.'
      )
    # Converted in C++ (other than numpy values and numbers through
    # _dtypes.to_core_tensor, naming the column index in errors).
    self._steps.append(self._writer, flat)

  def append_sequence(self, sequence: Any) -> None:
    """Appends `T` timesteps given as a nest of arrays with leading dim `T`.

    Raises:
      ValueError: if a leaf has rank 0 or the leading dims differ.
    """
    self._check_open()
    flat = [_dtypes.to_numpy(x) for x in tree.flatten(sequence)]
    if not flat:
      raise ValueError('append_sequence needs at least one tensor.')
    lengths = set()
    for value in flat:
      if value.ndim < 1:
        raise ValueError(
          'append_sequence requires tensors of rank >= 1, got a scalar.'
        )
      lengths.add(value.shape[0])
    if len(lengths) != 1:
      raise ValueError(
        'append_sequence requires all tensors to have the same leading '
        f'dimension, got {sorted(lengths)}.'
      )
    structure = tree.unflatten_as(sequence, flat)
    for t in range(lengths.pop()):
      self.append(tree.map_structure(lambda x, t=t: x[t], structure))

  def create_item(
    self,
    table: str,
    num_timesteps: int,
    priority: float,
    *,
    policy_version: Optional[int] = None,
  ) -> None:
    """Creates an item of `table` over the last `num_timesteps` timesteps.

    Args:
      table: the table to insert into.
      num_timesteps: how many of the last timesteps the item spans.
      priority: the item's priority.
      policy_version: the version of the policy that produced the item (a
        tf_reverb extension, see ``Client.set_policy_version``); None: the
        table's current version when the item is inserted.

    Raises:
      TypeError: if policy_version is not an int.
      ValueError: if num_timesteps < 1, exceeds the buffered timesteps or
        max_sequence_length, the priority is NaN, the table is unknown or the
        data does not match its signature.
    """
    self._check_open()
    if num_timesteps < 1:
      raise ValueError(
        f'num_timesteps ({num_timesteps}) must be a positive integer'
      )
    if num_timesteps > self._max_sequence_length:
      raise ValueError(
        f'num_timesteps ({num_timesteps}) must be <= max_sequence_length '
        f'({self._max_sequence_length})'
      )
    if num_timesteps > len(self._steps):
      raise ValueError(
        'Argument `num_timesteps` is larger than number of buffered timesteps.'
      )
    if math.isnan(priority):
      raise ValueError('Priority must not be NaN.')
    self._steps.create_item(
      self._writer,
      table,
      float(priority),
      num_timesteps,
      _options.validate_policy_version(policy_version),
    )

  def flush(self) -> None:
    """Sends every pending item and waits until the server confirmed them."""
    self._check_open()
    self._writer.flush(0, -1)

  def close(self, retry_on_unavailable: bool = True) -> None:
    """Flushes pending items and closes the stream.

    Args:
      retry_on_unavailable: accepted for compatibility; the writer always
        reconnects and resends after UNAVAILABLE.

    Raises:
      ValueError: if called twice.
    """
    del retry_on_unavailable
    if self._closed:
      raise ValueError('close() has already been called on Writer.')
    self._closed = True
    try:
      self._writer.flush(0, -1)
    finally:
      self._writer.close()


def new_cpp_writer(
  client: Any,
  *,
  num_keep_alive_refs: int,
  max_chunk_length: int,
  delta_encoded: bool,
  max_queued_items: int,
  signatures: Any,
  accept_step_shape_signatures: bool,
) -> pybind.TrajectoryWriter:
  """A ``pybind.TrajectoryWriter`` over the C++ client `client`."""
  return pybind.TrajectoryWriter(
    client,
    num_keep_alive_refs=num_keep_alive_refs,
    max_chunk_length=max_chunk_length,
    delta_encoded=delta_encoded,
    max_queued_items=max_queued_items,
    signatures=signatures,
    accept_step_shape_signatures=accept_step_shape_signatures,
  )
