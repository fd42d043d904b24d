"""``Table`` and ``Server``: replay tables hosted by a gRPC server."""

import abc
import logging
import os
import time
from typing import List, Optional, Sequence

import portpicker

from tf_reverb import checkpointers as checkpointers_lib
from tf_reverb import client as client_lib
from tf_reverb import credentials as credentials_lib
from tf_reverb import item_selectors
from tf_reverb import pybind
from tf_reverb import rate_limiters
from tf_reverb import reverb_types

__all__ = ['Server', 'Table', 'TableExtensionBase']


class TableExtensionBase(metaclass=abc.ABCMeta):
  """Base of Python table extensions: they build the C++ extensions of a table.

  tf_reverb's ``Table`` does not accept extensions yet (NotImplementedError).
  """

  @abc.abstractmethod
  def build_internal_extensions(
    self, table_name: str
  ) -> List[pybind.TableExtension]:
    """The C++ extensions (``pybind.TableExtension``) to attach to `table_name`."""


class Table:
  """A replay table: items, how they are sampled and evicted, and its limiter.

  The C++ table is created at once and holds its data for as long as this
  object or a server hosting it lives.

  Example:
    ```python
    import tf_reverb as reverb

    # Prioritized replay: sample in proportion to priority ** 0.6, evict
    # the oldest item beyond 100,000, two samples per insert on average
    # once 1,000 items are in.
    replay = reverb.Table(
        name='replay',
        sampler=reverb.selectors.Prioritized(priority_exponent=0.6),
        remover=reverb.selectors.Fifo(),
        max_size=100_000,
        rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert=2.0, min_size_to_sample=1000,
            error_buffer=100.0))
    # A FIFO queue: each item is sampled exactly once, in order.
    work = reverb.Table.queue('work', max_size=100)
    server = reverb.Server(tables=[replay, work], host='127.0.0.1')
    server.stop()
    ```
  """

  def __init__(
    self,
    name: str,
    sampler: reverb_types.SelectorType,
    remover: reverb_types.SelectorType,
    max_size: int,
    rate_limiter: rate_limiters.RateLimiter,
    max_times_sampled: int = 0,
    extensions: Sequence[object] = (),
    signature: Optional[reverb_types.SpecNest] = None,
    *,
    check_item_signatures: bool = False,
    seed: Optional[int] = None,
    max_staleness: Optional[int] = None,
    evict_stale: bool = False,
  ):
    """Creates a table.

    Args:
      name: unique name of the table on its server.
      sampler: selector picking the items to sample.
      remover: selector picking the item to evict when `max_size` is exceeded.
      max_size: maximum number of items.
      rate_limiter: when inserts and samples may proceed.
      max_times_sampled: an item is deleted once sampled this often; < 1
        means never.
      extensions: table extensions (not supported yet; must be empty).
      signature: optional nest of tf.TensorSpec describing an item.
        Clients that validate check items against it (``Client.insert``,
        ``TFClient.insert``, writers with ``validate_items=True``); the
        table itself accepts any item, as Reverb's does, so a writer with
        ``validate_items=False`` may insert other columns.
      check_item_signatures: the table refuses items inconsistent with
        `signature`, whoever sends them (stricter than Reverb; a tf_reverb
        extension, also ``reverb_server --check_item_signatures``).
      seed: makes sampling reproducible (a tf_reverb extension; also the
        ``seed`` field of a table in the server's config). The sampler's and
        the remover's random generators start from it, and checkpoints keep
        their states, so with the same inserts, updates and samples in the
        same order the same items are sampled in the same order, run after
        run and after a restore. What is reproducible is the table's own
        sequence of picks: it holds for a single consumer (one
        ``Client.sample`` or dataset with one worker); several concurrent
        consumers, or several workers, interleave their requests in an
        order no seed can fix. Item keys come from the writers, so compare
        runs by content, or insert with fixed keys. None (the default):
        seeded from the operating system, as in Reverb.
      max_staleness: a policy-version limit (a tf_reverb extension; also the
        ``max_staleness`` field of a table in the server's config). Items
        carry the version of the policy that produced them (writers'
        ``policy_version=``, by default the table's current version at
        insert) and the table has a current version a learner sets with
        ``Client.set_policy_version``; items whose version is below
        ``current - max_staleness`` are not sampled (sampling waits for
        fresh ones, as for an empty table). The rate limiter counts inserts
        and samples as without a limit, but leaves the inserts of stale
        items out of its balance of inserts and samples (a queue does not
        wait for samples they cannot get). None (the default): no limit.
      evict_stale: delete items once they are too stale to be sampled
        (counted as deletions by the rate limiter, as evictions are) instead
        of keeping them unsampled. Needs `max_staleness`.

    Raises:
      ValueError: for an empty name, a non-positive max_size, a selector or
        limiter already used elsewhere, an unsupported signature, a negative
        max_staleness, or evict_stale without max_staleness.
    """
    if not name:
      raise ValueError('name must be nonempty')
    if max_size <= 0:
      raise ValueError(f'max_size ({max_size}) must be a positive integer')
    if seed is not None and not 0 <= seed < 2**64:
      raise ValueError(f'seed ({seed}) must be in [0, 2**64)')
    if max_staleness is not None and max_staleness < 0:
      raise ValueError(f'max_staleness ({max_staleness}) must be >= 0')
    if evict_stale and max_staleness is None:
      raise ValueError('evict_stale needs max_staleness')
    if extensions:
      raise NotImplementedError('Table extensions are not supported yet.')
    for role, selector in (('sampler', sampler), ('remover', remover)):
      if not isinstance(selector, pybind.ItemSelector):
        raise TypeError(
          f'{role} must be a selector (reverb.selectors.Uniform(), ...), got '
          f'{type(selector).__name__}: {selector!r}'
        )
    if not isinstance(rate_limiter, rate_limiters.RateLimiter):
      raise TypeError(
        'rate_limiter must be a reverb.rate_limiters.RateLimiter, got '
        f'{type(rate_limiter).__name__}: {rate_limiter!r}'
      )
    if sampler is remover:
      raise ValueError(
        'sampler and remover must be different selector objects.'
      )
    sampler.claim(f'sampler of table {name!r}')
    remover.claim(f'remover of table {name!r}')
    rate_limiter.claim(name)
    self._signature = signature
    self._extensions = tuple(extensions)
    self._table = pybind.Table(
      name=name,
      sampler=sampler.serialized_options(),
      remover=remover.serialized_options(),
      max_size=max_size,
      max_times_sampled=max_times_sampled,
      samples_per_insert=rate_limiter.samples_per_insert,
      min_size_to_sample=rate_limiter.min_size_to_sample,
      min_diff=rate_limiter.min_diff,
      max_diff=rate_limiter.max_diff,
      signature=reverb_types.encode_signature(signature),
      check_item_signatures=check_item_signatures,
      seed=seed,
      max_staleness=max_staleness,
      evict_stale=evict_stale,
    )

  @classmethod
  def queue(
    cls,
    name: str,
    max_size: int,
    extensions: Sequence[object] = (),
    signature: Optional[reverb_types.SpecNest] = None,
  ) -> 'Table':
    """A FIFO queue: each item is sampled once, inserts block when full."""
    return cls(
      name=name,
      sampler=item_selectors.Fifo(),
      remover=item_selectors.Fifo(),
      max_size=max_size,
      max_times_sampled=1,
      rate_limiter=rate_limiters.Queue(max_size),
      extensions=extensions,
      signature=signature,
    )

  @classmethod
  def stack(
    cls,
    name: str,
    max_size: int,
    extensions: Sequence[object] = (),
    signature: Optional[reverb_types.SpecNest] = None,
  ) -> 'Table':
    """A LIFO stack: each item is sampled once, inserts block when full."""
    return cls(
      name=name,
      sampler=item_selectors.Lifo(),
      remover=item_selectors.Lifo(),
      max_size=max_size,
      max_times_sampled=1,
      rate_limiter=rate_limiters.Stack(max_size),
      extensions=extensions,
      signature=signature,
    )

  def replace(
    self,
    name: Optional[str] = None,
    sampler: Optional[reverb_types.SelectorType] = None,
    remover: Optional[reverb_types.SelectorType] = None,
    max_size: Optional[int] = None,
    rate_limiter: Optional[rate_limiters.RateLimiter] = None,
    max_times_sampled: Optional[int] = None,
    extensions: Optional[Sequence[object]] = None,
    signature: Optional[reverb_types.SpecNest] = None,
  ) -> 'Table':
    """A new, empty table with the given settings changed.

    Settings left as None are copied from this table: the selectors are
    rebuilt from their options and the rate limiter as a generic
    ``RateLimiter`` with the same parameters.
    """
    info = self.info
    limiter_info = info.rate_limiter_info
    return Table(
      name=name or info.name,
      sampler=sampler
      or item_selectors.selector_from_proto(info.sampler_options),
      remover=remover
      or item_selectors.selector_from_proto(info.remover_options),
      max_size=max_size or info.max_size,
      rate_limiter=rate_limiter
      or rate_limiters.RateLimiter(
        limiter_info.samples_per_insert,
        limiter_info.min_size_to_sample,
        limiter_info.min_diff,
        limiter_info.max_diff,
      ),
      max_times_sampled=(
        info.max_times_sampled
        if max_times_sampled is None
        else max_times_sampled
      ),
      extensions=self._extensions if extensions is None else extensions,
      signature=signature or self._signature,
    )

  @property
  def name(self) -> str:
    """The table's name."""
    return self._table.name()

  @property
  def info(self) -> reverb_types.TableInfo:
    """The table's current configuration and state."""
    return reverb_types.TableInfo.from_serialized_proto(self._table.info())

  def can_sample(self, num_samples: int) -> bool:
    """Whether the rate limiter would let `num_samples` samples proceed now."""
    if num_samples < 1:
      raise ValueError(f'num_samples ({num_samples}) must be >= 1')
    return self._table.can_sample(num_samples)

  def can_insert(self, num_inserts: int) -> bool:
    """Whether the rate limiter would let `num_inserts` inserts proceed now."""
    if num_inserts < 1:
      raise ValueError(f'num_inserts ({num_inserts}) must be >= 1')
    return self._table.can_insert(num_inserts)

  def __repr__(self) -> str:
    return self._table.debug_string()


class Server:
  """A gRPC replay server hosting a fixed set of tables.

  Usable as a context manager; ``stop()`` is idempotent.

  Example:
    ```python
    import tf_reverb as reverb

    with reverb.Server(tables=[
        reverb.Table(
            name='replay',
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=1000,
            rate_limiter=reverb.rate_limiters.MinSize(1)),
    ], host='127.0.0.1') as server:
      client = reverb.Client(f'localhost:{server.port}')
      client.insert([1.0, 2.0], priorities={'replay': 1.0})
      print(client.server_info()['replay'].current_size)  # 1
    ```
  """

  def __init__(
    self,
    tables: Optional[Sequence[Table]] = None,
    port: Optional[int] = None,
    checkpointer: Optional[checkpointers_lib.CheckpointerBase] = None,
    *,
    host: Optional[str] = None,
    credentials: Optional[credentials_lib.ServerCredentials] = None,
    auth_token_file: Optional[str] = None,
    metrics_port: Optional[int] = None,
    metrics_host: str = '',
    wal_dir: Optional[str] = None,
    wal_durability: str = 'sync',
    wal_fsync_interval: float = 0.1,
  ):
    """Starts serving.

    Args:
      tables: the tables to host (at least one, unique names).
      port: port to listen on; None picks a free one, 0 lets the OS pick.
        ``Server.port`` always reports the port actually bound.
      checkpointer: where ``Client.checkpoint()`` saves; the newest complete
        checkpoint found there is restored into `tables` first. None uses a
        fresh temporary directory.
      host: interface to listen on, e.g. '127.0.0.1'; None: all interfaces
        (Reverb's behaviour). Listening beyond loopback with neither TLS
        nor tokens logs one warning.
      credentials: ``tf_reverb.ServerCredentials``: serve TLS only (mutual
        TLS when they hold a client CA).
      auth_token_file: file of accepted bearer tokens, one per line: every
        RPC but health checks must carry one (else UNAUTHENTICATED).
        ``reload_auth_tokens()`` re-reads it. Without TLS only a loopback
        `host` is allowed (a token must not cross a network in clear text).
        A server with TLS or tokens is never read through the in-process
        shortcut: every call passes its checks.

      metrics_port: serve Prometheus metrics (text format) at
        ``http://<metrics_host>:<metrics_port>/metrics``; 0 picks a free port
        (``Server.metrics_port`` reports it); None serves none. The metrics
        are listed in docs/guides/metrics-logs-alerts.md.
      metrics_host: the IPv4 address the metrics endpoint listens on; empty
        for all interfaces.
      wal_dir: keep a write-ahead log there: every change of the tables is
        logged, inserts are confirmed to writers only once logged, and at
        start the log's records after the newest checkpoint are replayed,
        so a crash loses no confirmed insert. Checkpoints (of
        `checkpointer`) delete the log they cover. None: no log (Reverb's
        behaviour: what came after the last checkpoint is lost in a crash).
        See docs/guides/durability.md.
      wal_durability: 'sync' (an insert is confirmed once on disk with
        fdatasync, shared by concurrent writers: survives a host crash) or
        'async' (once written to the OS, fdatasync every
        `wal_fsync_interval` seconds: survives a process crash).
      wal_fsync_interval: seconds between fdatasyncs with 'async'.

    Raises:
      ValueError: for no tables, duplicate names, or a checkpoint holding a
        table that `tables` lacks; for unreadable or inconsistent security
        settings (the message names the file or argument, never a secret).
      RuntimeError: when the port (or the metrics port) cannot be bound, a
        checkpoint or the write-ahead log is corrupt (the message names the
        file and offset), or `wal_dir` cannot be used.
    """
    if not tables:
      raise ValueError('At least one table must be provided')
    names = [table.name for table in tables]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
      raise ValueError(
        f'Multiple items in tables have the same name: {", ".join(duplicates)}'
      )
    if checkpointer is None:
      checkpointer = checkpointers_lib.default_checkpointer()
    if wal_durability not in ('sync', 'async'):
      raise ValueError(
        f"wal_durability must be 'sync' or 'async', got {wal_durability!r}"
      )
    if not wal_fsync_interval > 0:
      raise ValueError(
        f'wal_fsync_interval must be > 0 seconds, got {wal_fsync_interval!r}'
      )
    if port is None:
      port = portpicker.pick_unused_port()
    if metrics_port is not None and (
      isinstance(metrics_port, bool)
      or not isinstance(metrics_port, int)
      or not 0 <= metrics_port <= 65535
    ):
      raise ValueError(
        f'metrics_port must be an int in 0..65535 or None, got {metrics_port!r}'
      )
    if credentials is not None and not isinstance(
      credentials, credentials_lib.ServerCredentials
    ):
      raise TypeError(
        'credentials must be a tf_reverb.ServerCredentials, got '
        f'{type(credentials).__name__}'
      )
    security = pybind.ServerSecurity(
      host=host or '',
      certificate_chain=credentials.certificate_chain if credentials else b'',
      private_key=credentials.private_key if credentials else b'',
      client_ca=(credentials.client_ca or b'') if credentials else b'',
      auth_token_file=auth_token_file or '',
    )
    self._tables: List[Table] = list(tables)
    self._server = pybind.Server(
      [table._table for table in tables],
      port,  # pylint: disable=protected-access
      checkpointer.internal_checkpointer(),
      security,
      metrics_port=-1 if metrics_port is None else metrics_port,
      metrics_host=metrics_host,
      wal_dir=os.fspath(wal_dir) if wal_dir is not None else '',
      wal_durability=wal_durability,
      wal_fsync_interval_seconds=float(wal_fsync_interval),
    )
    self._security = security
    self._stopped = False
    warning = security.exposure_warning()
    if warning:
      logging.getLogger('tf_reverb').warning('%s', warning)

  @property
  def port(self) -> int:
    """The port the server listens on."""
    return self._server.port

  @property
  def metrics_port(self) -> Optional[int]:
    """The port serving ``/metrics``, or None when metrics are off."""
    port = self._server.metrics_port
    return None if port < 0 else port

  def localhost_client(
    self,
    credentials: Optional[credentials_lib.ChannelCredentials] = None,
    auth_token: Optional[str] = None,
  ) -> client_lib.Client:
    """A client of this server through localhost (arguments as ``Client``'s)."""
    return client_lib.Client(
      f'localhost:{self.port}', credentials=credentials, auth_token=auth_token
    )

  def reload_auth_tokens(self) -> int:
    """Re-reads `auth_token_file` (token rotation); returns the token count.

    On failure the previous tokens stay in force.

    Raises:
      ValueError: without `auth_token_file`, or when the file cannot be read
        or holds no token.
    """
    return self._security.reload_auth_tokens()

  def stop(self) -> None:
    """Closes the tables (cancelling blocked calls) and stops serving."""
    if not self._stopped:
      self._stopped = True
      self._server.stop()

  def wait(self) -> None:
    """Blocks until ``stop()``; Ctrl-C stops the server and re-raises."""
    try:
      while not self._stopped:
        time.sleep(0.1)
    except KeyboardInterrupt:
      self.stop()
      raise

  def __enter__(self) -> 'Server':
    return self

  def __exit__(self, *unused_exc_info) -> None:
    self.stop()

  def __del__(self):
    if hasattr(self, '_server'):
      self.stop()

  def __repr__(self) -> str:
    return self._server.debug_string()
