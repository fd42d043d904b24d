"""Real X.509 certificates for the TLS tests, made with the openssl command.

``make_pki(directory)`` writes a CA, a server certificate it signed (for
localhost, 127.0.0.1 and ::1), a client certificate it signed, and a second,
unrelated CA with its own server certificate (the "wrong CA" cases).
"""

import dataclasses
import os
import subprocess


@dataclasses.dataclass(frozen=True)
class Pki:
  """Paths of the PEM files ``make_pki`` wrote."""

  ca: str
  server_cert: str
  server_key: str
  client_cert: str
  client_key: str
  other_ca: str
  other_client_cert: str
  other_client_key: str

  def read(self, name: str) -> bytes:
    """The bytes of the file named by attribute `name`."""
    with open(getattr(self, name), 'rb') as f:
      return f.read()


def _openssl(*args: str) -> None:
  subprocess.run(
    ['openssl', *args], check=True, capture_output=True, timeout=60
  )


def _ca(directory: str, name: str) -> tuple:
  key, cert = (
    os.path.join(directory, f'{name}.key'),
    os.path.join(directory, f'{name}.pem'),
  )
  _openssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    f'/CN={name}',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  )
  return key, cert


def _leaf(
  directory: str, name: str, ca_key: str, ca_cert: str, usage: str
) -> tuple:
  key, csr, cert, ext = (
    os.path.join(directory, f'{name}{suffix}')
    for suffix in ('.key', '.csr', '.pem', '.ext')
  )
  with open(ext, 'w') as f:
    f.write(
      'basicConstraints=CA:FALSE\n'
      'keyUsage=critical,digitalSignature,keyEncipherment\n'
      f'extendedKeyUsage={usage}\n'
      'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n'
    )
  _openssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    f'/CN={name}',
  )
  _openssl(
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca_cert,
    '-CAkey',
    ca_key,
    '-CAcreateserial',
    '-out',
    cert,
    '-days',
    '2',
    '-extfile',
    ext,
  )
  return cert, key


def make_pki(directory: str) -> Pki:
  """Writes the certificates into `directory` (see the module docstring)."""
  ca_key, ca = _ca(directory, 'test-ca')
  server_cert, server_key = _leaf(directory, 'server', ca_key, ca, 'serverAuth')
  client_cert, client_key = _leaf(directory, 'client', ca_key, ca, 'clientAuth')
  other_key, other_ca = _ca(directory, 'other-ca')
  other_client_cert, other_client_key = _leaf(
    directory, 'other-client', other_key, other_ca, 'clientAuth'
  )
  return Pki(
    ca=ca,
    server_cert=server_cert,
    server_key=server_key,
    client_cert=client_cert,
    client_key=client_key,
    other_ca=other_ca,
    other_client_cert=other_client_cert,
    other_client_key=other_client_key,
  )
