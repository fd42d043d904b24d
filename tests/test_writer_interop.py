"""Our writers against dm-reverb 0.14 (both directions).

Runs when TF_REVERB_DM_PYTHON names the python of a venv with dm-reverb (see
test_dm_reverb_interop.py; scripts/run_tests.sh sets it up). dm-reverb's own
TrajectoryWriter against our server is covered by
tests/interop/dm_reverb_client.py.
"""

import os
import subprocess

import numpy as np
import portpicker
import pytest

import tf_reverb as reverb
from tests.conftest import uniform_table

DM_PYTHON = os.environ.get('TF_REVERB_DM_PYTHON')
INTEROP = os.path.join(os.path.dirname(__file__), 'interop')

pytestmark = pytest.mark.skipif(
    not DM_PYTHON, reason='set TF_REVERB_DM_PYTHON to a dm-reverb venv python')


def write_items(client: reverb.Client) -> None:
  """The items tests/interop/dm_reverb_read_ours.py expects."""
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for i in range(4):
      writer.append({'obs': np.full((2,), i, np.int32), 'r': np.float32(i),
                     'text': f'step{i}'})
    writer.create_item('my_table', priority=3.0, trajectory={
        'obs': writer.history['obs'][-3:],
        'r': writer.history['r'][-1],
        'text': writer.history['text'][-1],
    })
  with client.writer(max_sequence_length=3, delta_encoded=True) as writer:
    for t in range(3):
      writer.append([np.array([10, 13, 16], np.int32) * (t + 1), np.float32(t)])
    writer.create_item('legacy', num_timesteps=3, priority=1.0)


def run_dm_reader(address: str) -> None:
  result = subprocess.run(
      [DM_PYTHON, os.path.join(INTEROP, 'dm_reverb_read_ours.py'), address],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'ALL OK' in result.stdout


def test_dm_reverb_reads_what_our_writers_wrote_to_our_server():
  with reverb.Server([uniform_table('my_table'), uniform_table('legacy')]) as s:
    write_items(reverb.Client(f'localhost:{s.port}'))
    run_dm_reader(f'localhost:{s.port}')


def test_our_writers_against_a_dm_reverb_server():
  port = portpicker.pick_unused_port()
  process = subprocess.Popen(
      [DM_PYTHON, os.path.join(INTEROP, 'dm_reverb_server_two_tables.py'),
       str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    assert process.stdout.readline().strip() == 'serving'
    client = reverb.Client(f'localhost:{port}')
    client.server_info(timeout=60)
    write_items(client)
    info = client.server_info()
    assert info['my_table'].current_size == 1
    assert info['legacy'].current_size == 1
    run_dm_reader(f'localhost:{port}')
  finally:
    process.kill()
    process.wait()
