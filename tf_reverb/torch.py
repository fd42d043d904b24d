"""``tf_reverb.torch``: replay batches as PyTorch tensors, without TensorFlow.

``ReplayDataset`` is a ``torch.utils.data.IterableDataset`` over a table:
the C++ sampler of ``NumpyIterator`` samples and batches, and every numeric
column becomes a ``torch.Tensor`` over the sampler's own buffer
(``torch.from_numpy``: no copy). It works with ``DataLoader(dataset,
batch_size=None)``; with ``num_workers > 0`` every worker samples its own
share. ``update_priorities`` sends new priorities given as tensors.

This module imports PyTorch (``pip install tf_reverb[torch]``); ``import
tf_reverb`` alone does not, and neither imports TensorFlow.

Representation of a batch (``ReplaySample(info=SampleInfo(...), data=...)``):

- ``info.key`` is a ``torch.uint64`` tensor ``[batch]``: lossless, and
  enough for indexing, comparison, ``cat``/``stack``, ``tolist()`` and
  ``update_priorities``; where an operation lacks uint64 support,
  ``key.view(torch.int64)`` reinterprets the bits (also lossless, and
  accepted by ``update_priorities`` as it is).
- ``probability`` and ``priority`` are float64, ``table_size`` int64,
  ``times_sampled`` int32, every ``[batch]``.
- numeric columns are tensors ``[batch, *column_shape]`` of the column's
  dtype; string columns stay NumPy object arrays of ``bytes`` (PyTorch has
  no string tensors).
"""

import os
import threading
import warnings
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

from tf_reverb import _dtypes
from tf_reverb import _options
from tf_reverb import client as reverb_client
from tf_reverb import numpy_iterator
from tf_reverb import replay_sample

__all__ = ['ReplayDataset', 'update_priorities']

# The process that imported this module: a DataLoader worker with another
# pid was forked from it (spawned workers import the module anew).
_IMPORT_PID = os.getpid()

_warned_lock = threading.Lock()
_warned = set()


def _warn_once(key: str, message: str) -> None:
  with _warned_lock:
    if key in _warned:
      return
    _warned.add(key)
  warnings.warn(message, UserWarning, stacklevel=3)


def _accelerator_available() -> bool:
  accelerator = getattr(torch, 'accelerator', None)
  if accelerator is not None and hasattr(accelerator, 'is_available'):
    return bool(accelerator.is_available())
  return bool(torch.cuda.is_available())


def _share(max_samples: int, worker: int, num_workers: int) -> int:
  """Worker `worker`'s part of `max_samples` (-1: unlimited); the parts of
  all workers add up to `max_samples` exactly."""
  if max_samples == -1:
    return -1
  return max_samples // num_workers + (
    1 if worker < max_samples % num_workers else 0
  )


def _to_tensor(array: Any) -> Any:
  """A numeric numpy array as a tensor over the same memory; others as is."""
  if isinstance(array, np.ndarray) and array.dtype.kind not in 'OSU':
    return torch.from_numpy(array)
  return array


class ReplayDataset(torch.utils.data.IterableDataset):
  """A table's batches as ``ReplaySample``s of ``torch.Tensor``s.

  Batching happens in C++, so use it with ``DataLoader(dataset,
  batch_size=None)`` or iterate it directly. Every ``iter()`` starts its
  own sampler. Under a ``DataLoader`` with ``num_workers > 0`` each worker
  samples independently and ``max_samples`` is split exactly over the
  workers (their counts add up to it; no ``worker_init_fn`` needed). The
  workers must be started with ``multiprocessing_context='spawn'`` (or
  ``'forkserver'``): gRPC does not survive ``fork``, so a forked worker
  raises RuntimeError rather than hang. Two workers can sample the same
  item, as two learners can; a table whose items are sampled once (a
  queue, or ``max_times_sampled=1``) gives every item to one worker only.

  Tensors are made with ``torch.from_numpy`` and share the sampler's
  buffers, which are theirs alone (no copy). See the module docstring for
  the dtypes, the ``torch.uint64`` keys and string columns.

  ``pin_memory=True`` copies each batch into page-locked memory so that
  ``.to('cuda', non_blocking=True)`` overlaps the transfer; with no
  accelerator it warns once and does not pin (as ``DataLoader`` does), and
  in a ``DataLoader`` worker it is ignored (use ``DataLoader(...,
  pin_memory=True)`` there). ``device`` moves batches to that device ahead
  of use: up to ``prefetch_to_device`` batches are copied (asynchronously
  on CUDA) before the one handed out is used; ``'cpu'`` does nothing.

  Example:
    ```python
    import numpy as np
    import torch
    import tf_reverb as reverb
    import tf_reverb.torch

    server = reverb.Server([reverb.Table.queue('q', 100)], host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    for i in range(8):
      client.insert([np.full([3], i, np.float32)], {'q': 1.0})
    dataset = tf_reverb.torch.ReplayDataset(
        f'localhost:{server.port}', 'q', batch_size=4, max_samples=8)
    for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
      print(batch.data[0].shape, batch.info.key.dtype)
    server.stop()
    ```
  """

  def __init__(
    self,
    server_address: Union[str, Sequence[str]],
    table: str,
    batch_size: int,
    *,
    max_in_flight_samples_per_worker: int = 100,
    num_workers_per_iterator: int = -1,
    max_samples_per_stream: int = -1,
    rate_limiter_timeout_ms: int = -1,
    max_samples: int = -1,
    structure: Optional[Any] = None,
    num_batching_threads: int = 2,
    prefetch_batches: int = 2,
    credentials: Optional[Any] = None,
    auth_token: Optional[str] = None,
    emit_policy_version: bool = False,
    pin_memory: bool = False,
    device: Union[str, 'torch.device', None] = None,
    prefetch_to_device: int = 2,
  ):
    """Checks the options; sampling starts with each ``iter()``.

    Args:
      server_address: as ``NumpyIterator``'s: "host:port", a sharded target
        or a list of addresses.
      table: name of the table.
      batch_size: samples per batch.
      max_in_flight_samples_per_worker: as ``NumpyIterator``'s.
      num_workers_per_iterator: sampler workers of each sampler (not
        DataLoader workers), as ``NumpyIterator``'s.
      max_samples_per_stream: as ``NumpyIterator``'s.
      rate_limiter_timeout_ms: as ``NumpyIterator``'s: -1 waits forever,
        else the iteration ends when no sample arrives in that time.
      max_samples: -1: unlimited; else exactly that many samples per
        ``iter()``, split over DataLoader workers.
      structure: optional nest to unflatten each batch's columns into.
      num_batching_threads: as ``NumpyIterator``'s.
      prefetch_batches: as ``NumpyIterator``'s.
      credentials: TLS credentials, as ``Client``'s.
      auth_token: bearer token, as ``Client``'s.
      emit_policy_version: as ``NumpyIterator``'s (info is a
        ``VersionedSampleInfo``).
      pin_memory: copy batches into page-locked memory.
      device: a device to move batches to (None or 'cpu': stay).
      prefetch_to_device: batches moved to `device` ahead of use (>= 1).

    Raises:
      ValueError: for invalid options.
    """
    super().__init__()
    _options.validate_sampler_options(
      max_in_flight_samples_per_worker,
      num_workers_per_iterator,
      max_samples_per_stream,
      rate_limiter_timeout_ms,
      max_samples,
    )
    if batch_size < 1:
      raise ValueError(f'batch_size ({batch_size}) must be >= 1')
    if num_batching_threads < 1:
      raise ValueError(
        f'num_batching_threads ({num_batching_threads}) must be >= 1'
      )
    if prefetch_batches < 1:
      raise ValueError(f'prefetch_batches ({prefetch_batches}) must be >= 1')
    if prefetch_to_device < 1:
      raise ValueError(
        f'prefetch_to_device ({prefetch_to_device}) must be >= 1'
      )
    self._server_address = server_address
    self._table = table
    self._batch_size = batch_size
    self._max_samples = max_samples
    self._structure = structure
    self._sampler_options = dict(
      max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
      num_workers_per_iterator=num_workers_per_iterator,
      max_samples_per_stream=max_samples_per_stream,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms,
      num_batching_threads=num_batching_threads,
      prefetch_batches=prefetch_batches,
      credentials=credentials,
      auth_token=auth_token,
    )
    if emit_policy_version:
      self._sampler_options['emit_policy_version'] = True
    self._pin_memory = bool(pin_memory)
    self._device = None if device is None else torch.device(device)
    self._prefetch_to_device = prefetch_to_device

  @property
  def table(self) -> str:
    """The table sampled."""
    return self._table

  @property
  def batch_size(self) -> int:
    """Samples per batch (the last batch of ``max_samples`` may be
    smaller)."""
    return self._batch_size

  def __iter__(self) -> Iterator[replay_sample.ReplaySample]:
    """Starts a sampler; under a DataLoader worker, that worker's share."""
    worker = torch.utils.data.get_worker_info()
    max_samples = self._max_samples
    if worker is not None:
      if os.getpid() != _IMPORT_PID:
        raise RuntimeError(
          'ReplayDataset in a forked DataLoader worker: gRPC does not work '
          'in a process forked from one that used it, so sampling would '
          "hang. Pass multiprocessing_context='spawn' (or 'forkserver') to "
          'the DataLoader.'
        )
      max_samples = _share(max_samples, worker.id, worker.num_workers)
      if max_samples == 0:
        return iter(())
      if self._device is not None and self._device.type != 'cpu':
        raise ValueError(
          f'ReplayDataset(device={str(self._device)!r}) in a DataLoader '
          'worker: devices belong to the main process. Use '
          "DataLoader(..., pin_memory=True) and .to(device, "
          'non_blocking=True) in the training loop instead.'
        )
    return self._batches(max_samples, in_worker=worker is not None)

  def _pin(self, in_worker: bool) -> bool:
    if not self._pin_memory:
      return False
    if in_worker:
      _warn_once(
        'pin_memory_worker',
        'ReplayDataset(pin_memory=True) is ignored in DataLoader workers: '
        'pass pin_memory=True to the DataLoader instead.',
      )
      return False
    if not _accelerator_available():
      _warn_once(
        'pin_memory_no_accelerator',
        "ReplayDataset's 'pin_memory' is True but no accelerator is found: "
        'batches are not pinned.',
      )
      return False
    return True

  def _batches(
    self, max_samples: int, in_worker: bool
  ) -> Iterator[replay_sample.ReplaySample]:
    convert: Callable[[Any], Any] = _to_tensor
    if self._pin(in_worker):
      convert = _pinned
    device = self._device
    if device is not None and device.type == 'cpu':
      device = None
    with numpy_iterator.NumpyIterator(
      self._server_address,
      self._table,
      self._batch_size,
      max_samples=max_samples,
      structure=self._structure,
      **self._sampler_options,
    ) as batches:
      if device is not None:
        convert = _moved_to(device, convert)

      def stage(info, columns):
        # pylint: disable-next=protected-access
        return batches._assemble(
          [convert(value) for value in info],
          [convert(column) for column in columns],
        )

      # pylint: disable-next=protected-access
      yield from batches._staged(
        stage, self._prefetch_to_device if device is not None else 1
      )


def _pinned(array: Any) -> Any:
  tensor = _to_tensor(array)
  return tensor.pin_memory() if isinstance(tensor, torch.Tensor) else tensor


def _moved_to(
  device: 'torch.device', convert: Callable[[Any], Any]
) -> Callable[[Any], Any]:
  """`convert`, then tensors on their way to `device`."""

  def convert_and_move(array: Any) -> Any:
    value = convert(array)
    if isinstance(value, torch.Tensor):
      return value.to(device, non_blocking=True)
    return value

  return convert_and_move


def update_priorities(
  client: Union[reverb_client.Client, str],
  table: str,
  keys: Any,
  priorities: Any,
) -> None:
  """Sets the priorities of the items `keys` of `table`.

  Args:
    client: a ``tf_reverb.Client``, or a server address to make one for.
    table: name of the table.
    keys: a batch's ``info.key`` (``torch.uint64``, or its
      ``view(torch.int64)``), on any device, or any array/sequence of keys.
    priorities: a tensor (any device, any float or integer dtype; detached
      and copied to the CPU here), array or sequence, as many as `keys`.

  Raises:
    ValueError: for keys and priorities of different lengths, non-integer
      keys or priorities the table refuses.
  """
  if isinstance(client, str):
    client = reverb_client.Client(client)
  client.mutate_priorities(table, updates=(_to_cpu(keys), _to_cpu(priorities)))


def _to_cpu(value: Any) -> Any:
  if isinstance(value, torch.Tensor):
    return _dtypes.to_numpy(value.detach().cpu())
  return value
