"""``tf_reverb.jax``: replay batches as ``jax.Array``s, without TensorFlow.

``ReplayIterator`` samples with the C++ sampler of ``NumpyIterator`` and
puts every batch on a device ahead of use, or splits it
over several devices with a ``jax.sharding.Sharding`` for data-parallel
learners. ``update_priorities`` sends new priorities given as jax arrays.

This module imports JAX (``pip install tf_reverb[jax]``); ``import
tf_reverb`` alone does not, and neither imports TensorFlow.

Representation of a batch (``ReplaySample(info=SampleInfo(...), data=...)``):

- ``info.key`` stays a NumPy ``uint64`` array ``[batch]`` on the host: JAX
  holds 64-bit integers only with ``jax_enable_x64``, and a key cut to 32
  bits names another item. Keys are only ever sent back to the server
  (``update_priorities``), which takes them as they are.
- every other ``info`` field and every numeric column is a ``jax.Array``
  ``[batch, ...]``; dtypes follow JAX's rules, so without
  ``jax_enable_x64`` 64-bit values (``probability``, ``priority``,
  ``table_size``, int64/float64 columns) arrive as their 32-bit types.
- string columns stay NumPy object arrays of ``bytes`` (JAX has no strings).
"""

import functools
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import jax
import numpy as np

from tf_reverb import _dtypes
from tf_reverb import client as reverb_client
from tf_reverb import numpy_iterator
from tf_reverb import replay_sample

__all__ = ['ReplayIterator', 'update_priorities']


def _identity(arrays: List[Any]) -> List[Any]:
  return arrays


# Arrays of at least this many bytes go to the device with jax.device_put,
# which on the CPU takes the sampler's 64-byte aligned buffer without a copy
# (about 0.1 ms an array) when JAX keeps the dtype (not so for 64-bit types
# without jax_enable_x64, which JAX converts); smaller ones go together
# through a jitted identity function (about 12 us an array, plus a copy).
_PUT_BYTES = 1 << 20


def _is_numeric(value: Any) -> bool:
  return isinstance(value, np.ndarray) and value.dtype.kind not in 'OSU'


class _Placer:
  """Where a ReplayIterator's batches go (a sharding, a device or JAX's
  default device) and how they get there. Holds no reference to the
  iterator, so the iterator's staging (``NumpyIterator._staged``) does
  not keep it alive."""

  def __init__(
    self,
    sharding: Optional['jax.sharding.Sharding'],
    device: Optional['jax.Device'],
  ):
    self._sharding = sharding
    self._on_device = (
      None if device is None else jax.sharding.SingleDeviceSharding(device)
    )
    self._shardings: Dict[int, Any] = {}
    self._movers: Dict[Tuple[int, ...], Callable[[List[Any]], List[Any]]] = {}

  def _sharding_for(self, ndim: int) -> Any:
    """The sharding for an array of rank `ndim`: a NamedSharding's spec is
    cut to the rank."""
    sharding = self._shardings.get(ndim)
    if sharding is None:
      sharding = self._sharding
      if isinstance(sharding, jax.sharding.NamedSharding) and (
        len(sharding.spec) > ndim
      ):
        sharding = jax.sharding.NamedSharding(
          sharding.mesh, jax.sharding.PartitionSpec(*sharding.spec[:ndim])
        )
      self._shardings[ndim] = sharding
    return sharding

  def splits(self, size: int) -> bool:
    """Whether the sharding splits a batch of `size` evenly."""
    try:
      self._sharding_for(1).shard_shape((size,))
    except ValueError:
      return False
    return True

  def check_divides(self, size: int, what: str) -> None:
    if not self.splits(size):
      devices = len(self._sharding.device_set)
      raise ValueError(
        f'{what} ({size}) cannot be split evenly by the sharding '
        f'{self._sharding} (over {devices} devices): use a batch size that '
        'is a multiple of the number of shards of the batch dimension.'
      )

  def _placement(self, ndim: int) -> Any:
    """Where an array of rank `ndim` goes: the sharding (cut to the rank),
    the device, or None for JAX's default device."""
    if self._sharding is not None:
      return self._sharding_for(ndim)
    return self._on_device

  def _mover(self, ranks: Tuple[int, ...]) -> Callable[[List[Any]], List[Any]]:
    """The jitted identity that puts arrays of `ranks` where batches go.

    A jitted function takes small host arrays to the device(s) with much
    less Python and dispatch work than ``jax.device_put`` of the same list
    (about a sixth for the nine arrays of a batch of small transitions), but
    it copies them; ``stage`` puts large arrays with ``jax.device_put``.
    """
    mover = self._movers.get(ranks)
    if mover is None:
      placement = [self._placement(rank) for rank in ranks]
      if self._sharding is None and self._on_device is None:
        mover = jax.jit(_identity)
      else:
        mover = jax.jit(
          _identity, in_shardings=(placement,), out_shardings=placement
        )
      self._movers[ranks] = mover
    return mover

  def stage(
    self,
    batches: numpy_iterator.NumpyIterator,
    info: List[Any],
    columns: List[Any],
  ) -> Optional[replay_sample.ReplaySample]:
    """Starts moving a batch of `batches` (flat, as its ``_next_flat`` gives
    it) to the device(s); the key stays on the host. Numeric fields below
    ``_PUT_BYTES`` go in one call (``_mover``), larger ones one by one.
    None, with a warning, for a partial batch the sharding cannot split."""
    size = len(info[0])
    if self._sharding is not None and not self.splits(size):
      warnings.warn(
        f'Dropped a partial batch of {size} samples: the sharding cannot '
        'split it evenly.',
        UserWarning,
        stacklevel=4,  # stage < NumpyIterator._staged < __next__ < caller
      )
      return None
    leaves = info[1:] + columns
    small = []
    for i, value in enumerate(leaves):
      if not _is_numeric(value):
        continue
      if value.nbytes >= _PUT_BYTES:
        leaves[i] = jax.device_put(value, self._placement(value.ndim))
      else:
        small.append(i)
    if small:
      host = [leaves[i] for i in small]
      mover = self._mover(tuple(value.ndim for value in host))
      for i, moved in zip(small, mover(host)):
        leaves[i] = moved
    fields = len(info) - 1
    # pylint: disable-next=protected-access
    return batches._assemble([info[0]] + leaves[:fields], leaves[fields:])


class ReplayIterator:
  """Iterates over a table's batches as ``ReplaySample``s of ``jax.Array``.

  Each batch is moved to the device asynchronously as soon as it is
  sampled: its small fields in one call of a jitted identity function
  (which costs less per array than ``jax.device_put``), fields of 1 MiB or
  more with ``jax.device_put`` (on the CPU, JAX then uses the sampler's
  buffer without copying it, unless it converts the dtype: 64-bit types
  without ``jax_enable_x64``). Up to ``prefetch_to_device`` batches are on
  their way to the device before the one handed out is used (2: double
  buffering), so the transfer of the next batch overlaps the step on this
  one.

  Placement: `device` (default: JAX's default device), or `sharding`: each
  batch is placed as ``jax.device_put(x, sharding)`` would, which for a
  data-parallel ``NamedSharding(mesh, PartitionSpec('data'))`` splits the
  batch dimension over the mesh's devices (a spec longer than a field's
  rank is cut to it, so ``[batch]`` info fields are split the same way).
  `batch_size` must divide evenly (ValueError otherwise), and so must the
  last batch of ``max_samples``; a partial batch ended by
  ``rate_limiter_timeout_ms`` that does not divide is dropped with a
  warning.

  See the module docstring for dtypes, keys and string columns. Use as a
  context manager, or call ``close()``, to stop sampling early.

  Example:
    ```python
    import numpy as np
    import tf_reverb as reverb
    import tf_reverb.jax

    server = reverb.Server([reverb.Table.queue('q', 100)], host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    for i in range(8):
      client.insert([np.full([3], i, np.float32)], {'q': 1.0})
    with tf_reverb.jax.ReplayIterator(
        f'localhost:{server.port}', 'q', batch_size=4, max_samples=8) as it:
      for batch in it:
        print(batch.data[0].shape, batch.data[0].devices())
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
    prefetch_to_device: int = 2,
    sharding: Optional['jax.sharding.Sharding'] = None,
    device: Optional['jax.Device'] = None,
  ):
    """Starts sampling.

    Args:
      server_address: as ``NumpyIterator``'s: "host:port", a sharded target
        or a list of addresses.
      table: name of the table.
      batch_size: samples per batch.
      max_in_flight_samples_per_worker: as ``NumpyIterator``'s.
      num_workers_per_iterator: as ``NumpyIterator``'s.
      max_samples_per_stream: as ``NumpyIterator``'s.
      rate_limiter_timeout_ms: as ``NumpyIterator``'s: -1 waits forever,
        else the iteration ends when no sample arrives in that time.
      max_samples: -1: unlimited; else stop after exactly that many.
      structure: optional nest to unflatten each batch's columns into.
      num_batching_threads: as ``NumpyIterator``'s.
      prefetch_batches: finished host batches kept ready in C++.
      credentials: TLS credentials, as ``Client``'s.
      auth_token: bearer token, as ``Client``'s.
      emit_policy_version: as ``NumpyIterator``'s (info is a
        ``VersionedSampleInfo``).
      prefetch_to_device: batches on their way to the device (>= 1).
      sharding: a ``jax.sharding.Sharding`` to place each batch with.
      device: a ``jax.Device`` to put batches on (not with `sharding`).

    Raises:
      ValueError: for invalid options, both `sharding` and `device`, or a
        `batch_size` (or last batch of `max_samples`) that `sharding`
        cannot split evenly.
    """
    self._batches = None
    self._stream = None
    if prefetch_to_device < 1:
      raise ValueError(
        f'prefetch_to_device ({prefetch_to_device}) must be >= 1'
      )
    if sharding is not None and device is not None:
      raise ValueError('Pass either sharding or device, not both.')
    if sharding is not None and not isinstance(sharding, jax.sharding.Sharding):
      raise TypeError(
        'sharding must be a jax.sharding.Sharding, got '
        f'{type(sharding).__name__}'
      )
    placer = _Placer(sharding, device)
    if sharding is not None:
      placer.check_divides(batch_size, 'batch_size')
      if max_samples > 0 and max_samples % batch_size:
        placer.check_divides(
          max_samples % batch_size,
          f'the last batch of max_samples={max_samples}',
        )
    options = {}
    if emit_policy_version:
      options['emit_policy_version'] = True
    self._batches = numpy_iterator.NumpyIterator(
      server_address,
      table,
      batch_size,
      max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
      num_workers_per_iterator=num_workers_per_iterator,
      max_samples_per_stream=max_samples_per_stream,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms,
      max_samples=max_samples,
      structure=structure,
      num_batching_threads=num_batching_threads,
      prefetch_batches=prefetch_batches,
      credentials=credentials,
      auth_token=auth_token,
      **options,
    )
    # pylint: disable-next=protected-access
    self._stream = self._batches._staged(
      functools.partial(placer.stage, self._batches), prefetch_to_device
    )

  def __iter__(self) -> 'ReplayIterator':
    return self

  def __next__(self) -> replay_sample.ReplaySample:
    """The next batch, on the device(s).

    Raises:
      StopIteration: at the end (max_samples, rate-limiter timeout, close).
    """
    if self._stream is None:
      raise StopIteration
    try:
      return next(self._stream)
    except StopIteration:
      self.close()
      raise

  def close(self) -> None:
    """Stops sampling; batches already staged are dropped."""
    self._stream = None
    if self._batches is not None:
      self._batches.close()
      self._batches = None

  def __enter__(self) -> 'ReplayIterator':
    return self

  def __exit__(self, *unused_exc_info) -> None:
    self.close()

  def __del__(self):
    if getattr(self, '_batches', None) is not None:
      self.close()


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
    keys: a batch's ``info.key`` (NumPy uint64), or keys as a uint64
      ``jax.Array`` (``jax_enable_x64``), array or sequence.
    priorities: a ``jax.Array`` (on any device or sharded; fetched to the
      host here), array or sequence, as many as `keys`.

  Raises:
    ValueError: for keys and priorities of different lengths, keys that
      JAX cut to 32 bits, non-integer keys, or priorities the table
      refuses.
  """
  if isinstance(keys, jax.Array) and keys.dtype.itemsize < 8:
    raise ValueError(
      f'keys is a jax.Array of dtype {keys.dtype}: item keys are 64-bit, '
      'and JAX without jax_enable_x64 cuts them. Pass the batch\'s '
      'info.key as it is (a NumPy uint64 array).'
    )
  if isinstance(client, str):
    client = reverb_client.Client(client)
  client.mutate_priorities(
    table, updates=(_dtypes.to_numpy(keys), _dtypes.to_numpy(priorities))
  )
