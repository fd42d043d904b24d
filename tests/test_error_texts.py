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
  signature = {
    'obs': tf.TensorSpec([None, 2], tf.float32),
    'n': tf.TensorSpec([], tf.int64),
  }
  with reverb.Server(
    [uniform_table(), uniform_table('sig', signature=signature)]
  ) as server:
    yield reverb.Client(f'localhost:{server.port}')


def test_writer_errors_use_tf_dtype_names_and_path_tuples(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append(
    {'nest': {'sub': np.zeros([1, 2], np.int64)}, 'f': np.float32(1)}
  )
  with pytest.raises(ValueError) as dtype_error:
    writer.append({'nest': {'sub': np.zeros([1, 2], np.float64)}})
  assert str(dtype_error.value) == (
    "Tensor of wrong dtype provided for column ('nest', 'sub'). Got double "
    'but expected int64.'
  )
  with pytest.raises(ValueError) as shape_error:
    writer.append({'nest': {'sub': np.zeros([2, 2], np.int64)}})
  assert str(shape_error.value) == (
    "Tensor of incompatible shape provided for column ('nest', 'sub'). Got "
    '[2,2] which is incompatible with [1,2].'
  )
  writer.close()


def test_signature_mismatch_prints_tf_names_and_shapes(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  for i in range(3):
    writer.append({'obs': np.zeros([2], np.float64), 'n': np.int64(i)})
  with pytest.raises(ValueError) as error:
    writer.create_item(
      'sig',
      1.0,
      {'obs': writer.history['obs'][-3:], 'n': writer.history['n'][-1]},
    )
  message = str(error.value)
  assert 'float[?,2]' in message and 'double[3,2]' in message, message
  assert 'float32' not in message and 'float64' not in message
  writer.close()


def test_structured_config_validation_texts():
  step = {'x': np.zeros(2, np.float32), 'i': np.int32(0)}
  spec = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), step)

  def config(table, transform):
    return structured.create_config(
      structured.pattern_from_transform(step, transform), table
    )

  two = config('a', lambda s: {'x': s['x'][-2:]})
  with pytest.raises(
    ValueError,
    match=re.escape(
      'All configs must target the same table but provided configs included '
      'a, b, c.'
    ),
  ):
    structured.infer_signature(
      [
        two,
        config('b', lambda s: {'x': s['x'][-2:]}),
        config('c', lambda s: {'x': s['x'][-2:]}),
      ],
      spec,
    )
  with pytest.raises(
    ValueError,
    match=re.escape(
      "Configs produce trajectories with multiple dtypes at ('x',). Got "
    ),
  ):
    structured.infer_signature(
      [two, config('a', lambda s: {'x': s['i'][-2:]})], spec
    )
  with pytest.raises(
    ValueError,
    match=re.escape(
      "Configs produce trajectories with incompatible shapes at ('x',). Got "
    ),
  ):
    structured.infer_signature(
      [two, config('a', lambda s: {'x': s['x'][-1]})], spec
    )


def test_dataset_argument_texts(client):
  with pytest.raises(
    ValueError, match='rate_limiter_timeout_ms must be an integer >= -1'
  ):
    reverb.TrajectoryDataset(
      client.server_address,
      'my_table',
      dtypes=tf.int64,
      shapes=tf.TensorShape([]),
      max_in_flight_samples_per_worker=1,
      rate_limiter_timeout_ms=-2,
    )
  with pytest.raises(
    ValueError, match='rate_limiter_timeout_ms must be an integer >= -1'
  ):
    reverb.NumpyIterator(
      client.server_address,
      'my_table',
      batch_size=1,
      rate_limiter_timeout_ms=-5,
    )


@pytest.fixture
def one_column_address():
  # 'sig' has a one-column signature, 'free' none; each holds a float [3,3].
  signature = tf.TensorSpec([None, None], tf.float32)
  with reverb.Server(
    [uniform_table('sig', signature=signature), uniform_table('free')]
  ) as server:
    client = reverb.Client(f'localhost:{server.port}')
    client.insert(np.zeros([3, 3], np.float32), {'sig': 1.0, 'free': 1.0})
    yield f'localhost:{server.port}'


_TOO_MANY = (
  "Inconsistent number of tensors requested from table 'sig'.  "
  'Requested 2 tensors, but table signature shows 1 tensors.'
)
_INCOMPATIBLE = (
  "Requested incompatible tensor at flattened index 0 from table "
  "'sig'.  Requested (dtype, shape): (int64, [3,3]).  Signature "
  '(dtype, shape): (float, [?,?])'
)
_UNSIGNED = (
  'Specification has (dtype, shape): (float, []).  Tensor has '
  '(dtype, shape): (float, [3,3]).'
)

_DATASETS = {
  'timestep': lambda address, table, dtypes, shapes: reverb.TimestepDataset(
    address, table, dtypes, shapes, max_in_flight_samples_per_worker=1
  ),
  'trajectory': lambda address, table, dtypes, shapes: reverb.TrajectoryDataset(
    address, table, dtypes, shapes, max_in_flight_samples_per_worker=1
  ),
}
# (table, dtypes, shapes, Reverb's words).
_MISMATCHES = [
  ('sig', (tf.float32, tf.float32), (tf.TensorShape(None),) * 2, _TOO_MANY),
  ('sig', tf.int64, tf.TensorShape([3, 3]), _INCOMPATIBLE),
]


@pytest.mark.parametrize('kind', sorted(_DATASETS))
@pytest.mark.parametrize('table,dtypes,shapes,words', _MISMATCHES)
def test_dataset_signature_mismatch_in_reverb_s_words(
  one_column_address, kind, table, dtypes, shapes, words
):
  dataset = _DATASETS[kind](one_column_address, table, dtypes, shapes)
  with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(words)):
    next(iter(dataset))


@pytest.mark.parametrize('table,dtypes,shapes,words', _MISMATCHES)
def test_dataset_signature_mismatch_in_a_tf1_graph(
  one_column_address, table, dtypes, shapes, words
):
  with tf.Graph().as_default():
    dataset = reverb.TimestepDataset(
      one_column_address,
      table,
      dtypes,
      shapes,
      max_in_flight_samples_per_worker=1,
    )
    iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
      with pytest.raises(
        tf.errors.InvalidArgumentError, match=re.escape(words)
      ):
        session.run(iterator.initializer)
        session.run(element)


def test_sampled_tensor_mismatch_without_a_signature_in_reverb_s_words(
  one_column_address,
):
  dataset = reverb.TimestepDataset(
    one_column_address,
    'free',
    tf.float32,
    tf.TensorShape([]),
    max_in_flight_samples_per_worker=1,
  )
  with pytest.raises(
    tf.errors.InvalidArgumentError, match=re.escape(_UNSIGNED)
  ):
    next(iter(dataset))


def test_infer_signature_of_configs_of_different_patterns():
  step = {'x': np.zeros(2, np.float32)}
  spec = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), step)
  configs = [
    structured.create_config(pattern, 'table')
    for pattern in (
      structured.pattern_from_transform(step, lambda s: s['x'][-1]),
      structured.pattern_from_transform(step, lambda s: [s['x'][-1]]),
    )
  ]
  with pytest.raises(
    ValueError,
    match='All configs must have exactly the same pattern_structure.',
  ):
    structured.infer_signature(configs, spec)
