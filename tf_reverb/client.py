"""``Client``: inserts, samples and administers tables of a replay server."""

from typing import (
  Any,
  Callable,
  Dict,
  Generator,
  Iterator,
  List,
  Mapping,
  Optional,
  Sequence,
  Tuple,
  Union,
)

import numpy as np
import tree

from tf_reverb import _dtypes
from tf_reverb import _options
from tf_reverb import credentials as credentials_lib
from tf_reverb import errors
from tf_reverb import pybind
from tf_reverb import replay_sample
from tf_reverb import reverb_types
from tf_reverb import shard_target
from tf_reverb import structured_writer as structured_writer_lib
from tf_reverb import tensor_spec
from tf_reverb import trajectory_writer as trajectory_writer_lib
from tf_reverb import writer as writer_lib
from tf_reverb.proto import reverb_service_pb2

__all__ = ['Client']


# Samples Client.sample fetches ahead of the caller (at most num_samples).
_SAMPLE_PREFETCH = 16


def _call_server_info(
  call: Callable[[int], Any], timeout: Optional[float]
) -> Any:
  """`call(timeout_ms)` of a core ServerInfo method; an expired `timeout`
  raised as Reverb words it."""
  timeout_ms = -1 if not timeout else int(timeout * 1000)
  try:
    return call(timeout_ms)
  except errors.DeadlineExceededRuntimeError as e:
    if timeout:
      raise errors.DeadlineExceededError(
        f'ServerInfo call did not complete within provided timeout of '
        f'{timeout}s'
      ) from e
    raise


class Client:
  """A client of the Reverb server (or sharded servers) at `server_address`.

  Construction does no RPC. Samplers read tables of a server in the same
  process directly, without gRPC (never for servers with TLS or tokens).

  Sharding (docs/concepts/sharding.md): `server_address` may name several servers —
  ``"ipv4:A:P,B:Q"``, ``"ipv6:..."``, ``"dns:///name:port"`` or a list of
  ``"host:port"`` (``tf_reverb.shard_target.to_target``). Streams (writers,
  sampler workers, ``insert``) are spread by gRPC's round_robin over the
  shards passing grpc.health.v1 checks: a writer's stream lives on one
  shard, and after that shard fails the writer reconnects, possibly to
  another, resending its unconfirmed items with their keys. Samplers with
  the default number of workers get one worker per shard. ``mutate_priorities``,
  ``reset``, ``checkpoint`` and ``server_info`` act on every shard;
  ``shard_server_info`` gives each shard's tables. A one-address target is
  today's unsharded client, with no extra channel.

  Example:
    ```python
    import numpy as np
    import tf_reverb as reverb

    server = reverb.Server(tables=[reverb.Table.queue('queue', max_size=10)],
                           host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for step in range(3):
        writer.append({'obs': np.full([2], step, np.float32)})
        writer.create_item('queue', priority=1.0,
                           trajectory={'obs': writer.history['obs'][-1]})
    for sample in client.sample('queue', num_samples=3, emit_timesteps=False):
      print(sample.info.key, sample.data[0])  # [0. 0.], [1. 1.], [2. 2.]
    server.stop()
    ```
  """

  def __init__(
    self,
    server_address: shard_target.Address,
    credentials: Optional[credentials_lib.ChannelCredentials] = None,
    auth_token: Optional[str] = None,
  ):
    """Creates a client of `server_address` ("host:port" or a sharded target).

    Args:
      server_address: "host:port" of the server, or a sharded target or list
        of addresses.
      credentials: TLS credentials (``tf_reverb.ChannelCredentials``); None
        uses those registered for this address in this process, else the
        ``TF_REVERB_TLS_*`` environment, else plaintext. A sharded client
        uses them for every shard.
      auth_token: bearer token sent on every call; None uses the
        registered one, else ``TF_REVERB_AUTH_TOKEN``, else none.

    Given credentials or a token are registered for the target string
    (``server_address`` after ``shard_target.to_target``;
    ``tf_reverb.credentials.register``), so TF ops and datasets of this
    process given the same target use them too.

    Raises:
      ValueError: for a malformed sharded target or address list, or for
        inconsistent credentials (a client certificate without its key, a
        token without TLS to a non-loopback address, an unreadable
        ``TF_REVERB_TLS_*`` file).
    """
    self._server_address = shard_target.to_target(server_address)
    self._credentials = credentials
    self._auth_token = auth_token
    credentials_lib.register_if_given(
      self._server_address, credentials, auth_token
    )
    self._client = pybind.Client(self._server_address)
    self._client.setup_error()
    self._signature_cache: Optional[Dict[str, Any]] = None

  @property
  def server_address(self) -> str:
    """The gRPC target this client connects to (a list becomes one target)."""
    return self._server_address

  @property
  def sharded(self) -> bool:
    """Whether the target names several servers."""
    return self._client.sharded

  def shard_addresses(self) -> List[str]:
    """The addresses of the shards now ([server_address] when unsharded).

    A ``dns:`` target is resolved at each call.

    Raises:
      RuntimeError: when a ``dns:`` name does not resolve.
    """
    return self._client.shard_addresses()

  def __reduce__(self):
    return Client, (self._server_address, self._credentials, self._auth_token)

  def __repr__(self) -> str:
    return f'Client, server_address={self._server_address}'

  def insert(
    self,
    data: Any,
    priorities: Dict[str, float],
    *,
    policy_version: Optional[int] = None,
  ) -> None:
    """Inserts `data` as one item into every table of `priorities`.

    The data is sent once, however many tables it goes to. Sampled back as a
    trajectory, each column has a leading dimension of 1. On a sharded
    client consecutive calls rotate over the shards (one open stream each);
    a call whose shard fails is resent, with the same keys, to another.

    Args:
      data: a nest of arrays, scalars or eager tensors (dm-tree order).
      priorities: table name -> priority of the new item there.
      policy_version: the version of the policy that produced the data (a
        tf_reverb extension, see ``set_policy_version``); None: each
        table's current version.

    Raises:
      ValueError: for empty priorities, a negative policy_version,
        unsupported data, or data that does
        not fit a table's signature (wrong number of columns, a dtype, or a
        shape compatible with neither the step nor [1, *step]); the message
        names the table, the column and both specs, and nothing is sent.
      RuntimeError: for unknown tables or transport failures.
    """
    if not priorities:
      raise ValueError('priorities must contain at least one item')
    paths_and_leaves = tree.flatten_with_path(data)
    columns = [
      _dtypes.to_core_tensor(leaf, str(path)) for path, leaf in paths_and_leaves
    ]
    self._client.insert(
      columns,
      [(table, float(p)) for table, p in priorities.items()],
      _options.validate_policy_version(policy_version),
    )

  def sample(
    self,
    table: str,
    num_samples: int = 1,
    *,
    emit_timesteps: bool = True,
    unpack_as_table_signature: bool = False,
    timeout: Optional[float] = None,
    emit_policy_version: bool = False,
  ) -> Generator[
    Union[List[replay_sample.ReplaySample], replay_sample.ReplaySample],
    None,
    None,
  ]:
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
      emit_policy_version: report each sample's policy version: the info is
        a ``VersionedSampleInfo`` instead of a ``SampleInfo`` (a tf_reverb
        extension).

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
      rate_limiter_timeout_ms=timeout_ms,
    )
    try:
      for _ in range(num_samples):
        try:
          # `timeout` also bounds waiting for an unreachable server.
          info_tuple, columns = sampler.next(timeout_ms)
        except errors.DeadlineExceededRuntimeError as e:
          if timeout is not None:
            raise errors.DeadlineExceededError(
              f'No sample of table {table!r} within the timeout of '
              f'{timeout}s: {e}'
            ) from e
          raise
        info = replay_sample.make_sample_info(info_tuple, emit_policy_version)
        yield self._format_sample(info, columns, emit_timesteps, signature)
    finally:
      sampler.close()

  @staticmethod
  def _format_sample(info, columns, emit_timesteps, signature):
    unflatten = (
      (lambda flat: tree.unflatten_as(signature, flat))
      if signature is not None
      else (lambda flat: flat)
    )
    if not emit_timesteps:
      return replay_sample.ReplaySample(info, unflatten(columns))
    lengths = {len(column) if np.ndim(column) else None for column in columns}
    if None in lengths:
      raise ValueError(
        "Can't split a trajectory with squeezed columns into timesteps; "
        'sample with emit_timesteps=False.'
      )
    if len(lengths) != 1:
      raise ValueError("Can't split non timestep trajectory into timesteps.")
    (length,) = lengths
    return [
      replay_sample.ReplaySample(
        info, unflatten([column[t] for column in columns])
      )
      for t in range(length)
    ]

  def _table_signature(self, table: str) -> Any:
    if self._signature_cache is None:
      self.server_info()
    assert self._signature_cache is not None
    if table not in self._signature_cache:
      raise ValueError(
        f'Could not find table "{table}". The following tables exists: '
        f'{", ".join(sorted(self._signature_cache))}.'
      )
    return self._signature_cache[table]

  def server_info(
    self, timeout: Optional[int] = None
  ) -> Dict[str, reverb_types.TableInfo]:
    """Returns table name -> ``TableInfo`` for every table of the server.

    On a sharded client the shards that answer are summed per table
    (current_size, max_size, episodes, unique samples, the rate limiter's
    completed inserts and samples); options and signature are the first
    shard's. A shard that cannot be reached is left out (see
    ``shard_server_info``); the call waits only while no shard answers.

    Args:
      timeout: seconds to wait for the server; None or 0 waits forever.

    Raises:
      DeadlineExceededError: when the server (no shard) did not answer in
        time.
    """
    serialized = _call_server_info(self._client.server_info, timeout)
    response = reverb_service_pb2.ServerInfoResponse.FromString(serialized)
    infos = {
      info.name: reverb_types.TableInfo.from_proto(info)
      for info in response.table_info
    }
    if self._signature_cache is None:
      self._signature_cache = {name: i.signature for name, i in infos.items()}
    return infos

  def shard_server_info(
    self, timeout: Optional[int] = None
  ) -> Dict[str, Union[Dict[str, reverb_types.TableInfo], Exception]]:
    """Returns shard address -> its tables' ``TableInfo``s, per shard.

    A shard that did not answer maps to the error (a ``RuntimeError``
    naming its status) instead. Unsharded: {server_address: server_info()}.

    Args:
      timeout: seconds to wait while no shard answers; None or 0: forever.

    Raises:
      DeadlineExceededError: when no shard answered in time.
    """
    shards = _call_server_info(self._client.shard_server_info, timeout)
    result: Dict[str, Union[Dict[str, reverb_types.TableInfo], Exception]] = {}
    for address, serialized, error in shards:
      if serialized is None:
        result[address] = RuntimeError(f'Shard {address}: {error}')
        continue
      response = reverb_service_pb2.ServerInfoResponse.FromString(serialized)
      result[address] = {
        info.name: reverb_types.TableInfo.from_proto(info)
        for info in response.table_info
      }
    return result

  def mutate_priorities(
    self,
    table: str,
    updates: Union[Mapping[int, float], Tuple[Any, Any], None] = None,
    deletes: Optional[Any] = None,
  ) -> None:
    """Deletes items, then updates priorities; absent keys are ignored.

    On a sharded client every shard gets the whole request (each applies the
    keys it has); shards that cannot be reached are skipped (their items
    cannot be updated).

    Args:
      table: name of the table.
      updates: the new priorities: a mapping key -> priority (Reverb's
        form), or a pair ``(keys, priorities)`` of equally long arrays,
        ``torch.Tensor``s or ``jax.Array``s (or sequences), e.g. a batch's
        ``info.key`` and the new priorities. Keys are uint64, or int64
        holding a uint64 key's bits.
      deletes: keys of items to delete, as a sequence, array or tensor.

    Raises:
      RuntimeError: on a sharded client, when no shard could be reached.
      ValueError: when a priority is invalid for the table (nothing of the
        request is applied then), or keys and priorities differ in length.
    """
    if updates is None:
      pairs = []
    elif isinstance(updates, Mapping):
      pairs = [(int(k), float(p)) for k, p in updates.items()]
    elif isinstance(updates, tuple) and len(updates) == 2:
      pairs = _dtypes.priority_updates(*updates)
    else:
      raise TypeError(
        'updates must be a mapping key -> priority or a pair (keys, '
        f'priorities), got {type(updates).__name__}'
      )
    delete_keys = (
      [] if deletes is None else _dtypes.to_uint64_keys(deletes).tolist()
    )
    self._client.mutate_priorities(table, pairs, delete_keys)

  def reset(self, table: str) -> None:
    """Removes every item of `table` and zeroes its rate limiter's counters.

    On a sharded client every shard is reset.

    Raises:
      RuntimeError: naming the shards that could not be reset (the others
        were).
    """
    self._client.reset(table)

  def checkpoint(self, full: bool = False) -> Union[str, List[str]]:
    """Checkpoints the server; returns the checkpoint's path.

    On a sharded client every shard checkpoints (into its own directory) and
    the result is the list of their paths, in ``shard_addresses()`` order.

    Args:
      full: write a full, self-contained checkpoint (the format dm-reverb
        restores) even where the server's checkpointer writes incremental
        ones, which reference the chunks earlier checkpoints hold. A
        dm-reverb server ignores it (its checkpoints are always full).

    Raises:
      RuntimeError: naming the shards that could not checkpoint (the others
        did).
    """
    paths = self._client.checkpoint(full)
    return paths if self._client.sharded else paths[0]

  # Looking into a table without sampling it (tf_reverb servers only; a
  # dm-reverb server answers UNIMPLEMENTED, raised as RuntimeError).

  def lookup(
    self,
    table: str,
    keys: Sequence[int],
    timeout: Optional[float] = None,
  ) -> reverb_types.LookupResult:
    """The items of `keys` as they are now, without sampling them.

    A lookup is not a sample: times sampled, the rate limiter and
    ``max_times_sampled`` are untouched. Keys not found are reported in
    ``missing``, not raised. On a sharded client every shard is asked;
    shards that cannot be reached are left out (their keys are missing).

    Args:
      table: name of the table.
      keys: item keys.
      timeout: seconds to wait for the server; None waits for it.

    Returns:
      ``LookupResult(items={key: ReplaySample}, missing=[keys])``; each
      sample's data is the item's flat list of columns.

    Raises:
      DeadlineExceededError: when the server did not answer in `timeout`.
      RuntimeError: for an unknown table or when no server answered.
    """
    items, missing = self._call_with_timeout(
      'Lookup',
      timeout,
      lambda ms: self._client.lookup(table, [int(k) for k in keys], ms),
    )
    found = {}
    for info_tuple, columns in items:
      info = replay_sample.VersionedSampleInfo(*info_tuple)
      found[int(info.key)] = replay_sample.ReplaySample(info, columns)
    return reverb_types.LookupResult(items=found, missing=list(missing))

  def set_policy_version(
    self, table: str, version: int, timeout: Optional[float] = None
  ) -> int:
    """Sets the current policy version of `table` (a tf_reverb extension).

    Items carry the version of the policy that produced them (writers'
    ``policy_version=``; by default the table's current version when they
    are inserted). A table with ``max_staleness=K`` stops sampling items
    whose version is below ``version - K`` (and deletes them with
    ``evict_stale=True``). Versions only grow; setting the current one again
    changes nothing, so a learner may repeat it. On a sharded client every
    shard is set; a shard that cannot be reached now misses it (set it
    again later), and the call fails only when no shard answered.

    Args:
      table: name of the table.
      version: the new current version (>= the current one).
      timeout: seconds to wait for the server; None waits for it.

    Returns:
      How many items this made too stale to sample (over all shards).

    Raises:
      TypeError: when version is not an int.
      ValueError: for a negative version or one below the table's current
        version.
      DeadlineExceededError: when the server did not answer in `timeout`.
      RuntimeError: for an unknown table or when no server answered.
    """
    checked = _options.validate_policy_version(version)
    if checked is None:
      raise TypeError('version must be an int, got None')
    return self._call_with_timeout(
      'SetPolicyVersion',
      timeout,
      lambda ms: self._client.set_policy_version(table, checked, ms),
    )

  def table_stats(
    self, table: str, timeout: Optional[float] = None
  ) -> reverb_types.TableStats:
    """Size, priorities, times sampled and ages of `table`'s items now.

    Not a sample: nothing of the table changes. On a sharded client the
    shards that answer are summed.

    Args:
      table: name of the table.
      timeout: seconds to wait for the server; None waits for it.

    Raises:
      DeadlineExceededError: when the server did not answer in `timeout`.
      RuntimeError: for an unknown table or when no server answered.
    """
    serialized = self._call_with_timeout(
      'TableStats', timeout, lambda ms: self._client.table_stats(table, ms)
    )
    return reverb_types.TableStats.from_proto(
      reverb_service_pb2.TableStatsResponse.FromString(serialized)
    )

  def scan(
    self,
    table: str,
    batch_size: int = 1000,
    timeout: Optional[float] = None,
  ) -> Iterator[List[replay_sample.ReplaySample]]:
    """Yields every item of `table` in insertion order, in batches.

    Each batch holds at most `batch_size` items (fewer once their chunks
    reach 1 MiB); each is fetched when the previous one was consumed, and
    the server holds the table's lock only to copy pointers, so writers and
    samplers go on meanwhile. An item present for the whole scan is yielded
    exactly once; items inserted during it may be, deleted ones are not. On
    a sharded client the shards are scanned one after another (each in its
    insertion order). Not a sample: nothing of the table changes.

    Args:
      table: name of the table.
      batch_size: items per batch (>= 1).
      timeout: seconds each batch may take; None waits for the server.

    Raises:
      ValueError: for batch_size < 1.
      DeadlineExceededError: when a batch did not come in `timeout`.
      RuntimeError: for an unknown table, or a shard that cannot be
        reached (naming it).
    """
    if batch_size < 1:
      raise ValueError(f'batch_size must be >= 1, got {batch_size}')
    servers = len(self.shard_addresses()) if self._client.sharded else 1
    for server in range(servers):
      start, done = 0, False
      while not done:
        items, start, done = self._call_with_timeout(
          'Scan',
          timeout,
          # pylint: disable-next=cell-var-from-loop
          lambda ms: self._client.scan(table, server, start, batch_size, ms),
        )
        if items:
          yield [
            replay_sample.ReplaySample(
              replay_sample.VersionedSampleInfo(*info_tuple), columns
            )
            for info_tuple, columns in items
          ]

  @staticmethod
  def _call_with_timeout(
    what: str, timeout: Optional[float], call: Callable[[int], Any]
  ) -> Any:
    """`call(timeout_ms)`; an expired `timeout` raised as
    DeadlineExceededError."""
    if timeout is not None and timeout <= 0:
      raise ValueError(f'timeout must be > 0 seconds or None, got {timeout}')
    timeout_ms = -1 if timeout is None else max(1, int(timeout * 1000))
    try:
      return call(timeout_ms)
    except errors.DeadlineExceededRuntimeError as e:
      if timeout is not None:
        raise errors.DeadlineExceededError(
          f'{what} did not complete within the timeout of {timeout}s: {e}'
        ) from e
      raise

  # Writers (tf_reverb/trajectory_writer.py, writer.py, structured_writer.py).

  def _flat_signatures(self, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Table name -> flattened signature [(dtype enum, shape)] or None.

    `timeout` (seconds, None: forever) bounds the ServerInfo call made when
    no signatures are cached.
    """
    if self._signature_cache is None:
      self.server_info(timeout)
    assert self._signature_cache is not None
    # tf.TensorSpec or tensor_spec.TensorSpec leaves alike, without TF.
    return {
      name: None if signature is None else tensor_spec.flat_columns(signature)
      for name, signature in self._signature_cache.items()
    }

  def trajectory_writer(
    self,
    num_keep_alive_refs: int,
    *,
    validate_items: bool = True,
    get_signature_timeout_ms: Optional[int] = None,
  ) -> trajectory_writer_lib.TrajectoryWriter:
    """A new ``TrajectoryWriter`` (auto-tuned chunking).

    On a sharded client its stream lives on one shard (gRPC round_robin
    picks it); when that shard fails it reconnects to another and resends
    its unconfirmed items there, keys unchanged.

    Args:
      num_keep_alive_refs: how many recent steps of each column items may
        reference.
      validate_items: check items against the tables' signatures at
        ``create_item`` (fetches them with a ServerInfo call unless cached).
      get_signature_timeout_ms: the keyword of Reverb releases before 0.14
        (Acme 0.4, older TF-Agents pass it): when set, items are validated
        and fetching the signatures gives up after that many milliseconds;
        None leaves `validate_items` in charge.

    Raises:
      ValueError: if num_keep_alive_refs < 1 or get_signature_timeout_ms < 0.
      DeadlineExceededError: when the signatures could not be fetched within
        get_signature_timeout_ms.
    """
    if num_keep_alive_refs < 1:
      raise ValueError(
        f'num_keep_alive_refs ({num_keep_alive_refs}) must be a positive '
        'integer'
      )
    signature_timeout = None
    if get_signature_timeout_ms is not None:
      if get_signature_timeout_ms < 0:
        raise ValueError(
          f'get_signature_timeout_ms ({get_signature_timeout_ms}) must be '
          '>= 0 or None'
        )
      validate_items = True
      # server_info takes seconds; 0 would mean "forever" there.
      signature_timeout = max(get_signature_timeout_ms, 1) / 1000
    cpp_writer = writer_lib.new_cpp_writer(
      self._client,
      num_keep_alive_refs=num_keep_alive_refs,
      max_chunk_length=0,
      delta_encoded=False,
      max_queued_items=trajectory_writer_lib.DEFAULT_MAX_QUEUED_ITEMS,
      signatures=(
        self._flat_signatures(signature_timeout) if validate_items else None
      ),
      accept_step_shape_signatures=False,
    )
    return trajectory_writer_lib.TrajectoryWriter(cpp_writer)

  def structured_writer(
    self, configs: Sequence[structured_writer_lib.Config]
  ) -> structured_writer_lib.StructuredWriter:
    """A new ``StructuredWriter`` driven by `configs` (``reverb.structured``).

    Sharded clients: as ``trajectory_writer`` (one shard per stream).

    Args:
      configs: ``structured.Config`` protos; a ``buffer_length`` condition is
        added to each that lacks one.

    Raises:
      ValueError: if no config is given or a config is invalid ("Invalid
        configuration at position i: ...").
    """
    if not configs:
      raise ValueError('At least one config must be provided.')
    serialized = [config.SerializeToString() for config in configs]
    return structured_writer_lib.StructuredWriter(
      pybind.StructuredWriter(self._client, serialized)
    )

  def writer(
    self,
    max_sequence_length: int,
    delta_encoded: bool = False,
    chunk_length: Optional[int] = None,
    max_in_flight_items: Optional[int] = 25,
  ) -> writer_lib.Writer:
    """A new legacy ``Writer`` (step-oriented; docs/concepts/writers-and-patterns.md).

    Sharded clients: as ``trajectory_writer`` (one shard per stream).

    Args:
      max_sequence_length: longest item (in timesteps) it can create.
      delta_encoded: delta-encode integer columns in chunks.
      chunk_length: timesteps per chunk; default min(10, max_sequence_length).
      max_in_flight_items: pending (unconfirmed) items before create_item
        blocks; None means 1_000_000.

    Raises:
      ValueError: for out-of-range arguments.
    """
    if max_sequence_length < 1:
      raise ValueError(
        f'max_sequence_length ({max_sequence_length}) must be a positive '
        'integer'
      )
    if chunk_length is None:
      chunk_length = min(10, max_sequence_length)
    if chunk_length < 1 or chunk_length > max_sequence_length:
      raise ValueError(
        f'chunk_length ({chunk_length}) must be a positive integer le to '
        f'max_sequence_length ({max_sequence_length})'
      )
    if max_in_flight_items is None:
      max_in_flight_items = 1_000_000
    if max_in_flight_items < 1:
      raise ValueError(
        f'max_in_flight_items ({max_in_flight_items}) must be a positive '
        'integer'
      )
    cpp_writer = writer_lib.new_cpp_writer(
      self._client,
      num_keep_alive_refs=max_sequence_length,
      max_chunk_length=chunk_length,
      delta_encoded=delta_encoded,
      max_queued_items=max_in_flight_items,
      signatures=self._flat_signatures(),
      accept_step_shape_signatures=True,
    )
    return writer_lib.Writer(cpp_writer, max_sequence_length)
