"""``ReplayCluster``: sharded replay on Ray (optional: ``pip install tf_reverb[ray]``).

A ``ReplayCluster`` starts ``num_shards`` ``reverb_server`` processes, each
owned by one Ray actor. Ray places the actors (``SPREAD`` over the nodes by
default), restarts a dead one (``max_restarts``) and the shards stay unaware
of each other: clients spread their streams over them with gRPC's
``round_robin`` policy over the multi-address target ``ReplayCluster.address``
(``ipv4:10.0.0.5:40123,10.0.0.6:40777``).

Lifecycle of a shard:

* The actor binds a free port on its node, starts the server with its own
  checkpoint directory ``<checkpoint_dir>/shard-<i>`` (the newest checkpoint
  there is restored at start) and reports ``<node ip>:<port>``.
* The actor watches its server. If the server process dies (crash, OOM kill,
  SIGKILL) the actor exits with an error, which Ray counts as a failure and
  restarts it; if the actor process dies, its server dies with it
  (``PR_SET_PDEATHSIG``), so a shard is never half alive.
* A restarted actor on the same node rebinds the port of its previous
  incarnation (remembered in a node-local file), so ``address`` and every
  channel built from it stay valid: gRPC reconnects by itself and new streams
  reach the shard again. Only if that port is taken, or Ray moved the shard
  to another node, does the address change; ``address`` and
  ``shard_addresses`` always ask the actors for their current addresses, so
  compare ``address`` with the one your clients use and re-create them from
  it when it changed. gRPC reconnects to a restarted shard within its
  reconnect backoff (capped at 2 s on sharded targets); until then new
  streams go to the other shards.

Without a write-ahead log, data written to a shard after its last checkpoint
is lost when it dies (there is no replication, as in Reverb); with
``wal_durability='sync'`` (or ``'async'``) each shard also logs every change
to ``<checkpoint_dir>/shard-<i>-wal`` and a restarted shard replays it after
its newest checkpoint, so no insert it confirmed is lost (async: unless the
node itself went down). ``checkpoint()`` saves every shard, and each
server also checkpoints on a graceful stop and every
``checkpoint_interval_seconds``. On a multi-node cluster ``checkpoint_dir``
must be storage every node sees (NFS, a mounted bucket) for a shard moved to
another node to find its checkpoints.

``import tf_reverb`` never imports this module (nor Ray).
"""

import ctypes
import ipaddress
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

try:
  import ray
except ImportError as e:  # pragma: no cover - depends on the environment
  raise ImportError(
    'tf_reverb.ray needs Ray; install it with `pip install "tf_reverb[ray]"` '
    '(or `pip install ray`).'
  ) from e

from google.protobuf import json_format
from google.protobuf import text_format

from tf_reverb import client as client_lib
from tf_reverb import reverb_types
from tf_reverb import server as server_lib
from tf_reverb.proto import checkpoint_pb2
from tf_reverb.proto import schema_pb2
from tf_reverb.server_executable import server_from_proto
from tf_reverb.server_executable import server_main

__all__ = ['ReplayCluster', 'table_config', 'server_config', 'grpc_target']

# What ``tables`` may hold: Table objects, table configs, or their JSON form.
TableConfig = Union[
  server_lib.Table, checkpoint_pb2.PriorityTableCheckpoint, Mapping[str, Any]
]

# Seconds a server may take from exec to its `event=started` line (it
# restores its checkpoint first, which may be large).
DEFAULT_START_TIMEOUT = 300.0
# Attempts to rebind the previous incarnation's port, and the pause between
# them (the old process may still be exiting when Ray restarts the actor).
_REBIND_ATTEMPTS = 20
_REBIND_PAUSE = 0.25
# Keys of resources_per_shard passed to the actor's options.
_RESOURCE_KEYS = (
  'num_cpus',
  'num_gpus',
  'memory',
  'resources',
  'accelerator_type',
)


def table_config(table: TableConfig) -> checkpoint_pb2.PriorityTableCheckpoint:
  """The ``reverb_server`` config entry (``PriorityTableCheckpoint``) of `table`.

  Args:
    table: a ``tf_reverb.Table`` (its selectors, size, ``max_times_sampled``,
      rate limiter and signature are used; not its items), a
      ``PriorityTableCheckpoint`` proto, or its JSON form as a dict (as in
      ``reverb_server --config``).

  Raises:
    TypeError: for anything else.
    ValueError: for a dict that is not a valid config.
  """
  if isinstance(table, server_lib.Table):
    info = schema_pb2.TableInfo.FromString(table._table.info())  # pylint: disable=protected-access
    limiter = info.rate_limiter_info
    return checkpoint_pb2.PriorityTableCheckpoint(
      table_name=info.name,
      sampler=info.sampler_options,
      remover=info.remover_options,
      max_size=info.max_size,
      max_times_sampled=info.max_times_sampled,
      rate_limiter=checkpoint_pb2.RateLimiterCheckpoint(
        samples_per_insert=limiter.samples_per_insert,
        min_size_to_sample=limiter.min_size_to_sample,
        min_diff=limiter.min_diff,
        max_diff=limiter.max_diff,
      ),
      signature=info.signature,
      max_staleness=(
        info.max_staleness if info.HasField('max_staleness') else None
      ),
      evict_stale=info.evict_stale,
    )
  if isinstance(table, checkpoint_pb2.PriorityTableCheckpoint):
    config = checkpoint_pb2.PriorityTableCheckpoint()
    config.CopyFrom(table)
    return config
  if isinstance(table, Mapping):
    config = checkpoint_pb2.PriorityTableCheckpoint()
    try:
      json_format.ParseDict(dict(table), config)
    except json_format.ParseError as e:
      raise ValueError(f'Invalid table config {dict(table)!r}: {e}') from e
    return config
  raise TypeError(
    'tables must hold tf_reverb.Table objects, PriorityTableCheckpoint '
    f'protos or their JSON form (dicts); got {type(table).__name__}: '
    f'{table!r}'
  )


def server_config(tables: Sequence[TableConfig]) -> str:
  """The text-format ``ReverbServerConfig`` serving `tables` (port 0).

  The configs are checked by building the tables once here, so that a bad
  one raises in the caller rather than in every shard.

  Raises:
    ValueError: for no tables, duplicate names or an invalid table config
      (the message names the table).
    TypeError: as ``table_config``.
  """
  if isinstance(
    tables, (server_lib.Table, Mapping, checkpoint_pb2.PriorityTableCheckpoint)
  ):
    tables = [tables]
  configs = [table_config(table) for table in tables]
  if not configs:
    raise ValueError('A ReplayCluster needs at least one table.')
  names = [config.table_name for config in configs]
  duplicates = sorted({name for name in names if names.count(name) > 1})
  if duplicates:
    raise ValueError(f'Table names must be unique; repeated: {duplicates}')
  for config in configs:
    try:
      server_from_proto.tables_from_proto([config])
    except (ValueError, TypeError, NotImplementedError, RuntimeError) as e:
      raise ValueError(
        f'Invalid config of table {config.table_name!r}: {e}'
      ) from e
  return text_format.MessageToString(
    checkpoint_pb2.ReverbServerConfig(tables=configs, port=0)
  )


def grpc_target(addresses: Sequence[str]) -> str:
  """The gRPC target naming every ``host:port`` of `addresses`.

  IPv4 addresses give ``ipv4:a:p,b:q``, IPv6 ones ``ipv6:[a]:p,[b]:q``; a
  single address is returned as is.

  Raises:
    ValueError: for no addresses, or IPv4 and IPv6 addresses mixed (one gRPC
      target cannot hold both).
  """
  if not addresses:
    raise ValueError('No addresses.')
  if len(addresses) == 1:
    return addresses[0]
  versions = set()
  for address in addresses:
    host = address.rsplit(':', 1)[0].strip('[]')
    try:
      versions.add(ipaddress.ip_address(host).version)
    except ValueError as e:
      raise ValueError(f'{address!r} is not <ip>:<port>') from e
  if len(versions) > 1:
    raise ValueError(
      f'Shard addresses mix IPv4 and IPv6 ({addresses}); use '
      'shard_addresses with one client per shard.'
    )
  return ('ipv4:' if versions == {4} else 'ipv6:') + ','.join(addresses)


def _host_port(ip: str, port: int) -> str:
  return f'[{ip}]:{port}' if ':' in ip else f'{ip}:{port}'


def _die_with_parent_hook():
  """A preexec_fn making the child get SIGKILL when its parent thread dies."""
  if not sys.platform.startswith('linux'):
    return None
  prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork
  parent = os.getpid()
  pr_set_pdeathsig = 1

  def hook():
    prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl
      os._exit(1)  # pylint: disable=protected-access

  return hook


def _dying_with_parent(args: List[str]) -> Tuple[List[str], Any]:
  """`args` and a preexec_fn such that the child gets SIGKILL when the thread
  that starts it dies.

  util-linux's setpriv sets the parent-death signal and execs the server, so
  no Python runs between fork and exec (a preexec_fn in a multi-threaded Ray
  worker can deadlock); where setpriv is missing, the prctl hook does it.
  """
  setpriv = (
    shutil.which('setpriv') if sys.platform.startswith('linux') else None
  )
  if setpriv:
    return [setpriv, '--pdeathsig', 'KILL', '--'] + list(args), None
  return list(args), _die_with_parent_hook()


class _ServerProcess:
  """One ``reverb_server`` child, started and reaped by a keeper thread.

  The keeper thread forks the server (PR_SET_PDEATHSIG follows the forking
  thread, which lives as long as the server), copies its log to `log_path`,
  and calls `on_exit(returncode)` when it exits.
  """

  def __init__(self, args: List[str], log_path: str, on_exit):
    self._args = args
    self._log_path = log_path
    self._on_exit = on_exit
    self._started: 'queue.Queue[Any]' = queue.Queue()
    self.proc: Optional[subprocess.Popen] = None
    self.port = -1
    self.last_lines: List[str] = []
    self._thread = threading.Thread(
      target=self._keep, daemon=True, name='reverb_server keeper'
    )

  def start(self, timeout: float) -> bool:
    """Starts the server; True once it serves, False if it exited first.

    Raises:
      TimeoutError: if it neither served nor exited within `timeout`.
    """
    self._thread.start()
    try:
      return self._started.get(timeout=timeout)
    except queue.Empty:
      if self.proc is not None:
        self.proc.kill()
      raise TimeoutError(
        f'reverb_server did not start within {timeout}s; log: '
        f'{self.last_lines[-10:]}'
      ) from None

  def _keep(self) -> None:
    with open(self._log_path, 'a') as log:
      args, hook = _dying_with_parent(self._args)
      self.proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=hook,
      )
      started = False
      for line in self.proc.stderr:
        log.write(line)
        log.flush()
        self.last_lines = (self.last_lines + [line.rstrip()])[-50:]
        if not started and 'event=started' in line:
          for field in line.split():
            if field.startswith('port='):
              self.port = int(field[len('port=') :])
          started = True
          self._started.put(True)
      code = self.proc.wait()
      log.write(f'# reverb_server exited with {code}\n')
    if not started:
      self._started.put(False)
      return
    self._on_exit(code)


class _Shard:
  """The Ray actor owning one shard's ``reverb_server`` (see the module doc)."""

  def __init__(
    self,
    index: int,
    cluster_id: str,
    config_text: str,
    checkpoint_dir: Optional[str],
    checkpoint_interval_seconds: int,
    server_flags: Sequence[str],
    start_timeout: float,
    wal_durability: Optional[str] = None,
  ):
    self._index = index
    self._stopping = False
    self._state_dir = os.path.join(
      tempfile.gettempdir(), 'tf_reverb_ray', cluster_id, f'shard-{index}'
    )
    os.makedirs(self._state_dir, exist_ok=True)
    config_path = os.path.join(self._state_dir, 'config.textproto')
    with open(config_path, 'w') as f:
      f.write(config_text)
    self._checkpoint_dir = None
    args = [server_main.BINARY_PATH, f'--config_file={config_path}']
    if checkpoint_dir:
      self._checkpoint_dir = os.path.join(checkpoint_dir, f'shard-{index}')
      os.makedirs(self._checkpoint_dir, exist_ok=True)
      args.append(f'--checkpoint_dir={self._checkpoint_dir}')
      if checkpoint_interval_seconds:
        args.append(
          f'--checkpoint_interval_seconds={checkpoint_interval_seconds}'
        )
      if wal_durability:
        args.append(f'--wal_dir={checkpoint_dir}/shard-{index}-wal')
        args.append(f'--wal_durability={wal_durability}')
    args.extend(server_flags)
    port_path = os.path.join(self._state_dir, 'port')
    previous = 0
    if os.path.exists(port_path):
      with open(port_path) as f:
        previous = int(f.read().strip() or 0)
    log_path = os.path.join(self._state_dir, 'server.log')
    # Rebind the previous port (the old server may still be exiting), then
    # take any free one.
    attempts = [previous] * _REBIND_ATTEMPTS if previous else []
    attempts.append(0)
    self._server = None
    for attempt, port in enumerate(attempts):
      server = _ServerProcess(
        args + [f'--port={port}'], log_path, self._server_exited
      )
      if server.start(start_timeout):
        self._server = server
        break
      if port == 0:
        raise RuntimeError(
          f'reverb_server of shard {index} failed to start: '
          f'{server.last_lines[-10:]}'
        )
      if attempt + 1 < len(attempts) and attempts[attempt + 1] == port:
        time.sleep(_REBIND_PAUSE)  # retry pause, not synchronisation
    assert self._server is not None
    with open(port_path, 'w') as f:
      f.write(str(self._server.port))
    self._ip = ray.util.get_node_ip_address()
    with warnings.catch_warnings():  # Ray warns inside its own property
      warnings.simplefilter('ignore')
      self._reconstructed = bool(
        ray.get_runtime_context().was_current_actor_reconstructed
      )

  def _server_exited(self, code: int) -> None:
    if self._stopping:
      return
    # The server died under us: die too, so that Ray restarts this shard.
    sys.stderr.write(
      f'tf_reverb.ray: reverb_server of shard {self._index} '
      f'exited with {code}; exiting so Ray restarts the shard\n'
    )
    sys.stderr.flush()
    os._exit(1)  # pylint: disable=protected-access

  def info(self) -> Dict[str, Any]:
    """The shard's index, address, ip, port, server pid and restart flag."""
    return {
      'index': self._index,
      'address': _host_port(self._ip, self._server.port),
      'ip': self._ip,
      'port': self._server.port,
      'pid': self._server.proc.pid,
      'actor_pid': os.getpid(),
      'reconstructed': self._reconstructed,
      'checkpoint_dir': self._checkpoint_dir,
    }

  def stop(self, timeout: float) -> Optional[int]:
    """Stops the server gracefully (SIGTERM: final checkpoint); its exit code.

    Kills it if it has not exited after `timeout` seconds.
    """
    self._stopping = True
    proc = self._server.proc
    proc.send_signal(signal.SIGTERM)
    try:
      code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
      proc.kill()
      code = proc.wait()
    shutil.rmtree(self._state_dir, ignore_errors=True)
    return code


class ReplayCluster:
  """``num_shards`` reverb_server processes on Ray, one per actor.

  Needs a connected Ray (``ray.init()`` or ``ray.init(address=...)``; one is
  started with ``ray.init()`` if none is). See the module docstring for how
  shards are placed, restarted and found again.
  """

  def __init__(
    self,
    tables: Union[TableConfig, Sequence[TableConfig]],
    num_shards: int,
    checkpoint_dir: Optional[str] = None,
    resources_per_shard: Optional[Mapping[str, Any]] = None,
    *,
    max_restarts: int = -1,
    checkpoint_interval_seconds: int = 0,
    scheduling_strategy: Any = 'SPREAD',
    server_flags: Sequence[str] = (),
    start_timeout: float = DEFAULT_START_TIMEOUT,
    wal_durability: Optional[str] = None,
  ):
    """Starts the shards and waits until every one serves.

    Args:
      tables: the tables every shard serves: ``tf_reverb.Table`` objects (only
        their configuration is used), ``PriorityTableCheckpoint`` protos, or
        their JSON form as dicts.
      num_shards: number of servers.
      checkpoint_dir: if set, shard i checkpoints to and restores from
        ``<checkpoint_dir>/shard-<i>`` (shared storage on a multi-node
        cluster). Without it a restarted shard starts empty.
      resources_per_shard: Ray resources of each shard's actor
        (``num_cpus``, ``num_gpus``, ``memory``, ``resources``,
        ``accelerator_type``); default ``{'num_cpus': 1}``.
      max_restarts: how often Ray restarts a failed shard (-1: always).
      checkpoint_interval_seconds: if > 0 (and checkpoint_dir is set), every
        shard also checkpoints this often.
      scheduling_strategy: Ray's scheduling strategy of the actors
        (``'SPREAD'`` places them on different nodes where possible).
      server_flags: more ``reverb_server`` flags (e.g. ``--keep_checkpoints=3``).
      start_timeout: seconds each shard may take to start.
      wal_durability: ``'sync'`` or ``'async'``: each shard keeps a
        write-ahead log in ``<checkpoint_dir>/shard-<i>-wal`` (needs
        `checkpoint_dir`), so a shard killed and restarted loses no
        confirmed insert (docs/guides/durability.md); None: no log.

    Raises:
      ValueError: for num_shards < 1, bad resources or invalid tables.
      TypeError: for tables of the wrong type.
      RuntimeError: if a shard failed to start.
    """
    if not isinstance(num_shards, int) or num_shards < 1:
      raise ValueError(f'num_shards ({num_shards!r}) must be an integer >= 1')
    if max_restarts < -1:
      raise ValueError(f'max_restarts ({max_restarts}) must be >= -1')
    if checkpoint_interval_seconds < 0:
      raise ValueError(
        f'checkpoint_interval_seconds '
        f'({checkpoint_interval_seconds}) must be >= 0'
      )
    if wal_durability not in (None, 'sync', 'async'):
      raise ValueError(
        f"wal_durability ({wal_durability!r}) must be 'sync', 'async' or None"
      )
    if wal_durability and not checkpoint_dir:
      raise ValueError(
        'wal_durability needs checkpoint_dir (the log lives beside the '
        'checkpoints, which truncate it)'
      )
    resources = dict(
      {'num_cpus': 1} if resources_per_shard is None else resources_per_shard
    )
    unknown = sorted(set(resources) - set(_RESOURCE_KEYS))
    if unknown:
      raise ValueError(
        f'Unknown keys in resources_per_shard: {unknown}; '
        f'known: {list(_RESOURCE_KEYS)}'
      )
    config_text = server_config(tables)
    if not ray.is_initialized():
      ray.init()
    self._num_shards = num_shards
    self._checkpoint_dir = (
      os.path.abspath(checkpoint_dir) if checkpoint_dir else None
    )
    self._cluster_id = uuid.uuid4().hex[:12]
    self._start_timeout = start_timeout
    actor_class = ray.remote(_Shard).options(
      max_restarts=max_restarts,
      # Calls are idempotent queries; across a restart they wait for the
      # new incarnation instead of failing.
      max_task_retries=-1,
      scheduling_strategy=scheduling_strategy,
      **resources,
    )
    self._actors = [
      actor_class.remote(
        i,
        self._cluster_id,
        config_text,
        self._checkpoint_dir,
        checkpoint_interval_seconds,
        list(server_flags),
        start_timeout,
        wal_durability,
      )
      for i in range(num_shards)
    ]
    self._stopped = False
    try:
      self._infos = self._shard_infos()
    except Exception:
      self.shutdown()
      raise

  def _shard_infos(
    self, timeout: Optional[float] = None
  ) -> List[Dict[str, Any]]:
    timeout = timeout or self._start_timeout + 60
    try:
      return ray.get(
        [actor.info.remote() for actor in self._actors], timeout=timeout
      )
    except ray.exceptions.RayActorError as e:
      raise RuntimeError(f'A shard of the ReplayCluster failed: {e}') from e
    except ray.exceptions.GetTimeoutError as e:
      raise RuntimeError(
        f'Not every shard of the ReplayCluster answered within {timeout}s '
        '(is a shard waiting for resources_per_shard no node offers, or '
        'being restarted?); `ray status` shows pending demands.'
      ) from e

  def _check_running(self) -> None:
    if self._stopped:
      raise RuntimeError('The ReplayCluster was shut down.')

  @property
  def num_shards(self) -> int:
    """Number of shards."""
    return self._num_shards

  def shard_infos(
    self, timeout: Optional[float] = None
  ) -> List[Dict[str, Any]]:
    """Per shard (in order): index, address, ip, port, pid (of the server),
    actor_pid, reconstructed (a restarted incarnation) and checkpoint_dir.

    Asks the actors, so a shard being restarted by Ray is waited for (up to
    `timeout` seconds; default the start timeout).
    """
    self._check_running()
    self._infos = self._shard_infos(timeout)
    return self._infos

  @property
  def shard_addresses(self) -> List[str]:
    """The current ``ip:port`` of every shard, in shard order."""
    return [info['address'] for info in self.shard_infos()]

  @property
  def address(self) -> str:
    """The gRPC target naming every shard (``ipv4:a:p,b:q``).

    It stays valid across restarts on the same node (a restarted shard
    rebinds its port); compare it with an earlier value to know whether
    clients need re-creating.
    """
    return grpc_target(self.shard_addresses)

  @property
  def shard_pids(self) -> List[int]:
    """The process ids of the shards' reverb_server processes."""
    return [info['pid'] for info in self.shard_infos()]

  def shard_clients(self) -> List[client_lib.Client]:
    """One ``tf_reverb.Client`` per shard (current addresses)."""
    return [client_lib.Client(address) for address in self.shard_addresses]

  def server_info(
    self, timeout: Optional[int] = None
  ) -> List[Dict[str, reverb_types.TableInfo]]:
    """Each shard's ``Client.server_info()``, in shard order.

    Args:
      timeout: seconds each shard may take to answer (None: forever).

    Raises:
      DeadlineExceededError: when a shard did not answer in time.
    """
    return [client.server_info(timeout) for client in self.shard_clients()]

  def checkpoint(self, full: bool = False) -> List[str]:
    """Checkpoints every shard; returns the checkpoint paths in shard order.

    Args:
      full: self-contained checkpoints instead of incremental ones (see
        ``Client.checkpoint``).

    Raises:
      ValueError: if the cluster has no checkpoint_dir.
    """
    if not self._checkpoint_dir:
      raise ValueError(
        'This ReplayCluster has no checkpoint_dir; pass one to checkpoint.'
      )
    return [client.checkpoint(full) for client in self.shard_clients()]

  def shutdown(self, timeout: float = 60.0) -> None:
    """Stops every server (SIGTERM: a final checkpoint if checkpoint_dir is
    set) and its actor. Idempotent."""
    if self._stopped:
      return
    self._stopped = True
    pending = [
      actor.stop.options(max_task_retries=0).remote(timeout)
      for actor in self._actors
    ]
    try:
      ray.get(pending, timeout=timeout + 30)
    except (ray.exceptions.RayError, TimeoutError) as e:
      print(
        f'tf_reverb.ray: a shard did not stop cleanly: {e}', file=sys.stderr
      )
    for actor in self._actors:
      ray.kill(actor, no_restart=True)
    shutil.rmtree(
      os.path.join(tempfile.gettempdir(), 'tf_reverb_ray', self._cluster_id),
      ignore_errors=True,
    )

  def __enter__(self) -> 'ReplayCluster':
    return self

  def __exit__(self, *unused_exc_info) -> None:
    self.shutdown()

  def __repr__(self) -> str:
    state = (
      'stopped'
      if self._stopped
      else ','.join(info['address'] for info in self._infos)
    )
    return f'ReplayCluster(num_shards={self._num_shards}, {state})'
