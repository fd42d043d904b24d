"""The Bazel-built reverb_server binary, driven as a subprocess."""

import json
import signal
import subprocess

import numpy as np
import pytest

import tf_reverb as reverb
from conftest import SERVER_BINARY

_TEXT_CONFIG = '''
port: 0
tables {
  table_name: "replay"
  sampler { prioritized { priority_exponent: 0.8 } }
  remover { fifo: true }
  max_size: 100
  rate_limiter { samples_per_insert: 1 min_size_to_sample: 1
                 min_diff: -1e9 max_diff: 1e9 }
}
tables {
  table_name: "queue"
  sampler { fifo: true }
  remover { fifo: true }
  max_size: 10
  max_times_sampled: 1
  rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 min_diff: 0 max_diff: 10 }
}
'''


def test_default_config_serves_my_table(binary_server):
  server = binary_server('--port=0')
  info = reverb.Client(server.address).server_info(timeout=60)
  assert list(info) == ['my_table']
  assert info['my_table'].sampler_options.uniform
  assert server.terminate() == 0
  assert any('event=stopped' in line for line in server.lines)


def test_text_config_file_round_trip(binary_server, tmp_path):
  path = tmp_path / 'server.textproto'
  path.write_text(_TEXT_CONFIG)
  server = binary_server(f'--config_file={path}')
  client = reverb.Client(server.address)
  info = client.server_info(timeout=60)
  assert sorted(info) == ['queue', 'replay']
  assert info['replay'].sampler_options.prioritized.priority_exponent == 0.8
  assert info['queue'].max_times_sampled == 1
  client.insert(np.arange(4), {'replay': 2.0, 'queue': 1.0})
  sample = next(client.sample('replay', emit_timesteps=False))
  assert sample.data[0].tolist() == [[0, 1, 2, 3]]
  assert (
    next(client.sample('queue', emit_timesteps=False)).info.times_sampled == 1
  )
  assert client.server_info()['queue'].current_size == 0
  assert server.terminate(signal.SIGINT) == 0


def test_json_config_and_port_flag(binary_server):
  config = {
    'port': 1,
    'tables': [
      {
        'table_name': 'j',
        'sampler': {'lifo': True},
        'remover': {'fifo': True},
        'max_size': 5,
        'rate_limiter': {
          'samples_per_insert': 1,
          'min_size_to_sample': 1,
          'min_diff': -1,
          'max_diff': 100,
        },
      }
    ],
  }
  server = binary_server(f'--config={json.dumps(config)}', '--port=0')
  assert server.port != 1
  info = reverb.Client(server.address).server_info(timeout=60)
  assert info['j'].sampler_options.lifo


def test_sigterm_cancels_blocked_clients(binary_server):
  server = binary_server('--port=0')
  client = reverb.Client(server.address)
  client.server_info(timeout=60)
  import threading  # pylint: disable=g-import-not-at-top

  outcome = []

  def sample():
    # A raw SampleStream: the C++ sampler behind Client.sample retries a
    # stopped server (it may come back), so it would not show the CANCELLED.
    import grpc  # pylint: disable=g-import-not-at-top
    from tf_reverb.proto import reverb_service_pb2  # pylint: disable=g-import-not-at-top
    from tf_reverb.proto import reverb_service_pb2_grpc  # pylint: disable=g-import-not-at-top

    with grpc.insecure_channel(server.address) as channel:
      stub = reverb_service_pb2_grpc.ReverbServiceStub(channel)
      request = reverb_service_pb2.SampleStreamRequest(
        table='my_table', num_samples=1
      )

      def requests():
        yield request
        sent.set()  # gRPC asks for more once the request went out

      try:
        for _ in stub.SampleStream(requests(), timeout=90):
          pass
      except grpc.RpcError as e:
        outcome.append(e)

  sent = threading.Event()
  thread = threading.Thread(target=sample)
  thread.start()
  # SIGTERM once the request is on its way, not after a fixed pause (which a
  # busy machine could outlast before the stream even started).
  assert sent.wait(timeout=120)
  assert server.terminate(timeout=120) == 0
  thread.join(timeout=120)  # the call's own deadline ends it sooner
  assert outcome, 'the blocked sample did not fail when the server stopped'
  assert outcome[0].code().name in ('CANCELLED', 'UNAVAILABLE'), outcome[0]


@pytest.mark.parametrize(
  'config, message',
  [
    ('tables { table_name: "t" max_size: 0 }', 'Table \'t\''),
    ('tables { nonsense: 1 }', 'nonsense'),
  ],
)
def test_bad_config_exits_with_a_clear_error(config, message):
  result = subprocess.run(
    [SERVER_BINARY, f'--config={config}', '--port=0'],
    capture_output=True,
    text=True,
    timeout=30,
  )
  assert result.returncode != 0
  assert 'event=error' in result.stderr and message in result.stderr


def test_help_describes_the_binary_and_its_flags():
  result = subprocess.run(
    [SERVER_BINARY, '--help'], capture_output=True, text=True, timeout=30
  )
  out = result.stdout + result.stderr
  assert 'standalone tf_reverb replay server' in out
  assert '--checkpoint_dir' in out and '--drain_seconds' in out
  assert '--metrics_port' in out and '--log_format' in out
  assert 'never called' not in out  # absl's warning without a usage message


def test_console_script_runs_the_binary(tmp_path):
  import shutil  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top

  script = shutil.which('reverb_server', path=os.path.dirname(sys.executable))
  assert script, 'reverb_server console script is not installed'
  result = subprocess.run(
    [script, '--config=tables { table_name: "t" }', '--port=0'],
    capture_output=True,
    text=True,
    timeout=30,
  )
  # The table has no selectors: the binary itself must reject it.
  assert result.returncode != 0 and "Table 't'" in result.stderr


def test_client_insert_survives_a_server_restart_on_the_same_port(
  binary_server,
):
  import portpicker  # pylint: disable=g-import-not-at-top

  port = portpicker.pick_unused_port()
  first = binary_server(f'--port={port}')
  client = reverb.Client(first.address)
  client.insert(1, {'my_table': 1.0})
  first.process.kill()
  first.process.wait()
  binary_server(f'--port={port}')
  for value in range(2, 6):  # the first insert meets the broken connection
    client.insert(value, {'my_table': 1.0})
  assert client.server_info(timeout=60)['my_table'].current_size == 4


def test_unparsable_requests_are_answered_not_logged(binary_server):
  """A string field that is not UTF-8 gets INVALID_ARGUMENT; no log line each."""
  import grpc  # pylint: disable=g-import-not-at-top

  server = binary_server(f'--config={_TEXT_CONFIG}')
  with grpc.insecure_channel(server.address) as channel:
    reset = channel.unary_unary(
      '/deepmind.reverb.ReverbService/Reset',
      request_serializer=lambda b: b,
      response_deserializer=lambda b: b,
    )
    for _ in range(20):
      with pytest.raises(grpc.RpcError) as error:
        reset(b'\x0a\x02\xff\xfe', timeout=60)  # table: two bytes, not UTF-8
      assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
      assert 'deepmind.reverb.ResetRequest' in error.value.details()
      assert 'UTF-8' in error.value.details()
  assert server.terminate() == 0
  output = ''.join(server.lines)
  assert 'libprotobuf' not in output, output
