"""NumpyIterator: batched numpy arrays without TensorFlow."""

import numpy as np
import pytest

import tf_reverb as reverb
from conftest import run_python
from trajectories import fill
from trajectories import insert_trajectory
from trajectories import T


def test_batches_are_contiguous_arrays_per_column(address):
  fill(address)
  with reverb.NumpyIterator(
    address,
    'my_table',
    batch_size=8,
    max_in_flight_samples_per_worker=4,
    num_workers_per_iterator=2,
  ) as iterator:
    for _ in range(3):
      batch = next(iterator)
      obs, step = batch.data
      assert obs.shape == (8, T, 2) and obs.dtype == np.float32
      assert step.shape == (8, T) and step.dtype == np.int64
      assert obs.flags['C_CONTIGUOUS'] and obs.flags['OWNDATA'] is False
      assert batch.info.key.shape == (8,) and batch.info.key.dtype == np.uint64
      assert batch.info.times_sampled.dtype == np.int32
      assert batch.info.table_size.tolist() == [4] * 8
      for i in range(8):
        value = batch.info.priority[i] - 1
        np.testing.assert_array_equal(obs[i], np.full([T, 2], value))
        np.testing.assert_array_equal(step[i], np.arange(T))


def test_max_samples_gives_a_partial_last_batch(address):
  fill(address, 2)
  iterator = reverb.NumpyIterator(
    address, 'my_table', batch_size=4, max_samples=10, num_batching_threads=3
  )
  sizes = [len(batch.info.key) for batch in iterator]
  assert sizes == [4, 4, 2]
  info = reverb.Client(address).server_info()['my_table']
  assert info.rate_limiter_info.sample_stats.completed == 10
  # Batches come in claim order whichever thread finishes first: the
  # partial one is last in every run.
  for _ in range(20):
    iterator = reverb.NumpyIterator(
      address, 'my_table', batch_size=4, max_samples=10, num_batching_threads=3
    )
    assert [len(batch.info.key) for batch in iterator] == [4, 4, 2]


def test_rate_limiter_timeout_ends_iteration(address):
  iterator = reverb.NumpyIterator(
    address, 'my_table', batch_size=2, rate_limiter_timeout_ms=0
  )
  assert list(iterator) == []
  fill(address, 1)
  iterator = reverb.NumpyIterator(
    address,
    'my_table',
    batch_size=2,
    rate_limiter_timeout_ms=50,
    max_in_flight_samples_per_worker=1,
  )
  assert len(next(iterator).info.key) == 2
  iterator.close()
  with pytest.raises(StopIteration):
    next(iterator)


def test_structure_unflattens_columns(server):
  address = f'localhost:{server.port}'
  fill(address, 1)
  structure = {'obs': None, 'step': None}
  batch = next(
    reverb.NumpyIterator(address, 'my_table', batch_size=2, structure=structure)
  )
  assert set(batch.data) == {'obs', 'step'}
  assert batch.data['obs'].shape == (2, T, 2)


def test_strings_and_legacy_items(server):
  client = reverb.Client(f'localhost:{server.port}')
  client.insert({'s': 'hello', 'x': np.int32(3)}, {'my_table': 1.0})
  batch = next(reverb.NumpyIterator(f'localhost:{server.port}', 'my_table', 3))
  s, x = batch.data
  assert s.dtype == object and s.tolist() == [[b'hello']] * 3
  assert x.tolist() == [[3]] * 3


def test_samples_of_different_shapes_cannot_be_batched(server):
  address = f'localhost:{server.port}'
  insert_trajectory(address, 'my_table', [np.zeros([2], np.float32)])
  insert_trajectory(address, 'my_table', [np.zeros([3], np.float32)])
  with pytest.raises(
    ValueError, match=r'Cannot batch column 0: .*float, \[3\]'
  ):
    for _ in reverb.NumpyIterator(address, 'my_table', batch_size=16):
      pass


def test_unknown_table_raises(server):
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    next(reverb.NumpyIterator(f'localhost:{server.port}', 'nope', 1))


@pytest.mark.parametrize(
  'kwargs, message',
  [
    (dict(batch_size=0), 'batch_size'),
    (dict(max_in_flight_samples_per_worker=0), 'max_in_flight'),
    (dict(num_workers_per_iterator=0), 'num_workers_per_iterator'),
    (dict(max_samples_per_stream=0), 'max_samples_per_stream'),
    (dict(rate_limiter_timeout_ms=-2), 'rate_limiter_timeout_ms'),
    (dict(max_samples=0), 'max_samples'),
    (dict(num_batching_threads=0), 'num_batching_threads'),
    (dict(prefetch_batches=0), 'prefetch_batches'),
  ],
)
def test_validation(kwargs, message):
  args = dict(server_address='localhost:1', table='t', batch_size=1)
  args.update(kwargs)
  with pytest.raises(ValueError, match=message):
    reverb.NumpyIterator(**args)


def test_close_wakes_a_blocked_next(server):
  import threading  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top

  iterator = reverb.NumpyIterator(f'localhost:{server.port}', 'my_table', 1)
  outcome = []

  def consume():
    try:
      next(iterator)
    except (RuntimeError, StopIteration) as e:
      outcome.append(e)

  thread = threading.Thread(target=consume)
  thread.start()
  time.sleep(0.2)
  iterator.close()
  thread.join(timeout=30)
  assert not thread.is_alive() and outcome


def test_does_not_import_tensorflow():
  run_python('''
import sys
import numpy as np
import tf_reverb as reverb
server = reverb.Server([reverb.Table('t', reverb.selectors.Uniform(),
                        reverb.selectors.Fifo(), 10,
                        reverb.rate_limiters.MinSize(1))])
reverb.Client(f'localhost:{server.port}').insert(np.ones(3), {'t': 1.0})
batch = next(reverb.NumpyIterator(f'localhost:{server.port}', 't', 4))
assert batch.data[0].shape == (4, 1, 3)
assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'
''')
