"""Sharded server addresses: one target naming several replay servers.

Every client entry point (``Client``, its writers, ``TFClient`` and the ops,
``TrajectoryDataset``/``TimestepDataset``, ``NumpyIterator``) takes, besides
a plain ``"host:port"``:

* ``"ipv4:10.0.0.1:8000,10.0.0.2:8000"`` or ``"ipv6:[fd00::1]:8000,..."``;
* ``"dns:///replay.svc:8000"``: every address of the name is one shard (a
  headless Kubernetes Service); resolved by gRPC for streams and with
  getaddrinfo at each fan-out call;
* a list or tuple of ``"host:port"`` addresses, turned into one target by
  :func:`to_target`.

Streams are balanced by gRPC's ``round_robin`` policy over the shards that
pass grpc.health.v1 health checks; admin calls fan out to every shard. See
docs/concepts/sharding.md for the semantics.
"""

import ipaddress
import socket
from typing import List, Sequence, Union

from tf_reverb import pybind

__all__ = ['to_target', 'is_sharded']

Address = Union[str, Sequence[str]]


def _split_host_port(address: str) -> 'tuple[str, str]':
  if address.startswith('['):
    host, sep, port = address[1:].rpartition(']:')
  else:
    host, sep, port = address.rpartition(':')
  if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
    raise ValueError(
      f'Invalid server address {address!r}: expected "host:port" (IPv6 as '
      '"[addr]:port")'
    )
  return host, port


def _literal(
  host: str,
) -> 'ipaddress.IPv4Address | ipaddress.IPv6Address | None':
  try:
    return ipaddress.ip_address(host.split('%', 1)[0])
  except ValueError:
    return None


def _resolve(
  host: str, port: str, address: str
) -> 'tuple[str | None, str | None]':
  """The first IPv4 and the first IPv6 address of `host`, either may be None."""
  try:
    found = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
  except socket.gaierror as e:
    raise ValueError(
      f'Server address {address!r} of the list does not resolve: {e}'
    ) from e
  v4 = next((a[4][0] for a in found if a[0] == socket.AF_INET), None)
  v6 = next((a[4][0] for a in found if a[0] == socket.AF_INET6), None)
  return v4, v6


def to_target(address: Address) -> str:
  """Returns the gRPC target of `address`, checked.

  Args:
    address: a target string (returned as is once checked), or a list/tuple
      of ``"host:port"`` addresses, one per server. A one-element list is its
      element (the unsharded client). Longer lists become ``"ipv4:A:P,..."``
      (or ``"ipv6:..."``): IP literals are taken as they are; a name is
      resolved once, here, to its first IPv4 address (its first IPv6 address
      when some entry has no IPv4 one), so a name whose addresses change
      belongs in a ``"dns:///name:port"`` target instead.

  Raises:
    ValueError: for an empty list, a malformed address or sharded target, a
      name that does not resolve, entries with no address family in common,
      or one server named twice.
    TypeError: for anything but a string, list or tuple of strings.
  """
  if isinstance(address, bytes):
    address = address.decode()
  if isinstance(address, str):
    pybind.check_target(address)
    return address
  if not isinstance(address, (list, tuple)):
    raise TypeError(
      'A server address is a "host:port" string, a gRPC target or a list '
      f'of "host:port" strings, not {type(address).__name__}'
    )
  if not address:
    raise ValueError('The list of server addresses is empty')
  for entry in address:
    if not isinstance(entry, str):
      raise TypeError(
        f'Server addresses must be strings, not {type(entry).__name__} '
        f'({entry!r})'
      )
  if len(address) == 1:
    return to_target(address[0])
  v4: List['str | None'] = []
  v6: List['str | None'] = []
  ports: List[str] = []
  for entry in address:
    host, port = _split_host_port(entry)
    literal = _literal(host)
    if literal is not None:
      v4.append(str(literal) if literal.version == 4 else None)
      v6.append(host if literal.version == 6 else None)
    else:
      a4, a6 = _resolve(host, port, entry)
      v4.append(a4)
      v6.append(a6)
    ports.append(port)
  if all(v4):
    shards = [f'{host}:{port}' for host, port in zip(v4, ports)]
    scheme = 'ipv4'
  elif all(v6):
    shards = [f'[{host}]:{port}' for host, port in zip(v6, ports)]
    scheme = 'ipv6'
  else:
    raise ValueError(
      f'The server addresses {list(address)} mix IPv4-only and IPv6-only '
      'servers; one gRPC target can only list one address family'
    )
  target = f'{scheme}:{",".join(shards)}'
  pybind.check_target(target)  # e.g. one server named twice
  return target


def is_sharded(address: Address) -> bool:
  """Whether `address` names several servers (after :func:`to_target`)."""
  return pybind.check_target(to_target(address))
