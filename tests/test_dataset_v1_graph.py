"""TrajectoryDataset / TimestepDataset as tf.compat.v1.data.Datasets.

TF1-style graphs and sessions (make_one_shot_iterator,
make_initializable_iterator) on the sources and on what their
transformations return, against a real server on a real port; eager and
tf.function use keeps working.
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb
from trajectories import fill
from trajectories import T

DTYPES = {'obs': tf.float32, 'step': tf.int64}
TRAJECTORY_SHAPES = {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])}
TIMESTEP_SHAPES = {'obs': tf.TensorShape([2]), 'step': tf.TensorShape([])}


def trajectory_dataset(address, **kwargs):
  return reverb.TrajectoryDataset(
    address, 'my_table', DTYPES, TRAJECTORY_SHAPES, 2, **kwargs
  )


def timestep_dataset(address, **kwargs):
  return reverb.TimestepDataset(
    address, 'my_table', DTYPES, TIMESTEP_SHAPES, 2, **kwargs
  )


def assert_trajectory(info_priority, data):
  value = info_priority - 1
  np.testing.assert_array_equal(data['obs'], np.full([T, 2], value))
  np.testing.assert_array_equal(data['step'], np.arange(T))


def test_datasets_are_v1_and_v2_datasets(server):
  address = f'localhost:{server.port}'
  for dataset in (trajectory_dataset(address), timestep_dataset(address)):
    assert isinstance(dataset, tf.compat.v1.data.Dataset)
    assert isinstance(dataset, tf.data.Dataset)
    for derived in (
      dataset.batch(2),
      dataset.map(lambda s: s.data),
      dataset.prefetch(1),
      dataset.take(1),
    ):
      assert isinstance(derived, tf.compat.v1.data.Dataset)
  fused = trajectory_dataset(address).batch(2)
  assert isinstance(fused, reverb.TrajectoryDataset)
  assert isinstance(fused, tf.compat.v1.data.Dataset)


@pytest.mark.parametrize('style', ['method', 'function'])
def test_initializable_iterator_on_trajectory_dataset(address, style):
  fill(address)
  with tf.Graph().as_default():
    dataset = trajectory_dataset(address, max_samples=5)
    if style == 'method':
      iterator = dataset.make_initializable_iterator()
    else:
      iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
    element = iterator.get_next()
    assert element.data['obs'].shape == (T, 2)
    with tf.compat.v1.Session() as session:
      for _ in range(2):  # re-initialization starts a new sampler
        session.run(iterator.initializer)
        for _ in range(5):
          sample = session.run(element)
          assert isinstance(sample, reverb.ReplaySample)
          assert sample.info.table_size == 4
          assert_trajectory(sample.info.priority, sample.data)
        with pytest.raises(tf.errors.OutOfRangeError):
          session.run(element)


@pytest.mark.parametrize('style', ['method', 'function'])
def test_one_shot_iterator_on_timestep_dataset(address, style):
  fill(address, n=2)
  with tf.Graph().as_default():
    dataset = timestep_dataset(address, max_samples=3)
    if style == 'method':
      iterator = dataset.make_one_shot_iterator()
    else:
      iterator = tf.compat.v1.data.make_one_shot_iterator(dataset)
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
      rows = [session.run(element) for _ in range(3 * T)]
      with pytest.raises(tf.errors.OutOfRangeError):
        session.run(element)
  for item in range(3):
    item_rows = rows[item * T : (item + 1) * T]
    assert len({int(r.info.key) for r in item_rows}) == 1
    assert [int(r.data['step']) for r in item_rows] == list(range(T))
    value = item_rows[0].info.priority - 1
    for row in item_rows:
      np.testing.assert_array_equal(row.data['obs'], [value, value])


@pytest.mark.parametrize('make', ['fused_batch', 'dataset_batch', 'map'])
@pytest.mark.parametrize('iterator_kind', ['initializable', 'one_shot'])
def test_iterators_on_transformed_trajectory_datasets(
  address, make, iterator_kind
):
  fill(address)
  with tf.Graph().as_default():
    dataset = trajectory_dataset(address, max_samples=8)
    if make == 'fused_batch':
      dataset = dataset.batch(4, drop_remainder=True)
    elif make == 'dataset_batch':
      dataset = dataset.batch(4, drop_remainder=True, num_parallel_calls=2)
    else:
      dataset = dataset.map(
        lambda s: (s.info.priority, s.data['obs'] * 2.0, s.data['step'])
      )
    if iterator_kind == 'initializable':
      iterator = dataset.make_initializable_iterator()
    else:
      iterator = dataset.make_one_shot_iterator()
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
      if iterator_kind == 'initializable':
        session.run(iterator.initializer)
      values = [
        session.run(element) for _ in range(2 if 'batch' in make else 8)
      ]
      with pytest.raises(tf.errors.OutOfRangeError):
        session.run(element)
  for value in values:
    if make == 'map':
      priority, obs, step = value
      np.testing.assert_array_equal(obs, np.full([T, 2], 2 * (priority - 1)))
      np.testing.assert_array_equal(step, np.arange(T))
    else:
      assert value.data['obs'].shape == (4, T, 2)
      for i in range(4):
        assert_trajectory(
          value.info.priority[i], {k: v[i] for k, v in value.data.items()}
        )


def test_initializable_iterator_on_mapped_timestep_dataset(address):
  fill(address, n=2)
  with tf.Graph().as_default():
    dataset = (
      timestep_dataset(address, max_samples=2)
      .map(lambda s: s.data['step'])
      .batch(T)
    )
    iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
      session.run(iterator.initializer)
      assert session.run(element).tolist() == list(range(T))
      assert session.run(element).tolist() == list(range(T))
      with pytest.raises(tf.errors.OutOfRangeError):
        session.run(element)


def test_from_table_signature_in_a_v1_graph():
  with reverb.Server(
    [
      reverb.Table(
        'sig',
        reverb.selectors.Uniform(),
        reverb.selectors.Fifo(),
        10,
        reverb.rate_limiters.MinSize(1),
        signature={'x': tf.TensorSpec([2], tf.int32)},
      )
    ]
  ) as sig_server:
    sig_address = f'localhost:{sig_server.port}'
    reverb.Client(sig_address).insert(
      {'x': np.array([4, 5], np.int32)}, {'sig': 1.0}
    )
    with tf.Graph().as_default():
      dataset = reverb.TimestepDataset.from_table_signature(
        sig_address, 'sig', max_in_flight_samples_per_worker=1, max_samples=1
      )
      assert isinstance(dataset, tf.compat.v1.data.Dataset)
      element = dataset.make_one_shot_iterator().get_next()
      with tf.compat.v1.Session() as session:
        assert session.run(element).data['x'].tolist() == [4, 5]


def test_eager_and_tf_function_still_work(address):
  fill(address)
  dataset = trajectory_dataset(address, max_samples=4)
  assert dataset.element_spec.data['obs'] == tf.TensorSpec([T, 2], tf.float32)
  for sample in dataset:
    assert_trajectory(sample.info.priority.numpy(), sample.data)

  @tf.function
  def total(ds):
    result = tf.constant(0, tf.int64)
    for batch in ds:
      result += tf.reduce_sum(batch.data['step'])
    return result

  assert int(total(trajectory_dataset(address, max_samples=4).batch(2))) == (
    4 * sum(range(T))
  )
  assert int(total(timestep_dataset(address, max_samples=2).batch(T))) == (
    2 * sum(range(T))
  )


def test_initializable_iterator_with_a_fed_server_address(server):
  address = f'localhost:{server.port}'
  fill(address, n=1)
  with tf.Graph().as_default():
    fed_address = tf.compat.v1.placeholder(tf.string, [])
    dataset = reverb.TrajectoryDataset(
      fed_address, 'my_table', DTYPES, TRAJECTORY_SHAPES, 1, max_samples=1
    )
    iterator = dataset.make_initializable_iterator()
    element = iterator.get_next()
    with tf.compat.v1.Session() as session:
      session.run(iterator.initializer, feed_dict={fed_address: address})
      assert_trajectory(1.0, session.run(element).data)
