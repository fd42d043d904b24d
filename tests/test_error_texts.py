"""Error texts that Reverb programs match: TensorFlow dtype names, shapes as
[1,2], columns as their path tuple, Reverb's wording first."""

import re

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb
from tests.conftest import uniform_table

structured = reverb.structured


@pytest.fixture
def client():
  signature = {'obs': tf.TensorSpec([None, 2], tf.float32),
               'n': tf.TensorSpec([], tf.int64)}
  with reverb.Server([uniform_table(),
                      uniform_table('sig', signature=signature)]) as server:
    yield reverb.Client(f'localhost:{server.port}')


def test_writer_errors_use_tf_dtype_names_and_path_tuples(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'nest': {'sub': np.zeros([1, 2], np.int64)},
                 'f': np.float32(1)})
  with pytest.raises(ValueError) as dtype_error:
    writer.append({'nest': {'sub': np.zeros([1, 2], np.float64)}})
  assert str(dtype_error.value) == (
      "Tensor of wrong dtype provided for column ('nest', 'sub'). Got double "
      'but expected int64.')
  with pytest.raises(ValueError) as shape_error:
    writer.append({'nest': {'sub': np.zeros([2, 2], np.int64)}})
  assert str(shape_error.value) == (
      "Tensor of incompatible shape provided for column ('nest', 'sub'). Got "
      '[2,2] which is incompatible with [1,2].')
  writer.close()


def test_signature_mismatch_prints_tf_names_and_shapes(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  for i in range(3):
    writer.append({'obs': np.zeros([2], np.float64), 'n': np.int64(i)})
  with pytest.raises(ValueError) as error:
    writer.create_item('sig', 1.0, {'obs': writer.history['obs'][-3:],
                                     'n': writer.history['n'][-1]})
  message = str(error.value)
  assert 'float[?,2]' in message and 'double[3,2]' in message, message
  assert 'float32' not in message and 'float64' not in message
  writer.close()


def test_structured_config_validation_texts():
  step = {'x': np.zeros(2, np.float32), 'i': np.int32(0)}
  spec = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), step)

  def config(table, transform):
    return structured.create_config(
        structured.pattern_from_transform(step, transform), table)

  two = config('a', lambda s: {'x': s['x'][-2:]})
  with pytest.raises(ValueError, match=re.escape(
      'All configs must target the same table but provided configs included '
      'a, b, c.')):
    structured.infer_signature(
        [two, config('b', lambda s: {'x': s['x'][-2:]}),
         config('c', lambda s: {'x': s['x'][-2:]})], spec)
  with pytest.raises(ValueError, match=re.escape(
      "Configs produce trajectories with multiple dtypes at ('x',). Got ")):
    structured.infer_signature([two, config('a', lambda s: {'x': s['i'][-2:]})],
                               spec)
  with pytest.raises(ValueError, match=re.escape(
      "Configs produce trajectories with incompatible shapes at ('x',). Got ")):
    structured.infer_signature([two, config('a', lambda s: {'x': s['x'][-1]})],
                               spec)


def test_dataset_argument_texts(client):
  with pytest.raises(ValueError,
                     match='rate_limiter_timeout_ms must be an integer >= -1'):
    reverb.TrajectoryDataset(
        client.server_address, 'my_table', dtypes=tf.int64,
        shapes=tf.TensorShape([]),
        max_in_flight_samples_per_worker=1, rate_limiter_timeout_ms=-2)
  with pytest.raises(ValueError,
                     match='rate_limiter_timeout_ms must be an integer >= -1'):
    reverb.NumpyIterator(client.server_address, 'my_table', batch_size=1,
                         rate_limiter_timeout_ms=-5)
