"""``NumpyIterator``: batches of numpy arrays from a table, without TensorFlow.

For PyTorch, JAX and numpy learners. C++ threads sample (with the same
flow-control options as ``TrajectoryDataset``), decode each batch straight
into one contiguous array per column and prefetch batches while Python
works; the GIL is released while waiting. Importing this module does not
import TensorFlow.
"""

import collections
from typing import (
  Any,
  Callable,
  Deque,
  Generic,
  Iterator,
  List,
  Optional,
  Sequence,
  Tuple,
  TypeVar,
  Union,
)

from tf_reverb import _nest
from tf_reverb import _options
from tf_reverb import client as reverb_client
from tf_reverb import pybind
from tf_reverb import replay_sample

_Staged = TypeVar('_Staged')

__all__ = ['NumpyIterator']


class NumpyIterator(Iterator[replay_sample.ReplaySample]):
  """Iterates over batches of samples of `table` as numpy arrays.

  Each batch is ``ReplaySample(info=SampleInfo(...), data=...)``: every
  ``SampleInfo`` field is an array of shape ``[batch]`` (key uint64,
  probability float64, table_size int64, priority float64, times_sampled
  int32) and every data column one contiguous C-ordered array of shape
  ``[batch, *column_shape]`` (strings: object arrays of bytes). Arrays are
  handed over without copies and are the caller's to keep.

  All samples of a batch must have the same column dtypes and shapes
  (ValueError naming the column and both specs otherwise). Iteration ends
  after ``max_samples`` samples (the last batch may be smaller), or when no
  sample could be served within ``rate_limiter_timeout_ms`` (the batch
  collected so far is returned first). Other errors are raised from
  ``next()``.

  Use as a context manager, or call ``close()``, to stop the threads early.

  Example:
    ```python
    import numpy as np
    import tf_reverb as reverb

    server = reverb.Server(tables=[reverb.Table(
        name='replay', sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(), max_size=100,
        rate_limiter=reverb.rate_limiters.MinSize(1))], host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for step in range(10):
        writer.append({'obs': np.full([4], step, np.float32)})
        writer.create_item('replay', priority=1.0,
                           trajectory={'obs': writer.history['obs'][-1]})
    with reverb.NumpyIterator(f'localhost:{server.port}', 'replay',
                              batch_size=8, max_samples=16) as batches:
      for batch in batches:
        print(batch.info.key.shape, batch.data[0].shape)  # (8,) (8, 4)
    server.stop()
    ```
  """

  def __init__(
    self,
    server_address: Union[str, Sequence[str]],
    table: str,
    batch_size: int,
    max_in_flight_samples_per_worker: int = 100,
    num_workers_per_iterator: int = -1,
    max_samples_per_stream: int = -1,
    rate_limiter_timeout_ms: int = -1,
    max_samples: int = -1,
    structure: Optional[Any] = None,
    num_batching_threads: int = 2,
    prefetch_batches: int = 2,
    *,
    credentials: Optional[Any] = None,
    auth_token: Optional[str] = None,
    emit_policy_version: bool = False,
  ):
    """Starts sampling.

    Args:
      server_address: "host:port" of the server (a server of this process is
        read directly, without gRPC), or a sharded target / list of
        addresses (docs/concepts/sharding.md: workers spread over the healthy
        shards, max_samples counts over all of them).
      table: name of the table.
      batch_size: samples per batch.
      max_in_flight_samples_per_worker: samples requested per request.
      num_workers_per_iterator: sampler workers (-1: 1, or one per shard on
        a sharded target; use 1 for FIFO).
      max_samples_per_stream: samples per gRPC stream before it is reopened
        (-1: 10 000).
      rate_limiter_timeout_ms: -1: wait forever; else end the iteration when
        no sample can be served in that time (0: at once).
      max_samples: -1: unlimited; else stop after exactly that many samples.
      structure: optional nest (e.g. the table signature) to unflatten each
        batch's columns into; default: a flat list.
      num_batching_threads: C++ threads decoding samples into batches.
      prefetch_batches: finished batches kept ready ahead of the caller.
      credentials: TLS credentials (``tf_reverb.ChannelCredentials``), as
        ``Client``'s.
      auth_token: bearer token, as ``Client``'s.
      emit_policy_version: each batch's info is a ``VersionedSampleInfo``,
        with the items' policy versions (int64 ``[batch]``), instead of a
        ``SampleInfo``.

    Raises:
      ValueError: for invalid options.
    """
    self._iterator = None
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
    self._structure = structure
    self._emit_policy_version = emit_policy_version
    self._client = reverb_client.Client(
      server_address, credentials=credentials, auth_token=auth_token
    )
    self._iterator = pybind.BatchIterator(
      self._client._client,  # pylint: disable=protected-access
      table,
      batch_size=batch_size,
      max_samples=max_samples,
      max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
      num_workers=num_workers_per_iterator,
      max_samples_per_stream=max_samples_per_stream,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms,
      num_threads=num_batching_threads,
      prefetch=prefetch_batches,
    )

  def __iter__(self) -> 'NumpyIterator':
    return self

  def __next__(self) -> replay_sample.ReplaySample:
    """The next batch.

    Raises:
      StopIteration: at the end (max_samples, rate-limiter timeout, close).
    """
    return self._assemble(*self._next_flat())

  def _next_flat(self) -> Tuple[List[Any], List[Any]]:
    """The next batch as flat lists: its info fields (five, six with
    ``emit_policy_version``) and its columns.

    For the framework adapters (``tf_reverb.torch``, ``tf_reverb.jax``),
    which convert the arrays before ``_assemble`` puts them in place.

    Raises:
      StopIteration: at the end, as ``__next__``.
    """
    if self._iterator is None:
      raise StopIteration
    batch = self._iterator.next()
    if batch is None:
      raise StopIteration
    info, columns = batch
    return list(info[: 6 if self._emit_policy_version else 5]), columns

  def _assemble(
    self, info: List[Any], columns: List[Any]
  ) -> replay_sample.ReplaySample:
    """The ``ReplaySample`` of a batch's flat info fields and columns (as
    ``_next_flat`` returns them, or converted one for one)."""
    data = (
      _nest.unflatten_as(self._structure, columns)
      if self._structure is not None
      else columns
    )
    return replay_sample.ReplaySample(
      replay_sample.make_sample_info(info, self._emit_policy_version), data
    )

  def _staged(
    self,
    stage: Callable[[List[Any], List[Any]], Optional[_Staged]],
    depth: int,
  ) -> '_StagedBatches[_Staged]':
    """``stage(info, columns)`` of every batch (``_next_flat``), each
    started `depth` - 1 batches ahead of its use: the framework adapters'
    pipeline, where staging starts a batch's way to a device."""
    return _StagedBatches(self, stage, depth)

  def close(self) -> None:
    """Stops the sampler and its threads; later ``next()`` calls stop."""
    if self._iterator is not None:
      self._iterator.close()
      self._iterator = None

  def __enter__(self) -> 'NumpyIterator':
    return self

  def __exit__(self, *unused_exc_info) -> None:
    self.close()

  def __del__(self):
    self.close()


class _StagedBatches(Generic[_Staged]):
  """The iterator of ``NumpyIterator._staged``: keeps up to `depth` staged
  batches (those `stage` returns None for are skipped) and hands out the
  oldest. An error of the sampler or of `stage` is raised by the ``next()``
  that met it and leaves the staged batches in place, so a later ``next()``
  goes on (or raises the sampler's error again). At the end of the batches
  it closes the ``NumpyIterator`` at once, then hands out what is staged."""

  def __init__(
    self,
    batches: NumpyIterator,
    stage: Callable[[List[Any], List[Any]], Optional[_Staged]],
    depth: int,
  ):
    self._batches: Optional[NumpyIterator] = batches
    self._stage = stage
    self._depth = max(1, depth)
    self._pending: Deque[_Staged] = collections.deque()

  def __iter__(self) -> '_StagedBatches[_Staged]':
    return self

  def __next__(self) -> _Staged:
    while self._batches is not None and len(self._pending) < self._depth:
      try:
        info, columns = self._batches._next_flat()  # pylint: disable=protected-access
      except StopIteration:
        self._batches.close()
        self._batches = None
        break
      staged = self._stage(info, columns)
      if staged is not None:
        self._pending.append(staged)
    if not self._pending:
      raise StopIteration
    return self._pending.popleft()
