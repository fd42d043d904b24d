"""``Client``: inserts, samples and administers tables of a replay server."""

from typing import Any, Dict, Generator, List, Optional, Sequence, Union

import numpy as np
import tree

from tf_reverb import _dtypes
from tf_reverb import errors
from tf_reverb import pybind
from tf_reverb import replay_sample
from tf_reverb import reverb_types
from tf_reverb.proto import reverb_service_pb2


# Samples Client.sample fetches ahead of the caller (at most num_samples).
_SAMPLE_PREFETCH = 16


class Client:
  """A client of the Reverb server at `server_address`.

  Construction does no RPC. Samplers read tables of a server in the same
  process directly, without gRPC.
  """

  def __init__(self, server_address: str):
    """Creates a client of `server_address` ("host:port")."""
    self._server_address = server_address
    self._client = pybind.Client(server_address)
    self._signature_cache: Optional[Dict[str, Any]] = None

  @property
  def server_address(self) -> str:
    """The address this client connects to."""
    return self._server_address

  def __reduce__(self):
    return Client, (self._server_address,)

  def __repr__(self) -> str:
    return f'Client, server_address={self._server_address}'

  def insert(self, data: Any, priorities: Dict[str, float]) -> None:
    """Inserts `data` as one item into every table of `priorities`.

    The data is sent once, however many tables it goes to. Sampled back as a
    trajectory, each column has a leading dimension of 1.

    Args:
      data: a nest of arrays, scalars or eager tensors (dm-tree order).
      priorities: table name -> priority of the new item there.

    Raises:
      ValueError: for empty priorities or unsupported data.
      RuntimeError: for unknown tables or transport failures.
    """
    if not priorities:
      raise ValueError('priorities must contain at least one item')
    paths_and_leaves = tree.flatten_with_path(data)
    columns = [
        _dtypes.to_core_tensor(leaf, str(path))
        for path, leaf in paths_and_leaves
    ]
    self._client.insert(columns,
                        [(table, float(p)) for table, p in priorities.items()])

  def sample(
      self,
      table: str,
      num_samples: int = 1,
      *,
      emit_timesteps: bool = True,
      unpack_as_table_signature: bool = False,
      timeout: Optional[float] = None,
  ) -> Generator[Union[List[replay_sample.ReplaySample],
                       replay_sample.ReplaySample], None, None]:
    """Yields `num_samples` samples of `table`.

    Args:
      table: name of the table.
      num_samples: number of samples to yield.
      emit_timesteps: yield each sample as a list of per-timestep
        ``ReplaySample``s (True) or as one ``ReplaySample`` of whole columns.
      unpack_as_table_signature: unflatten the data as the table's signature.
      timeout: seconds to wait for each sample (for the rate limiter, or for
        an unreachable server); None waits forever, 0 gives up at once when
        no sample can be served. Not in Reverb (reverb#18).

    Raises:
      DeadlineExceededError: when a sample could not be served in `timeout`.
      ValueError: for bad arguments or items that cannot be split into
        timesteps.
      RuntimeError: for unknown tables or transport failures.
    """
    if num_samples < 1:
      raise ValueError(f'num_samples ({num_samples}) must be >= 1')
    if timeout is not None and timeout < 0:
      raise ValueError(f'timeout ({timeout}) must be >= 0 or None')
    signature = None
    if unpack_as_table_signature:
      signature = self._table_signature(table)
    timeout_ms = -1 if timeout is None else int(timeout * 1000)
    # A C++ worker prefetches up to _SAMPLE_PREFETCH of the `num_samples`
    # while the caller handles earlier ones; never more than num_samples are
    # taken from the table.
    sampler = pybind.new_sampler(
        self._client,
        table,
        max_samples=num_samples,
        max_in_flight_samples_per_worker=min(num_samples, _SAMPLE_PREFETCH),
        num_workers=1,
        rate_limiter_timeout_ms=timeout_ms)
    try:
      for _ in range(num_samples):
        try:
          # `timeout` also bounds waiting for an unreachable server.
          info_tuple, columns = sampler.next(timeout_ms)
        except RuntimeError as e:
          if timeout is not None and errors.is_deadline_exceeded(e):
            raise errors.DeadlineExceededError(
                f'No sample of table {table!r} within the timeout of '
                f'{timeout}s: {e}') from e
          raise
        info = replay_sample.SampleInfo(*info_tuple)
        yield self._format_sample(info, columns, emit_timesteps, signature)
    finally:
      sampler.close()

  @staticmethod
  def _format_sample(info, columns, emit_timesteps, signature):
    unflatten = (lambda flat: tree.unflatten_as(signature, flat)
                ) if signature is not None else (lambda flat: flat)
    if not emit_timesteps:
      return replay_sample.ReplaySample(info, unflatten(columns))
    lengths = {len(column) if np.ndim(column) else None for column in columns}
    if None in lengths:
      raise ValueError(
          "Can't split a trajectory with squeezed columns into timesteps; "
          'sample with emit_timesteps=False.')
    if len(lengths) != 1:
      raise ValueError("Can't split non timestep trajectory into timesteps.")
    (length,) = lengths
    return [
        replay_sample.ReplaySample(
            info, unflatten([column[t] for column in columns]))
        for t in range(length)
    ]

  def _table_signature(self, table: str) -> Any:
    if self._signature_cache is None:
      self.server_info()
    assert self._signature_cache is not None
    if table not in self._signature_cache:
      raise ValueError(
          f'Could not find table "{table}". The following tables exists: '
          f'{", ".join(sorted(self._signature_cache))}.')
    return self._signature_cache[table]

  def server_info(
      self, timeout: Optional[int] = None) -> Dict[str, reverb_types.TableInfo]:
    """Returns table name -> ``TableInfo`` for every table of the server.

    Args:
      timeout: seconds to wait for the server; None or 0 waits forever.

    Raises:
      DeadlineExceededError: when the server did not answer in time.
    """
    timeout_ms = -1 if not timeout else int(timeout * 1000)
    try:
      serialized = self._client.server_info(timeout_ms)
    except RuntimeError as e:
      if timeout and errors.is_deadline_exceeded(e):
        raise errors.DeadlineExceededError(
            f'ServerInfo call did not complete within provided timeout of '
            f'{timeout}s') from e
      raise
    response = reverb_service_pb2.ServerInfoResponse.FromString(serialized)
    infos = {
        info.name: reverb_types.TableInfo.from_proto(info)
        for info in response.table_info
    }
    if self._signature_cache is None:
      self._signature_cache = {name: i.signature for name, i in infos.items()}
    return infos

  def mutate_priorities(self,
                        table: str,
                        updates: Optional[Dict[int, float]] = None,
                        deletes: Optional[Sequence[int]] = None) -> None:
    """Deletes items, then updates priorities; absent keys are ignored.

    Raises:
      ValueError: when a priority is invalid for the table (nothing of the
        request is applied then).
    """
    self._client.mutate_priorities(
        table, [(int(k), float(p)) for k, p in (updates or {}).items()],
        [int(k) for k in (deletes or [])])

  def reset(self, table: str) -> None:
    """Removes every item of `table` and zeroes its rate limiter's counters."""
    self._client.reset(table)

  def checkpoint(self) -> str:
    """Checkpoints the server; returns the checkpoint's path."""
    return self._client.checkpoint()
