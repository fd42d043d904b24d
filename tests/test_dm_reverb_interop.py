"""Wire compatibility with a real dm-reverb 0.14, both directions.

dm-reverb needs TensorFlow 2.15 and so its own virtualenv; these tests run
when TF_REVERB_DM_PYTHON names that venv's python, e.g.

  python3.11 -m venv /tmp/dmvenv
  /tmp/dmvenv/bin/pip install "dm-reverb[tensorflow]==0.14.0"
  TF_REVERB_DM_PYTHON=/tmp/dmvenv/bin/python bash scripts/run_tests.sh
"""

import os
import subprocess

import numpy as np
import portpicker

import tf_reverb as reverb
from conftest import DM_PYTHON
from conftest import requires_dm_reverb

INTEROP = os.path.join(os.path.dirname(__file__), 'interop')

pytestmark = requires_dm_reverb


def test_dm_reverb_client_against_our_server(server):
  result = subprocess.run(
    [
      DM_PYTHON,
      os.path.join(INTEROP, 'dm_reverb_client.py'),
      f'localhost:{server.port}',
    ],
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'ALL OK' in result.stdout


def test_our_client_against_dm_reverb_server():
  port = portpicker.pick_unused_port()
  process = subprocess.Popen(
    [DM_PYTHON, os.path.join(INTEROP, 'dm_reverb_server.py'), str(port)],
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
  )
  try:
    assert process.stdout.readline().strip() == 'serving'
    client = reverb.Client(f'localhost:{port}')
    client.server_info(timeout=60)
    step = {'a': np.arange(3, dtype=np.float32), 'i': np.int64(4), 's': 'str'}
    client.insert(step, {'my_table': 2.0})
    sample = next(client.sample('my_table', emit_timesteps=False, timeout=30))
    assert sample.info.priority == 2.0
    a, i, s = sample.data
    np.testing.assert_array_equal(a, [[0, 1, 2]])
    assert i.tolist() == [4] and s.tolist() == [b'str']
    client.mutate_priorities('my_table', updates={sample.info.key: 4.0})
    assert (
      next(client.sample('my_table', emit_timesteps=False)).info.priority == 4.0
    )
  finally:
    process.kill()
    process.wait()
