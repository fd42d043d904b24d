"""Bearer-token authentication and the bind address, on real servers.

The binary server reads accepted tokens from --auth_token_file and re-reads
it on SIGHUP; the test waits for the server's own "auth_tokens_reloaded" log
line before using the rotated tokens (an event, not a sleep).
"""

import os
import signal
import subprocess
import sys

import grpc
import numpy as np
import pytest

import tf_reverb as reverb
from tf_reverb import errors

from conftest import SERVER_BINARY
from conftest import uniform_table
import tls_certs

OLD_TOKEN = 'old-token-7f3a9c'
NEW_TOKEN = 'new-token-2b8e41'
WRONG_TOKEN = 'wrong-token-d00d5e'


def write_tokens(path, *tokens):
  with open(path, 'w') as f:
    f.write('# accepted bearer tokens\n' + ''.join(t + '\n' for t in tokens))


@pytest.fixture
def token_file(tmp_path):
  path = str(tmp_path / 'tokens')
  write_tokens(path, OLD_TOKEN)
  return path


def wait_for_log(server, event: str) -> str:
  """Reads the binary's output until a line with `event=<event>`."""
  while True:
    line = server.process.stdout.readline()
    assert line, 'server exited before logging ' + event
    server.lines.append(line)
    if f'event={event}' in line:
      return line


def size(address: str, token: str) -> int:
  return (
    reverb.Client(address, auth_token=token)
    .server_info()['my_table']
    .current_size
  )


def test_token_accepted_and_rejected_binary_server(binary_server, token_file):
  server = binary_server(
    '--port=0', '--host=127.0.0.1', f'--auth_token_file={token_file}'
  )
  good = reverb.Client(server.address, auth_token=OLD_TOKEN)
  good.insert(np.arange(2), {'my_table': 1.0})
  assert next(good.sample('my_table'))[0].data[0].tolist() == [0, 1]
  for client in (
    reverb.Client(server.address, auth_token=WRONG_TOKEN),
    reverb.Client(server.address),
  ):
    with pytest.raises(errors.UnauthenticatedError) as raised:
      client.insert(np.arange(2), {'my_table': 1.0})
    assert WRONG_TOKEN not in str(raised.value)
    assert OLD_TOKEN not in str(raised.value)
    with pytest.raises(errors.UnauthenticatedError):
      client.server_info()
    with pytest.raises(errors.UnauthenticatedError):
      next(client.sample('my_table'))
    with pytest.raises(errors.UnauthenticatedError):
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        writer.append({'x': np.zeros(2)})
        writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
        writer.flush()
  assert size(server.address, OLD_TOKEN) == 1  # nothing written by the others
  assert server.terminate() == 0
  log = ''.join(server.lines)
  assert 'auth=token' in log
  for token in (OLD_TOKEN, WRONG_TOKEN):
    assert token not in log


def test_sighup_rotates_tokens_without_restart(binary_server, token_file):
  server = binary_server(
    '--port=0', '--host=127.0.0.1', f'--auth_token_file={token_file}'
  )
  old = reverb.Client(server.address, auth_token=OLD_TOKEN)
  old.insert(np.zeros(1), {'my_table': 1.0})
  write_tokens(token_file, NEW_TOKEN)
  server.process.send_signal(signal.SIGHUP)
  assert 'tokens=1' in wait_for_log(server, 'auth_tokens_reloaded')
  # Tokens are checked per call: a new call with the old token is refused
  # (streams opened before the rotation run until they end).
  with pytest.raises(errors.UnauthenticatedError):
    reverb.Client(server.address, auth_token=OLD_TOKEN).insert(
      np.zeros(1), {'my_table': 1.0}
    )
  del old
  assert size(server.address, NEW_TOKEN) == 1
  # A broken file keeps the tokens in force.
  write_tokens(token_file)
  server.process.send_signal(signal.SIGHUP)
  wait_for_log(server, 'auth_tokens_reload_failed')
  assert size(server.address, NEW_TOKEN) == 1
  assert server.terminate() == 0
  log = ''.join(server.lines)
  assert OLD_TOKEN not in log and NEW_TOKEN not in log


def test_in_process_server_with_tokens_and_reload(tmp_path, token_file):
  with reverb.Server(
    [uniform_table()], host='127.0.0.1', auth_token_file=token_file
  ) as server:
    address = f'localhost:{server.port}'
    # The in-process shortcut is off: samplers pass the token check too.
    with pytest.raises(errors.UnauthenticatedError):
      next(reverb.Client(address).sample('my_table'))
    server.localhost_client(auth_token=OLD_TOKEN).insert(
      np.zeros(1), {'my_table': 1.0}
    )
    write_tokens(token_file, NEW_TOKEN)
    assert server.reload_auth_tokens() == 1
    with pytest.raises(errors.UnauthenticatedError):
      reverb.Client(address, auth_token=OLD_TOKEN).server_info()
    assert size(address, NEW_TOKEN) == 1


def test_health_check_needs_no_token(binary_server, token_file):
  server = binary_server(
    '--port=0', '--host=127.0.0.1', f'--auth_token_file={token_file}'
  )
  with grpc.insecure_channel(server.address) as channel:
    check = channel.unary_unary(
      '/grpc.health.v1.Health/Check',
      request_serializer=lambda x: x,
      response_deserializer=lambda x: x,
    )
    assert check(b'', timeout=30) == b'\x08\x01'  # status: SERVING
    info = channel.unary_unary(
      '/deepmind.reverb.ReverbService/ServerInfo',
      request_serializer=lambda x: x,
      response_deserializer=lambda x: x,
    )
    with pytest.raises(grpc.RpcError) as raised:
      info(b'', timeout=30)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_tf_ops_and_dataset_take_the_token_from_the_environment(
  binary_server, token_file
):
  server = binary_server(
    '--port=0', '--host=127.0.0.1', f'--auth_token_file={token_file}'
  )
  code = f'''
import os
import tensorflow as tf
import tf_reverb as reverb
client = reverb.TFClient({server.address!r})
for i in range(2):
  client.insert([tf.constant([float(i)])], tables=tf.constant(['my_table']),
                priorities=tf.constant([1.0], dtype=tf.float64))
ds = reverb.TrajectoryDataset({server.address!r}, 'my_table', dtypes=(tf.float32,),
                              shapes=(tf.TensorShape([1, 1]),),
                              max_in_flight_samples_per_worker=1, max_samples=2)
assert len(list(ds)) == 2
os.environ['TF_REVERB_AUTH_TOKEN'] = {WRONG_TOKEN!r}
try:
  reverb.TFClient({server.address!r}, shared_name='fresh').insert(
      [tf.constant([1.0])], tables=tf.constant(['my_table']),
      priorities=tf.constant([1.0], dtype=tf.float64))
except tf.errors.UnauthenticatedError as e:
  assert {WRONG_TOKEN!r} not in str(e)
  print('refused')
print('ok')
'''
  env = dict(os.environ, TF_REVERB_AUTH_TOKEN=OLD_TOKEN)
  result = subprocess.run(
    [sys.executable, '-c', code],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0 and 'ok' in result.stdout, result.stderr
  assert 'refused' in result.stdout
  assert size(server.address, OLD_TOKEN) == 2


def test_tls_and_token_together(tmp_path, token_file):
  pki = tls_certs.make_pki(str(tmp_path))
  with reverb.Server(
    [uniform_table()],
    auth_token_file=token_file,
    credentials=reverb.ServerCredentials.from_files(
      pki.server_cert, pki.server_key
    ),
  ) as server:
    address = f'localhost:{server.port}'
    credentials = reverb.ChannelCredentials.from_files(pki.ca)
    reverb.Client(
      address, credentials=credentials, auth_token=OLD_TOKEN
    ).insert(np.zeros(1), {'my_table': 1.0})
    with pytest.raises(errors.UnauthenticatedError):
      reverb.Client(
        address, credentials=credentials, auth_token=WRONG_TOKEN
      ).insert(np.zeros(1), {'my_table': 1.0})
    assert (
      reverb.Client(address, credentials=credentials, auth_token=OLD_TOKEN)
      .server_info()['my_table']
      .current_size
      == 1
    )


def test_tokens_without_tls_need_a_loopback_host(token_file):
  result = subprocess.run(
    [SERVER_BINARY, '--port=0', f'--auth_token_file={token_file}'],
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert result.returncode == 1
  assert 'loopback' in result.stderr and OLD_TOKEN not in result.stderr
  with pytest.raises(ValueError, match='loopback'):
    reverb.Client('192.0.2.1:80', auth_token=OLD_TOKEN)


def listening_addresses(port: int):
  """Local addresses (hex, as in /proc/net/tcp*) in LISTEN state on `port`.

  gRPC may bind an IPv4 address as its v4-mapped IPv6 form
  (::ffff:127.0.0.1), which accepts the same connections: given as IPv4.
  """
  found = []
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      for line in f.readlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        host, hex_port = local.split(':')
        if int(hex_port, 16) == port and state == '0A':
          v4_mapped = '0000000000000000FFFF0000'
          found.append(
            host[len(v4_mapped) :] if host.startswith(v4_mapped) else host
          )
  return found


def test_bind_address_binary_and_in_process(binary_server):
  loopback = binary_server('--port=0', '--host=127.0.0.1')
  assert listening_addresses(loopback.port) == ['0100007F']
  assert loopback.terminate() == 0
  assert 'event=warning' not in ''.join(loopback.lines)
  everywhere = binary_server('--port=0')
  assert listening_addresses(everywhere.port) == ['0' * 32]  # [::]
  warning = wait_for_log(everywhere, 'warning')
  assert 'without TLS' in warning
  with reverb.Server([uniform_table()], host='127.0.0.1') as server:
    assert listening_addresses(server.port) == ['0100007F']
    reverb.Client(f'127.0.0.1:{server.port}').insert(
      np.zeros(1), {'my_table': 1.0}
    )
