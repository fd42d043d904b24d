"""Our writers against dm-reverb 0.14 (both directions).

Runs when TF_REVERB_DM_PYTHON names the python of a venv with dm-reverb (see
test_dm_reverb_interop.py; scripts/run_tests.sh sets it up). dm-reverb's own
TrajectoryWriter against our server is covered by
tests/interop/dm_reverb_client.py.
"""

import os
import subprocess

import grpc
import numpy as np
import portpicker

import tf_reverb as reverb
from tests.conftest import DM_PYTHON
from tests.conftest import requires_dm_reverb
from tests.conftest import uniform_table
from tf_reverb.proto import reverb_service_pb2
from tf_reverb.proto import reverb_service_pb2_grpc
from tf_reverb.proto import schema_pb2

INTEROP = os.path.join(os.path.dirname(__file__), 'interop')

pytestmark = requires_dm_reverb


TABLES = ('my_table', 'legacy', 'frames')


def frame(step: int) -> np.ndarray:
  """An Atari-like 84x84 frame (compressible: zstd on our servers)."""
  return (
    (np.arange(84 * 84, dtype=np.int64).reshape(84, 84) // 84 + 3 * step) % 256
  ).astype(np.uint8)


def write_frames(client: reverb.Client) -> None:
  """Two items of table 'frames' over {'frame': uint8[84, 84], 'step': int32}.

  The first item is flushed on its own: by the time it is confirmed the
  writer has the server's codec announcement, so the 10-step chunk of steps
  2..11 is zstd on our server (and must be Snappy on dm-reverb's).
  """
  with client.trajectory_writer(num_keep_alive_refs=10) as writer:
    for step in range(12):
      writer.append({'frame': frame(step), 'step': np.int32(step)})
      if step == 1 or step == 11:
        writer.create_item(
          'frames',
          priority=1.0,
          trajectory={
            'frame': writer.history['frame'][-2:],
            'step': writer.history['step'][-2:],
          },
        )
        writer.flush()


def write_items(client: reverb.Client) -> None:
  """The items tests/interop/dm_reverb_read_ours.py expects."""
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for i in range(4):
      writer.append(
        {
          'obs': np.full((2,), i, np.int32),
          'r': np.float32(i),
          'text': f'step{i}',
        }
      )
    writer.create_item(
      'my_table',
      priority=3.0,
      trajectory={
        'obs': writer.history['obs'][-3:],
        'r': writer.history['r'][-1],
        'text': writer.history['text'][-1],
      },
    )
  with client.writer(max_sequence_length=3, delta_encoded=True) as writer:
    for t in range(3):
      writer.append([np.array([10, 13, 16], np.int32) * (t + 1), np.float32(t)])
    writer.create_item('legacy', num_timesteps=3, priority=1.0)
  write_frames(client)


def sampled_compressions(address: str, announce_zstd: bool) -> set:
  """Codecs of the chunks a raw SampleStream of 'frames' receives."""
  metadata = [('x-tf-reverb-codecs', 'zstd')] if announce_zstd else []
  with grpc.insecure_channel(address) as channel:
    stub = reverb_service_pb2_grpc.ReverbServiceStub(channel)
    request = reverb_service_pb2.SampleStreamRequest(
      table='frames', num_samples=20
    )
    request.rate_limiter_timeout.milliseconds = 10000
    seen, items = set(), 0
    for response in stub.SampleStream(
      iter([request]), metadata=metadata, timeout=60
    ):
      for entry in response.entries:
        seen.update(chunk.compression for chunk in entry.data)
        items += entry.end_of_sequence
      if items == 20:
        break
  return seen


def run_dm_reader(address: str) -> None:
  result = subprocess.run(
    [DM_PYTHON, os.path.join(INTEROP, 'dm_reverb_read_ours.py'), address],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'ALL OK' in result.stdout


def test_dm_reverb_reads_what_our_writers_wrote_to_our_server():
  with reverb.Server([uniform_table(name) for name in TABLES]) as s:
    write_items(reverb.Client(f'localhost:{s.port}'))
    # Our server stores the frames as zstd and sends them as they are to
    # clients announcing zstd, as Snappy to the others (dm-reverb's).
    zstd = schema_pb2.ChunkData.COMPRESSION_ZSTD
    assert zstd in sampled_compressions(f'localhost:{s.port}', True)
    assert zstd not in sampled_compressions(f'localhost:{s.port}', False)
    run_dm_reader(f'localhost:{s.port}')


def test_zstd_disabled_by_environment_on_our_server(monkeypatch):
  monkeypatch.setenv('TF_REVERB_ZSTD', '0')
  with reverb.Server([uniform_table(name) for name in TABLES]) as s:
    write_items(reverb.Client(f'localhost:{s.port}'))
    zstd = schema_pb2.ChunkData.COMPRESSION_ZSTD
    assert zstd not in sampled_compressions(f'localhost:{s.port}', True)
    run_dm_reader(f'localhost:{s.port}')


def test_our_writers_against_a_dm_reverb_server():
  port = portpicker.pick_unused_port()
  process = subprocess.Popen(
    [
      DM_PYTHON,
      os.path.join(INTEROP, 'dm_reverb_server_two_tables.py'),
      str(port),
    ],
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
  )
  try:
    assert process.stdout.readline().strip() == 'serving'
    client = reverb.Client(f'localhost:{port}')
    client.server_info(timeout=60)
    write_items(client)
    info = client.server_info()
    assert info['my_table'].current_size == 1
    assert info['legacy'].current_size == 1
    assert info['frames'].current_size == 2
    run_dm_reader(f'localhost:{port}')
  finally:
    process.kill()
    process.wait()
