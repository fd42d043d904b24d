"""TrajectoryDataset and TimestepDataset (C++ tf.data ops) end to end."""

import time

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb
from conftest import uniform_table
from trajectories import fill
from trajectories import insert_trajectory
from trajectories import T


DTYPES = {'obs': tf.float32, 'step': tf.int64}


def test_trajectory_dataset_elements(address):
  fill(address)
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    dtypes=DTYPES,
    shapes={'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([None])},
    max_in_flight_samples_per_worker=4,
    max_samples=20,
  )
  assert dataset.element_spec.info.key == tf.TensorSpec([], tf.uint64)
  assert dataset.element_spec.info.times_sampled == tf.TensorSpec([], tf.int32)
  assert dataset.element_spec.data['obs'] == tf.TensorSpec([T, 2], tf.float32)
  elements = list(dataset)
  assert len(elements) == 20  # max_samples, then end of sequence
  for element in elements:
    assert isinstance(element, reverb.ReplaySample)
    i = element.info.priority.numpy() - 1
    np.testing.assert_array_equal(element.data['obs'], np.full([T, 2], i))
    np.testing.assert_array_equal(element.data['step'], np.arange(T))
    assert element.info.table_size.numpy() == 4
    assert 0 < element.info.probability.numpy() <= 1


def test_timestep_dataset_yields_rows_sharing_info(address):
  fill(address, n=2)
  dataset = reverb.TimestepDataset(
    address,
    'my_table',
    dtypes=DTYPES,
    shapes={'obs': tf.TensorShape([2]), 'step': tf.TensorShape([])},
    max_in_flight_samples_per_worker=2,
    max_samples=5,
  )
  elements = list(dataset)
  assert len(elements) == 5 * T
  for item in range(5):
    rows = elements[item * T : (item + 1) * T]
    assert len({int(e.info.key) for e in rows}) == 1
    assert [int(e.data['step']) for e in rows] == list(range(T))
    value = rows[0].info.priority.numpy() - 1
    for row in rows:
      np.testing.assert_array_equal(row.data['obs'], [value, value])


def test_timestep_dataset_rejects_ragged_items(server):
  address = f'localhost:{server.port}'
  insert_trajectory(
    address, 'my_table', [np.zeros([3], np.float32), np.zeros([2], np.float32)]
  )
  dataset = reverb.TimestepDataset(
    address,
    'my_table',
    (tf.float32, tf.float32),
    (tf.TensorShape([]), tf.TensorShape([])),
    1,
  )
  with pytest.raises(
    tf.errors.InvalidArgumentError, match='cannot be decomposed into timesteps'
  ):
    next(iter(dataset))


def test_mismatch_names_the_column_and_both_specs(server):
  address = f'localhost:{server.port}'
  fill(address, 1)
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    dtypes={'obs': tf.float32, 'step': tf.int32},
    shapes={'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])},
    max_in_flight_samples_per_worker=1,
  )
  with pytest.raises(
    tf.errors.InvalidArgumentError,
    match=r'flattened index 1 .*int32, \[3\]\).*int64, \[3\]\)',
  ):
    next(iter(dataset))
  wrong_shape = reverb.TrajectoryDataset(
    address,
    'my_table',
    dtypes=DTYPES,
    shapes={'obs': tf.TensorShape([T, 5]), 'step': tf.TensorShape([T])},
    max_in_flight_samples_per_worker=1,
  )
  with pytest.raises(
    tf.errors.InvalidArgumentError,
    match=r'flattened index 0 .*\[3,5\].*\[3,2\]',
  ):
    next(iter(wrong_shape))
  too_few = reverb.TrajectoryDataset(
    address, 'my_table', (tf.float32,), (tf.TensorShape([T, 2]),), 1
  )
  with pytest.raises(tf.errors.InvalidArgumentError, match='more than the 1'):
    next(iter(too_few))


def test_rate_limiter_timeout_ends_the_dataset(address):
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    (tf.float32,),
    (tf.TensorShape(None),),
    1,
    rate_limiter_timeout_ms=0,
  )
  assert list(dataset) == []  # empty table: ends at once (0 = immediately)
  fill(address, 1)
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    DTYPES,
    {'obs': tf.TensorShape(None), 'step': tf.TensorShape(None)},
    1,
    rate_limiter_timeout_ms=100,
  )
  assert len(list(dataset.take(3))) == 3


@pytest.mark.parametrize(
  'kwargs, message',
  [
    (dict(max_in_flight_samples_per_worker=0), 'max_in_flight'),
    (dict(num_workers_per_iterator=0), 'num_workers_per_iterator'),
    (dict(max_samples_per_stream=0), 'max_samples_per_stream'),
    (dict(rate_limiter_timeout_ms=-2), 'rate_limiter_timeout_ms'),
    (dict(max_samples=0), 'max_samples'),
  ],
)
def test_constructor_validation(kwargs, message):
  args = dict(
    server_address='localhost:1',
    table='t',
    dtypes=(tf.float32,),
    shapes=(tf.TensorShape([]),),
    max_in_flight_samples_per_worker=1,
  )
  args.update(kwargs)
  with pytest.raises(ValueError, match=message):
    reverb.TrajectoryDataset(**args)
  with pytest.raises(ValueError, match=message):
    reverb.TimestepDataset(**args)


def test_dtypes_and_shapes_must_match_structure():
  with pytest.raises((ValueError, TypeError)):
    reverb.TrajectoryDataset(
      'localhost:1', 't', (tf.float32, tf.int32), (tf.TensorShape([]),), 1
    )


def test_lists_become_tuples_in_the_element_spec():
  dataset = reverb.TrajectoryDataset(
    'localhost:1', 't', [tf.float32], [tf.TensorShape([])], 1
  )
  assert isinstance(dataset.element_spec.data, tuple)


def test_from_table_signature(binary_server):
  signature = {
    'obs': tf.TensorSpec([T, 2], tf.float32),
    'step': tf.TensorSpec([T], tf.int64),
  }
  with reverb.Server(
    [uniform_table(name='sig', signature=signature), uniform_table()]
  ) as server:
    address = f'localhost:{server.port}'
    insert_trajectory(
      address,
      'sig',
      [np.ones([T, 2], np.float32), np.arange(T, dtype=np.int64)],
    )
    dataset = reverb.TrajectoryDataset.from_table_signature(
      address, 'sig', max_in_flight_samples_per_worker=1, max_samples=2
    )
    assert dataset.element_spec.data == signature
    elements = list(dataset)
    assert len(elements) == 2
    np.testing.assert_array_equal(elements[0].data['obs'], np.ones([T, 2]))
    with pytest.raises(ValueError, match='does not contain any table named x'):
      reverb.TrajectoryDataset.from_table_signature(address, 'x', 1)
    with pytest.raises(ValueError, match='does not have a signature'):
      reverb.TimestepDataset.from_table_signature(address, 'my_table', 1)


def test_batch_prefetch_and_tf_function(address):
  fill(address)
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    DTYPES,
    {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])},
    max_in_flight_samples_per_worker=8,
    num_workers_per_iterator=2,
  )
  dataset = dataset.batch(16, drop_remainder=True).prefetch(2)

  @tf.function
  def total_steps(ds):
    total = tf.constant(0, tf.int64)
    for batch in ds.take(3):
      total += tf.reduce_sum(batch.data['step'])
    return total

  assert int(total_steps(dataset)) == 3 * 16 * sum(range(T))
  batch = next(iter(dataset))
  assert batch.data['obs'].shape == (16, T, 2)
  assert batch.info.key.shape == (16,)


def test_interleave_over_tables(address):
  fill(address)
  dataset = tf.data.Dataset.range(3).interleave(
    lambda _: reverb.TrajectoryDataset(
      address,
      'my_table',
      DTYPES,
      {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])},
      max_in_flight_samples_per_worker=2,
      max_samples=4,
    ),
    cycle_length=3,
    num_parallel_calls=3,
  )
  assert len(list(dataset)) == 12


def test_mirrored_strategy_input_pipeline(address):
  fill(address)
  strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    DTYPES,
    {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])},
    max_in_flight_samples_per_worker=4,
  ).batch(8, drop_remainder=True)
  distributed = strategy.experimental_distribute_dataset(dataset)

  @tf.function
  def step(batch):
    return strategy.run(lambda b: tf.reduce_sum(b.data['step']), args=(batch,))

  iterator = iter(distributed)
  for _ in range(2):
    assert int(strategy.reduce('SUM', step(next(iterator)), axis=None)) == (
      8 * sum(range(T))
    )


def test_iterator_deletion_closes_the_sampler(address):
  # Blocked on an empty table; deleting the iterator must not hang.
  dataset = reverb.TrajectoryDataset(
    address, 'my_table', (tf.float32,), (tf.TensorShape(None),), 1
  )
  iterator = iter(dataset)
  del iterator
  fill(address, 1)
  assert (
    len(
      list(
        reverb.TrajectoryDataset(
          address,
          'my_table',
          DTYPES,
          {'obs': tf.TensorShape(None), 'step': tf.TensorShape(None)},
          1,
          max_samples=1,
        )
      )
    )
    == 1
  )


def test_not_serializable(server):
  dataset = reverb.TrajectoryDataset(
    f'localhost:{server.port}',
    'my_table',
    (tf.float32,),
    (tf.TensorShape([]),),
    1,
  )
  with pytest.raises(
    tf.errors.FailedPreconditionError, match='cannot be serialized'
  ):
    dataset._as_serialized_graph(  # pylint: disable=protected-access
      external_state_policy=tf.data.experimental.ExternalStatePolicy.FAIL
    )


def test_fused_batch_matches_dataset_batch(address):
  fill(address)
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    DTYPES,
    {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([None])},
    4,
    max_samples=10,
  )
  fused = dataset.batch(4)
  generic = tf.data.Dataset.batch(dataset, 4)  # the unfused implementation
  assert fused.element_spec == generic.element_spec
  assert type(fused).__name__ == 'TrajectoryDataset'
  batches = list(fused)
  # Two threads assemble batches, but they are handed out in the order their
  # samples were claimed: the partial batch comes last, in every run.
  assert [len(b.info.key) for b in batches] == [4, 4, 2]
  for _ in range(20):
    assert [len(b.info.key) for b in fused] == [4, 4, 2]
  for batch in batches:
    assert batch.data['obs'].shape[1:] == (T, 2)
    for i in range(len(batch.info.key)):
      value = batch.info.priority[i].numpy() - 1
      np.testing.assert_array_equal(
        batch.data['obs'][i], np.full([T, 2], value)
      )
      np.testing.assert_array_equal(batch.data['step'][i], np.arange(T))
  dropped = dataset.batch(4, drop_remainder=True)
  assert dropped.element_spec.data['obs'] == tf.TensorSpec(
    [4, T, 2], tf.float32
  )
  assert dropped.element_spec.info.key == tf.TensorSpec([4], tf.uint64)
  assert [len(b.info.key) for b in dropped] == [4, 4]
  # Options the fused path does not cover fall back to Dataset.batch.
  parallel = dataset.batch(4, num_parallel_calls=2)
  assert type(parallel).__name__ != 'TrajectoryDataset'
  assert sum(len(b.info.key) for b in parallel) == 10


def test_fused_batch_of_strings_and_ragged_items(server):
  address = f'localhost:{server.port}'
  client = reverb.Client(address)
  client.insert({'s': 'ab', 'x': np.int32(1)}, {'my_table': 1.0})
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    (tf.string, tf.int32),
    (tf.TensorShape([1]), tf.TensorShape([1])),
    2,
  ).batch(3)
  batch = next(iter(dataset))
  assert batch.data[0].numpy().tolist() == [[b'ab']] * 3
  assert batch.data[1].numpy().tolist() == [[1]] * 3
  client.reset('my_table')
  insert_trajectory(address, 'my_table', [np.zeros([2], np.float32)])
  insert_trajectory(address, 'my_table', [np.zeros([3], np.float32)])
  ragged = reverb.TrajectoryDataset(
    address, 'my_table', (tf.float32,), (tf.TensorShape([None]),), 2
  ).batch(32)
  with pytest.raises(
    tf.errors.InvalidArgumentError,
    match='Cannot batch tensors with different shapes',
  ):
    next(iter(ragged))


def test_requested_specs_are_checked_against_the_table_signature():
  signature = {
    'obs': tf.TensorSpec([T, 2], tf.float32),
    'step': tf.TensorSpec([T], tf.int64),
  }
  with reverb.Server(
    [uniform_table(name='sig', signature=signature)]
  ) as server:
    address = f'localhost:{server.port}'
    # The table is empty: only the signature check can fail these.
    wrong_count = reverb.TrajectoryDataset(
      address, 'sig', (tf.float32,), (tf.TensorShape([T, 2]),), 1
    )
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match='Requested 1 tensors, but table signature shows 2',
    ):
      next(iter(wrong_count))
    wrong_dtype = reverb.TrajectoryDataset(
      address,
      'sig',
      {'obs': tf.float64, 'step': tf.int64},
      {'obs': tf.TensorShape([T, 2]), 'step': tf.TensorShape([T])},
      1,
    )
    with pytest.raises(
      tf.errors.InvalidArgumentError, match=r'flattened index 0 .*double.*float'
    ):
      next(iter(wrong_dtype))
    # Timestep datasets describe one timestep, so the signature must too.
    timestep = reverb.TimestepDataset(
      address,
      'sig',
      {'obs': tf.float32, 'step': tf.int64},
      {'obs': tf.TensorShape([2]), 'step': tf.TensorShape([])},
      1,
    )
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match='Requested incompatible tensor at flattened index',
    ):
      next(iter(timestep))
    compatible = reverb.TrajectoryDataset(
      address,
      'sig',
      {'obs': tf.float32, 'step': tf.int64},
      {'obs': tf.TensorShape([None, 2]), 'step': tf.TensorShape(None)},
      1,
      rate_limiter_timeout_ms=0,
    )
    assert list(compatible) == []


def test_unknown_table_fails_at_iterator_creation(server):
  dataset = reverb.TrajectoryDataset(
    f'localhost:{server.port}', 'nope', (tf.float32,), (tf.TensorShape([]),), 1
  )
  with pytest.raises(
    tf.errors.NotFoundError, match='Priority table nope was not found'
  ):
    next(iter(dataset))


@pytest.mark.parametrize('unit', [3, 7])
def test_the_table_hands_a_dataset_samples_in_whole_requests(address, unit):
  # As in Reverb: a worker asks for max_in_flight_samples_per_worker samples
  # at a time, the next request once that many prefetch slots are free, so
  # the table's sample count advances in those steps.
  client = reverb.Client(address)
  for i in range(5):
    client.insert(np.float32(i), {'my_table': 1.0})
  dataset = reverb.TrajectoryDataset(
    address,
    'my_table',
    dtypes=tf.float32,
    shapes=tf.TensorShape([1]),
    max_in_flight_samples_per_worker=unit,
    num_workers_per_iterator=1,
  )
  iterator = iter(dataset)

  def sampled():
    return client.server_info()[
      'my_table'
    ].rate_limiter_info.sample_stats.completed

  for taken in range(1, 2 * unit + 2):
    next(iterator)
    expected = unit * (taken // unit + 1)
    deadline = time.monotonic() + 60  # hang guard only
    while sampled() < expected and time.monotonic() < deadline:
      pass
    assert sampled() == expected, (taken, sampled())
