"""Drives a tf_reverb server with a real dm-reverb 0.14 client.

Run with the Python of a venv holding dm-reverb (TF 2.15, Python 3.11):

  /path/to/dm-venv/bin/python tests/interop/dm_reverb_client.py HOST:PORT

The server must host a table 'my_table' (Uniform sampler, Fifo remover,
MinSize(1)). Exits non-zero on the first mismatch.
"""

import sys

import numpy as np
import reverb
import tensorflow as tf


def main(address: str) -> None:
  client = reverb.Client(address)
  info = client.server_info(timeout=10)
  assert 'my_table' in info, info
  print('server_info ok:', info['my_table'].current_size)

  # Legacy insert (one chunk, one item).
  client.insert(
    [np.arange(3, dtype=np.float32), np.int64(7)], priorities={'my_table': 1.5}
  )

  # TrajectoryWriter: several steps, an item over a slice of history.
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for i in range(4):
      writer.append({'obs': np.full((2,), i, np.int32), 'r': np.float32(i)})
    writer.create_item(
      'my_table',
      priority=3.0,
      trajectory={
        'obs': writer.history['obs'][-3:],
        'r': writer.history['r'][-1],
      },
    )
    writer.flush()
  info = client.server_info()
  assert info['my_table'].current_size == 2, info['my_table']
  print('inserts ok')

  seen = {}
  for sample in client.sample('my_table', num_samples=40, emit_timesteps=False):
    seen[sample.info.priority] = sample
  assert set(seen) == {1.5, 3.0}, seen.keys()
  legacy = seen[1.5].data
  np.testing.assert_array_equal(legacy[0], [[0, 1, 2]])
  assert legacy[1].tolist() == [7]
  trajectory = seen[3.0].data
  np.testing.assert_array_equal(trajectory[0], [[1, 1], [2, 2], [3, 3]])
  assert float(trajectory[1]) == 3.0
  print('sample ok')

  key = seen[3.0].info.key
  client.mutate_priorities('my_table', updates={key: 9.0})
  priorities = {
    s.info.priority for s in client.sample('my_table', 40, emit_timesteps=False)
  }
  assert 9.0 in priorities, priorities
  client.mutate_priorities('my_table', deletes=[seen[1.5].info.key])
  assert client.server_info()['my_table'].current_size == 1
  print('mutate_priorities ok')

  dataset = reverb.TrajectoryDataset(
    server_address=address,
    table='my_table',
    dtypes={'obs': tf.int32, 'r': tf.float32},
    shapes={'obs': tf.TensorShape([3, 2]), 'r': tf.TensorShape([])},
    max_in_flight_samples_per_worker=4,
  )
  for sample in dataset.take(3):
    assert sample.info.priority.numpy() == 9.0
    np.testing.assert_array_equal(
      sample.data['obs'].numpy(), [[1, 1], [2, 2], [3, 3]]
    )
  print('TrajectoryDataset ok')

  tf_client = reverb.TFClient(address)
  tf_client.insert(
    [tf.constant([5, 6], tf.int32)],
    tf.constant(['my_table']),
    tf.constant([2.0], tf.float64),
  )
  client.reset('my_table')
  assert client.server_info()['my_table'].current_size == 0
  print('TFClient insert + reset ok')
  print('ALL OK')


if __name__ == '__main__':
  main(sys.argv[1])
