"""TFStructuredWriter: the StructuredWriter as graph-mode ops, driven by an
actor loop inside tf.function against the server binary in another process."""

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb

structured = reverb.structured

STEP = {'obs': np.zeros(2, np.float32), 'a': np.int32(0)}
FIFO_TABLE = (
  'tables { table_name: "t" sampler { fifo: true } '
  'remover { fifo: true } max_size: 1000 max_times_sampled: 1 '
  'rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 '
  'min_diff: -1e300 max_diff: 1e300 } }'
)


def window_configs(table='t'):
  """Items of the last 3 observations and the action before the newest."""
  pattern = structured.pattern_from_transform(
    STEP, lambda s: {'obs': s['obs'][-3:], 'a': s['a'][-2]}
  )
  return [structured.create_config(pattern, table)]


def items(address, table='t'):
  """(a, obs) of every item of a FIFO table with max_times_sampled=1."""
  client = reverb.Client(address)
  size = client.server_info()[table].current_size
  out = []
  for sample in client.sample(table, size, emit_timesteps=False):
    a, obs = sample.data  # dm-tree order
    out.append((int(a), obs[:, 0].astype(int).tolist()))
  return out


def test_actor_loop_in_tf_function_writes_to_the_server_binary(binary_server):
  server = binary_server(f'--config={FIFO_TABLE}', '--port=0')
  writer = reverb.TFStructuredWriter(server.address, window_configs())

  @tf.function
  def actor(num_steps):
    for i in tf.range(num_steps):
      writer.append({'obs': tf.stack([tf.cast(i, tf.float32), 0.0]), 'a': i})
      if (i + 1) % 5 == 0:
        writer.end_episode()
    writer.flush()

  actor(tf.constant(12))
  # Episodes 0-4, 5-9, 10-11: windows end at episode steps >= 2.
  expected = [(i - 1, [i - 2, i - 1, i]) for i in (2, 3, 4, 7, 8, 9)]
  assert items(server.address) == expected
  # Running the graph again continues the open episode (steps 10, 11).
  actor(tf.constant(3))
  assert items(server.address) == [
    (11, [10, 11, 0]),
    (0, [11, 0, 1]),
    (1, [0, 1, 2]),
  ]


def test_eager_calls_and_errors():
  with reverb.Server([reverb.Table.queue('q', 1)]) as server:
    address = f'localhost:{server.port}'
    with pytest.raises(ValueError, match='At least one config'):
      reverb.TFStructuredWriter(address, [])
    bad = structured.Config(flat=[structured.PatternNode(stop=1)], table='q')
    with pytest.raises(ValueError, match='Invalid configuration at position 0'):
      reverb.TFStructuredWriter(address, [bad])
    last = structured.pattern_from_transform(STEP, lambda s: [s['a'][-1]])
    writer = reverb.TFStructuredWriter(
      address, [structured.create_config(last, 'q')]
    )
    writer.append({'obs': np.zeros(2, np.float32), 'a': np.int32(0)})
    writer.append({'obs': np.zeros(2, np.float32), 'a': np.int32(1)})
    # The queue holds one item, so the second waits for room.
    with pytest.raises(tf.errors.DeadlineExceededError):
      writer.flush(timeout_ms=200)
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match='Flattened data has an unexpected length',
    ):
      writer.append({'a': np.int32(2)})
