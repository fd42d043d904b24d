"""TLS credentials of servers and clients, and bearer tokens.

``ServerCredentials`` make a ``Server`` speak TLS (mutual TLS with a client
CA); ``ChannelCredentials`` make a ``Client`` (and everything built on one:
writers, ``TFClient``, the datasets, ``NumpyIterator``) verify a TLS server
and optionally present a client certificate. Both hold PEM bytes, as gRPC's
own ``grpc.ssl_*_credentials`` do; ``from_files`` reads them.

Clients that are given only an address (the TF ops and dataset ops, also in
other processes such as tf.data service workers) find their security in
this order: what a ``Client``, ``TFClient`` or dataset of this process was
given for exactly that address string (``register``; ``unregister`` forgets
it), else the environment:

* ``TF_REVERB_TLS_ROOT_CA_FILE``: PEM root CA; setting it turns TLS on.
* ``TF_REVERB_TLS_CLIENT_CERT_FILE``, ``TF_REVERB_TLS_CLIENT_KEY_FILE``:
  client certificate and key (mutual TLS).
* ``TF_REVERB_TLS_SERVER_NAME``: the name to verify in the server's
  certificate instead of the address's host.
* ``TF_REVERB_AUTH_TOKEN``: bearer token sent on every call.

A token travels as ``authorization: Bearer <token>`` call metadata. Without
TLS it is only ever sent to a loopback address (gRPC's local credentials), so
it never crosses a network in clear text.
"""

import dataclasses
import os
from typing import Optional

from tf_reverb import pybind

__all__ = ['ServerCredentials', 'ChannelCredentials', 'register', 'unregister']


def _read(path: Optional[str], what: str) -> Optional[bytes]:
  if path is None:
    return None
  try:
    with open(path, 'rb') as f:
      return f.read()
  except OSError as e:
    raise ValueError(f'Cannot read {what} {path}: {e.strerror}') from None


@dataclasses.dataclass(frozen=True)
class ServerCredentials:
  """TLS of a server: its certificate chain and key, optionally a client CA.

  Attributes:
    certificate_chain: PEM certificate chain of the server.
    private_key: PEM private key of that certificate.
    client_ca: PEM CA; when set, clients must present a certificate it
      signed (mutual TLS) or their handshake is refused.
  """

  certificate_chain: bytes
  private_key: bytes = dataclasses.field(repr=False)
  client_ca: Optional[bytes] = None

  @classmethod
  def from_files(
    cls, cert_file: str, key_file: str, client_ca_file: Optional[str] = None
  ) -> 'ServerCredentials':
    """Reads the PEM files (ValueError naming a file that cannot be read)."""
    return cls(
      certificate_chain=_read(cert_file, 'the TLS certificate'),
      private_key=_read(key_file, 'the TLS private key'),
      client_ca=_read(client_ca_file, 'the TLS client CA'),
    )


@dataclasses.dataclass(frozen=True)
class ChannelCredentials:
  """TLS of a client: the roots it trusts, optionally its own certificate.

  Attributes:
    root_certificates: PEM CA(s) that signed the server's certificate; None
      trusts the system's roots.
    certificate_chain: PEM client certificate, for mutual TLS.
    private_key: PEM private key of `certificate_chain`.
    server_name: the name to verify in the server's certificate instead of
      the host of the address (e.g. when connecting by IP).
  """

  root_certificates: Optional[bytes] = None
  certificate_chain: Optional[bytes] = None
  private_key: Optional[bytes] = dataclasses.field(default=None, repr=False)
  server_name: Optional[str] = None

  @classmethod
  def from_files(
    cls,
    root_ca_file: Optional[str] = None,
    cert_file: Optional[str] = None,
    key_file: Optional[str] = None,
    server_name: Optional[str] = None,
  ) -> 'ChannelCredentials':
    """Reads the PEM files (ValueError naming a file that cannot be read)."""
    return cls(
      root_certificates=_read(root_ca_file, 'the TLS root CA'),
      certificate_chain=_read(cert_file, 'the TLS client certificate'),
      private_key=_read(key_file, 'the TLS client key'),
      server_name=server_name,
    )

  @classmethod
  def from_environment(cls) -> Optional['ChannelCredentials']:
    """The ``TF_REVERB_TLS_*`` environment's credentials; None without TLS."""
    root = os.environ.get('TF_REVERB_TLS_ROOT_CA_FILE')
    if not root:
      return None
    return cls.from_files(
      root_ca_file=root,
      cert_file=os.environ.get('TF_REVERB_TLS_CLIENT_CERT_FILE') or None,
      key_file=os.environ.get('TF_REVERB_TLS_CLIENT_KEY_FILE') or None,
      server_name=os.environ.get('TF_REVERB_TLS_SERVER_NAME') or None,
    )


def register(
  server_address: str,
  credentials: Optional[ChannelCredentials] = None,
  auth_token: Optional[str] = None,
) -> None:
  """Makes every client of `server_address` in this process use these.

  Clients made from an address alone (TF ops, datasets) then connect with
  them. What is not given comes from the environment (module docstring).
  ``Client``, ``TFClient`` and the datasets call this when given
  `credentials` or `auth_token`; call it yourself for other paths.

  Raises:
    TypeError: for credentials of the wrong type.
    ValueError: for a client certificate without its key (or the reverse),
      or a token without TLS to a non-loopback address.
  """
  if credentials is not None and not isinstance(
    credentials, ChannelCredentials
  ):
    raise TypeError(
      'credentials must be a tf_reverb.ChannelCredentials, got '
      f'{type(credentials).__name__}'
    )
  if credentials is None:
    credentials = ChannelCredentials.from_environment()
  if auth_token is None:
    auth_token = os.environ.get('TF_REVERB_AUTH_TOKEN', '').strip()
  elif not isinstance(auth_token, str) or not auth_token.strip():
    raise ValueError('auth_token must be a non-empty string')
  tls = credentials is not None
  credentials = credentials or ChannelCredentials()
  pybind.register_channel_security(
    address=server_address,
    tls=tls,
    root_certificates=credentials.root_certificates or b'',
    certificate_chain=credentials.certificate_chain or b'',
    private_key=credentials.private_key or b'',
    server_name=credentials.server_name or '',
    auth_token=auth_token.strip(),
  )


def unregister(server_address: str) -> None:
  """Forgets what ``register`` (or a client) registered for `server_address`.

  Clients made from that address alone use the environment again, as if
  nothing had been registered. Use it when the server at an address changes
  its security in the lifetime of a process, say a server restarted without
  TLS on the port a TLS one used. Nothing happens when nothing is
  registered for the address.

  Raises:
    TypeError: when `server_address` is not a string.
  """
  if not isinstance(server_address, str):
    raise TypeError(
      f'server_address must be a str, got {type(server_address).__name__}'
    )
  pybind.unregister_channel_security(address=server_address)


def register_if_given(
  server_address: str,
  credentials: Optional[ChannelCredentials],
  auth_token: Optional[str],
) -> None:
  """``register`` when `credentials` or `auth_token` is given, else nothing."""
  if credentials is not None or auth_token is not None:
    register(server_address, credentials, auth_token)
