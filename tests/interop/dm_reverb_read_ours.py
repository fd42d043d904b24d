"""Reads, with a real dm-reverb 0.14 client, data written by tf_reverb writers.

  /path/to/dm-venv/bin/python tests/interop/dm_reverb_read_ours.py HOST:PORT

Expects (see tests/test_writer_interop.py::write_items):
  * table 'my_table': one TrajectoryWriter item {'obs': int32[3, 2] rows
    1..3, 'r': float32 scalar 3.0 (squeezed), 'text': b'step3' (squeezed)}
  * table 'legacy': one legacy Writer item (delta_encoded) of 3 timesteps
    [int32[3] = [10, 13, 16] * (t + 1), float32 t].
  * table 'frames': two items {'frame': uint8[2, 84, 84], 'step': int32[2]}
    whose frames are tests/test_writer_interop.py::frame(step) (written as
    zstd on our servers: what dm-reverb receives must be Snappy).
Exits non-zero on the first mismatch; prints ALL OK otherwise.
"""

import sys

import numpy as np
import reverb
import tensorflow as tf


def frame(step):
  return (
    (np.arange(84 * 84, dtype=np.int64).reshape(84, 84) // 84 + 3 * step) % 256
  ).astype(np.uint8)


def check_frames(frames, steps):
  assert frames.shape == (2, 84, 84) and frames.dtype == np.uint8, frames.shape
  assert list(steps) in ([0, 1], [10, 11]), steps
  for f, s in zip(frames, steps):
    np.testing.assert_array_equal(f, frame(int(s)))


def main(address: str) -> None:
  client = reverb.Client(address)
  sample = next(client.sample('my_table', emit_timesteps=False))
  obs, r, text = sample.data
  np.testing.assert_array_equal(obs, [[1, 1], [2, 2], [3, 3]])
  assert obs.dtype == np.int32, obs.dtype
  assert r.shape == () and float(r) == 3.0, r
  assert text == b'step3', text
  print('sample trajectory ok')

  dataset = reverb.TrajectoryDataset(
    server_address=address,
    table='my_table',
    dtypes={'obs': tf.int32, 'r': tf.float32, 'text': tf.string},
    shapes={
      'obs': tf.TensorShape([3, 2]),
      'r': tf.TensorShape([]),
      'text': tf.TensorShape([]),
    },
    max_in_flight_samples_per_worker=1,
  )
  for item in dataset.take(2):
    np.testing.assert_array_equal(
      item.data['obs'].numpy(), [[1, 1], [2, 2], [3, 3]]
    )
    assert item.data['text'].numpy() == b'step3'
  print('TrajectoryDataset ok')

  sample = next(client.sample('legacy', emit_timesteps=False))
  ints, floats = sample.data
  expected = np.array([[10, 13, 16]], np.int32) * np.arange(1, 4)[:, None]
  np.testing.assert_array_equal(ints, expected)
  np.testing.assert_array_equal(floats, [0, 1, 2])
  print('sample legacy (delta encoded) ok')

  timesteps = reverb.TimestepDataset(
    server_address=address,
    table='legacy',
    dtypes=(tf.int32, tf.float32),
    shapes=(tf.TensorShape([3]), tf.TensorShape([])),
    max_in_flight_samples_per_worker=1,
  )
  for t, step in enumerate(timesteps.take(3)):
    np.testing.assert_array_equal(step.data[0].numpy(), expected[t])
    assert float(step.data[1].numpy()) == t
  print('TimestepDataset ok')

  seen = set()
  for sample in client.sample('frames', num_samples=20, emit_timesteps=False):
    frames, steps = sample.data
    check_frames(frames, steps)
    seen.add(int(steps[0]))
  dataset = reverb.TrajectoryDataset(
    server_address=address,
    table='frames',
    dtypes={'frame': tf.uint8, 'step': tf.int32},
    shapes={'frame': tf.TensorShape([2, 84, 84]), 'step': tf.TensorShape([2])},
    max_in_flight_samples_per_worker=2,
  )
  for item in dataset.take(20):
    check_frames(item.data['frame'].numpy(), item.data['step'].numpy())
    seen.add(int(item.data['step'].numpy()[0]))
  assert seen == {0, 10}, seen
  print('frames ok')
  print('ALL OK')


if __name__ == '__main__':
  main(sys.argv[1])
