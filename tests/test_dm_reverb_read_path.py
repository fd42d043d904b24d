"""Our read path against a real dm-reverb 0.14 server (and vice versa).

Runs when TF_REVERB_DM_PYTHON names a python with dm-reverb (as
scripts/run_tests.sh sets up); see test_dm_reverb_interop.py.
"""

import os
import subprocess

import numpy as np
import portpicker
import pytest

import tf_reverb as reverb
from conftest import DM_PYTHON
from conftest import requires_dm_reverb

INTEROP = os.path.join(os.path.dirname(__file__), 'interop')

pytestmark = requires_dm_reverb


@pytest.fixture
def dm_server():
  """A dm-reverb server with table 'my_table' (Uniform, Fifo, MinSize(1))."""
  port = portpicker.pick_unused_port()
  process = subprocess.Popen(
    [DM_PYTHON, os.path.join(INTEROP, 'dm_reverb_server.py'), str(port)],
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
  )
  try:
    assert process.stdout.readline().strip() == 'serving'
    address = f'localhost:{port}'
    reverb.Client(address).server_info(timeout=60)
    yield address
  finally:
    process.kill()
    process.wait()


def _fill(address):
  client = reverb.Client(address)
  for i in range(3):
    client.insert(
      {'obs': np.full([2], i, np.float32), 'step': np.int64(i)},
      {'my_table': float(i + 1)},
    )


def test_our_datasets_read_from_a_dm_reverb_server(dm_server):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  _fill(dm_server)
  dataset = reverb.TrajectoryDataset(
    dm_server,
    'my_table',
    {'obs': tf.float32, 'step': tf.int64},
    {'obs': tf.TensorShape([1, 2]), 'step': tf.TensorShape([1])},
    max_in_flight_samples_per_worker=4,
    num_workers_per_iterator=2,
    max_samples_per_stream=5,
    max_samples=30,
  )
  elements = list(dataset)
  assert len(elements) == 30
  for element in elements:
    i = int(element.info.priority) - 1
    np.testing.assert_array_equal(element.data['obs'], [[i, i]])
    assert element.data['step'].numpy().tolist() == [i]
  timesteps = list(
    reverb.TimestepDataset(
      dm_server,
      'my_table',
      {'obs': tf.float32, 'step': tf.int64},
      {'obs': tf.TensorShape([2]), 'step': tf.TensorShape([])},
      2,
      max_samples=4,
    )
  )
  assert len(timesteps) == 4
  # A finite rate-limiter timeout is honoured by a dm-reverb server too.
  reverb.Client(dm_server).reset('my_table')
  assert (
    list(
      reverb.TrajectoryDataset(
        dm_server,
        'my_table',
        (tf.float32,),
        (tf.TensorShape(None),),
        1,
        rate_limiter_timeout_ms=200,
      )
    )
    == []
  )


def test_our_numpy_iterator_and_client_sample_read_from_dm_reverb(dm_server):
  _fill(dm_server)
  batch = next(reverb.NumpyIterator(dm_server, 'my_table', batch_size=16))
  obs, step = batch.data
  assert obs.shape == (16, 1, 2) and step.shape == (16, 1)
  for i in range(16):
    assert obs[i, 0, 0] == step[i, 0] == batch.info.priority[i] - 1
  samples = list(
    reverb.Client(dm_server).sample('my_table', 50, emit_timesteps=False)
  )
  assert {int(s.info.priority) for s in samples} == {1, 2, 3}
