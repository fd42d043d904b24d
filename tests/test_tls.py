"""TLS and mutual TLS on real servers (binary and in-process), real sockets.

Certificates are made per module by openssl (tests/tls_certs.py). Every call
that must fail does so at once with a clear ``TransportSecurityError``; a
thread join bounds each such call as a hang guard only.
"""

import os
import subprocess
import sys
import threading
from typing import Any, Callable

import numpy as np
import pytest

import tf_reverb as reverb
from tf_reverb import errors

from conftest import uniform_table
import tls_certs

# Hang guard of a call that must fail fast (it returns in well under 1 s).
HANG_GUARD_S = 60


@pytest.fixture(scope='module')
def pki(tmp_path_factory):
  return tls_certs.make_pki(str(tmp_path_factory.mktemp('pki')))


def call_guarded(function: Callable[[], Any]) -> Any:
  """Runs `function` in a thread; returns its result or raises its error."""
  outcome = {}

  def run():
    try:
      outcome['value'] = function()
    except BaseException as e:  # pylint: disable=broad-except
      outcome['error'] = e

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  thread.join(HANG_GUARD_S)
  assert not thread.is_alive(), 'the call hung instead of failing fast'
  if 'error' in outcome:
    raise outcome['error']
  return outcome['value']


def tls_server(pki, mutual=False, **kwargs) -> reverb.Server:
  return reverb.Server(
    [uniform_table()],
    credentials=reverb.ServerCredentials.from_files(
      pki.server_cert, pki.server_key, pki.ca if mutual else None
    ),
    **kwargs,
  )


def round_trip(client: reverb.Client) -> None:
  """Inserts through both write paths, then samples what was written."""
  client.insert(np.arange(3, dtype=np.float32), {'my_table': 1.0})
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append({'x': np.arange(3, dtype=np.float32)})
    writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
    writer.flush()
  assert client.server_info()['my_table'].current_size == 2
  sample = next(client.sample('my_table', num_samples=1))
  np.testing.assert_array_equal(
    sample[0].data[0], np.arange(3, dtype=np.float32)
  )


def test_tls_round_trip_in_process_server(pki):
  with tls_server(pki, host='127.0.0.1') as server:
    client = reverb.Client(
      f'localhost:{server.port}',
      credentials=reverb.ChannelCredentials.from_files(pki.ca),
    )
    round_trip(client)
    it = reverb.NumpyIterator(
      f'localhost:{server.port}', 'my_table', batch_size=2, max_samples=2
    )
    batches = list(it)
    assert len(batches) == 1 and batches[0].data[0].shape == (2, 1, 3)


def test_mutual_tls_round_trip_binary_server(pki, binary_server):
  server = binary_server(
    '--port=0',
    f'--tls_cert_file={pki.server_cert}',
    f'--tls_key_file={pki.server_key}',
    f'--tls_client_ca_file={pki.ca}',
  )
  assert 'tls=mutual' in ''.join(server.lines)
  client = reverb.Client(
    server.address,
    credentials=reverb.ChannelCredentials(
      root_certificates=pki.read('ca'),
      certificate_chain=pki.read('client_cert'),
      private_key=pki.read('client_key'),
    ),
  )
  round_trip(client)


@pytest.mark.parametrize('kind', ['no_client_cert', 'client_cert_of_other_ca'])
def test_mutual_tls_refuses_clients_without_a_trusted_certificate(
  pki, binary_server, kind
):
  server = binary_server(
    '--port=0',
    f'--tls_cert_file={pki.server_cert}',
    f'--tls_key_file={pki.server_key}',
    f'--tls_client_ca_file={pki.ca}',
  )
  credentials = (
    reverb.ChannelCredentials.from_files(pki.ca)
    if kind == 'no_client_cert'
    else reverb.ChannelCredentials.from_files(
      pki.ca, pki.other_client_cert, pki.other_client_key
    )
  )
  client = reverb.Client(server.address, credentials=credentials)
  with pytest.raises(errors.TransportSecurityError, match='TLS'):
    call_guarded(lambda: client.insert(np.zeros(2), {'my_table': 1.0}))
  authorised = reverb.Client(
    server.address,
    credentials=reverb.ChannelCredentials.from_files(
      pki.ca, pki.client_cert, pki.client_key
    ),
  )
  assert authorised.server_info()['my_table'].current_size == 0


def test_wrong_ca_fails_fast(pki):
  with tls_server(pki) as server:
    client = reverb.Client(
      f'localhost:{server.port}',
      credentials=reverb.ChannelCredentials.from_files(pki.other_ca),
    )
    with pytest.raises(errors.TransportSecurityError) as raised:
      call_guarded(lambda: client.server_info())  # no timeout: waits for ready
    assert 'this client uses TLS' in str(raised.value)
    assert isinstance(raised.value, RuntimeError)


def test_plaintext_client_against_tls_server_fails_fast(pki, binary_server):
  server = binary_server(
    '--port=0',
    f'--tls_cert_file={pki.server_cert}',
    f'--tls_key_file={pki.server_key}',
  )
  client = reverb.Client(server.address)
  with pytest.raises(errors.TransportSecurityError, match='plaintext'):
    call_guarded(lambda: client.server_info())
  with pytest.raises(errors.TransportSecurityError):
    call_guarded(lambda: next(client.sample('my_table', num_samples=1)))

  def write():
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      writer.append({'x': np.zeros(2)})
      writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1]})
      writer.flush()

  with pytest.raises(errors.TransportSecurityError):
    call_guarded(write)


def test_tls_client_against_plaintext_server_fails_fast(pki, binary_server):
  server = binary_server('--port=0')
  client = reverb.Client(
    server.address, credentials=reverb.ChannelCredentials.from_files(pki.ca)
  )
  with pytest.raises(
    errors.TransportSecurityError, match='this client uses TLS'
  ):
    call_guarded(lambda: client.insert(np.zeros(2), {'my_table': 1.0}))


def test_unregister_gives_an_address_back_to_the_environment(
  pki, binary_server
):
  """A plaintext server on an address a TLS client registered (say a server
  restarted without TLS on the same port): clients of that address use TLS
  until the address is unregistered, then the environment (plaintext)."""
  server = binary_server('--port=0')
  reverb.Client(
    server.address, credentials=reverb.ChannelCredentials.from_files(pki.ca)
  )  # registers TLS for the address
  inherits = reverb.Client(server.address)
  with pytest.raises(
    errors.TransportSecurityError, match='this client uses TLS'
  ):
    call_guarded(lambda: inherits.server_info())
  reverb.credentials.unregister(server.address)
  reverb.credentials.unregister(server.address)  # nothing left: a no-op
  round_trip(reverb.Client(server.address))
  with pytest.raises(TypeError, match='server_address'):
    reverb.credentials.unregister(None)


def test_waiting_for_a_tls_server_that_is_not_up_yet_still_times_out(pki):
  import portpicker  # pylint: disable=g-import-not-at-top

  client = reverb.Client(
    f'localhost:{portpicker.pick_unused_port()}',
    credentials=reverb.ChannelCredentials.from_files(pki.ca),
  )
  with pytest.raises(errors.DeadlineExceededError):
    call_guarded(lambda: client.server_info(timeout=1))


def test_tf_ops_and_datasets_over_tls_from_the_environment(pki, binary_server):
  """TFClient and TrajectoryDataset in a fresh process, TLS from env vars."""
  server = binary_server(
    '--port=0',
    f'--tls_cert_file={pki.server_cert}',
    f'--tls_key_file={pki.server_key}',
    f'--tls_client_ca_file={pki.ca}',
  )
  code = f'''
import tensorflow as tf
import tf_reverb as reverb
client = reverb.TFClient({server.address!r})
for i in range(3):
  client.insert([tf.constant([float(i), 1.0])], tables=tf.constant(['my_table']),
                priorities=tf.constant([1.0], dtype=tf.float64))
sample = client.sample('my_table', [tf.float32])
assert sample.data[0].shape == (2,), sample
ds = reverb.TrajectoryDataset({server.address!r}, 'my_table', dtypes=(tf.float32,),
                              shapes=(tf.TensorShape([1, 2]),),
                              max_in_flight_samples_per_worker=2, max_samples=4)
assert len(list(ds)) == 4
print('ok')
'''
  env = dict(
    os.environ,
    TF_REVERB_TLS_ROOT_CA_FILE=pki.ca,
    TF_REVERB_TLS_CLIENT_CERT_FILE=pki.client_cert,
    TF_REVERB_TLS_CLIENT_KEY_FILE=pki.client_key,
  )
  result = subprocess.run(
    [sys.executable, '-c', code],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0 and 'ok' in result.stdout, result.stderr


def test_dataset_with_explicit_credentials_in_process(pki):
  tf = pytest.importorskip('tensorflow')
  with tls_server(pki, mutual=True, host='127.0.0.1') as server:
    address = f'localhost:{server.port}'
    credentials = reverb.ChannelCredentials.from_files(
      pki.ca, pki.client_cert, pki.client_key
    )
    client = reverb.Client(address, credentials=credentials)
    for i in range(3):
      client.insert(np.full(2, i, dtype=np.float32), {'my_table': 1.0})
    ds = reverb.TrajectoryDataset(
      address,
      'my_table',
      dtypes=(tf.float32,),
      shapes=(tf.TensorShape([1, 2]),),
      max_in_flight_samples_per_worker=1,
      max_samples=3,
      credentials=credentials,
    )
    assert len(list(ds)) == 3
    timesteps = reverb.TimestepDataset(
      address,
      'my_table',
      dtypes=(tf.float32,),
      shapes=(tf.TensorShape([2]),),
      max_in_flight_samples_per_worker=1,
      max_samples=2,
    )  # registered above
    assert len(list(timesteps)) == 2
    tf_client = reverb.TFClient(address, credentials=credentials)
    tf_client.insert(
      [tf.constant([7.0, 7.0])],
      tables=tf.constant(['my_table']),
      priorities=tf.constant([1.0], dtype=tf.float64),
    )
    assert client.server_info()['my_table'].current_size == 4
    assert tf_client.sample('my_table', [tf.float32]).data[0].shape == (2,)


def test_bad_credentials_are_clear_errors(pki, tmp_path):
  with pytest.raises(ValueError, match='cannot read|Cannot read'):
    reverb.ChannelCredentials.from_files(str(tmp_path / 'missing.pem'))
  with pytest.raises(ValueError, match='private key'):
    reverb.Client(
      'localhost:1',
      credentials=reverb.ChannelCredentials(
        root_certificates=pki.read('ca'),
        certificate_chain=pki.read('client_cert'),
      ),
    )
  with pytest.raises(TypeError, match='ServerCredentials'):
    reverb.Server([uniform_table()], credentials='cert.pem')
  bad = tmp_path / 'bad.pem'
  bad.write_text('not pem')
  with pytest.raises(ValueError, match='PEM'):
    reverb.Server(
      [uniform_table()],
      credentials=reverb.ServerCredentials(
        certificate_chain=bad.read_bytes(), private_key=pki.read('server_key')
      ),
    )
  result = subprocess.run(
    [
      os.path.join(os.path.dirname(reverb.__file__), 'bin', 'reverb_server'),
      '--port=0',
      f'--tls_cert_file={pki.server_cert}',
    ],
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert result.returncode != 0
  assert 'private key' in result.stderr


def test_sharded_target_over_tls_and_token_binary_servers(
  pki, binary_server, tmp_path
):
  """An ipv4: target over two TLS+token reverb_server binaries.

  The credentials are registered for the whole target string; writers land
  on both shards, server_info's fan-out (per-shard channels with the same
  credentials) sums both, and a wrong token or no TLS fails clearly on the
  sharded client too.
  """
  token_file = tmp_path / 'tokens'
  token_file.write_text('shard-token-5c1e\n')
  shards = [
    binary_server(
      '--port=0',
      '--host=127.0.0.1',
      f'--tls_cert_file={pki.server_cert}',
      f'--tls_key_file={pki.server_key}',
      f'--auth_token_file={token_file}',
    )
    for _ in range(2)
  ]
  target = 'ipv4:' + ','.join(s.address for s in shards)
  credentials = reverb.ChannelCredentials.from_files(
    pki.ca, server_name='localhost'
  )
  client = reverb.Client(
    [s.address for s in shards],
    credentials=credentials,
    auth_token='shard-token-5c1e',
  )
  assert client.sharded and client.server_address == target
  assert (
    call_guarded(lambda: client.server_info(timeout=60))[
      'my_table'
    ].current_size
    == 0
  )
  writers = [client.trajectory_writer(num_keep_alive_refs=1) for _ in range(10)]
  for i, writer in enumerate(writers):
    writer.append({'x': np.full(2, i, dtype=np.float32)})
    writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
  for writer in writers:
    writer.flush(timeout_ms=60_000)
    writer.close()
  sizes = [
    reverb.Client(
      s.address, credentials=credentials, auth_token='shard-token-5c1e'
    )
    .server_info(timeout=60)['my_table']
    .current_size
    for s in shards
  ]
  assert sum(sizes) == 10 and min(sizes) > 0, sizes
  assert client.server_info(timeout=60)['my_table'].current_size == 10
  per_shard = client.shard_server_info(timeout=60)
  assert [
    per_shard[s.address]['my_table'].current_size for s in shards
  ] == sizes

  wrong = reverb.Client(
    target, credentials=credentials, auth_token='wrong-token-9a7b'
  )
  with pytest.raises(errors.UnauthenticatedError):
    call_guarded(lambda: wrong.server_info(timeout=60))
  with pytest.raises(errors.UnauthenticatedError):
    call_guarded(
      lambda: wrong.insert(np.zeros(2, dtype=np.float32), {'my_table': 1.0})
    )
  with pytest.raises(errors.UnauthenticatedError):
    call_guarded(lambda: wrong.reset('my_table'))

  # A different target string (same shards, other order) has nothing
  # registered: plaintext, which is a clear mismatch, never a hang.
  plaintext = reverb.Client(
    'ipv4:' + ','.join(s.address for s in reversed(shards))
  )
  with pytest.raises(errors.TransportSecurityError):
    call_guarded(lambda: plaintext.server_info())
  with pytest.raises(errors.TransportSecurityError):
    call_guarded(lambda: plaintext.reset('my_table'))
