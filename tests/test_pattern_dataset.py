"""PatternDataset: the pattern engine over a tf.data dataset of steps, run by
the C++ ReverbPatternDataset op (docs/concepts/datasets.md)."""

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb
from tf_reverb import pattern_dataset

structured = reverb.structured

STEP = {
  'obs': np.zeros(2, np.float32),
  'done': False,
  'id': np.int64(0),
  'name': b'',
}


def steps(n, episode_length):
  """Steps 0..n-1; every `episode_length`-th step ends an episode."""
  ids = np.arange(n, dtype=np.int64)
  return tf.data.Dataset.from_tensor_slices(
    {
      'obs': np.stack([ids, -ids], axis=1).astype(np.float32),
      'done': (ids + 1) % episode_length == 0,
      'id': ids,
      'name': [f's{i}'.encode() for i in ids],
    }
  )


def window_config(length, **kwargs):
  return structured.create_config(
    structured.pattern_from_transform(
      STEP,
      lambda s: {
        'obs': s['obs'][-length:],
        'id': s['id'][-1],
        'name': s['name'][-1],
      },
    ),
    'unused',
    **kwargs,
  )


def is_done(step):
  return step['done']


def test_windows_respect_episode_boundaries():
  dataset = reverb.PatternDataset(
    steps(7, 3),
    [window_config(2)],
    respect_episode_boundaries=True,
    is_end_of_episode=is_done,
  )
  assert dataset.element_spec['obs'] == tf.TensorSpec(
    [2, 2], tf.float32, name='obs'
  )
  out = list(dataset.as_numpy_iterator())
  # Episodes [0 1 2] [3 4 5] [6]: windows end at 1, 2, 4, 5.
  assert [int(x['id']) for x in out] == [1, 2, 4, 5]
  np.testing.assert_array_equal(out[0]['obs'], [[0, 0], [1, -1]])
  assert out[3]['name'] == b's5'


def test_windows_span_episodes_when_boundaries_are_ignored():
  dataset = reverb.PatternDataset(
    steps(5, 3),
    [window_config(2)],
    respect_episode_boundaries=False,
    is_end_of_episode=is_done,
  )
  assert [int(x['id']) for x in dataset.as_numpy_iterator()] == [1, 2, 3, 4]


def test_end_of_episode_conditions_and_several_configs():
  last = structured.create_config(
    structured.pattern_from_transform(
      STEP,
      lambda s: {
        'obs': s['obs'][-1:],
        'id': s['id'][-1],
        'name': s['name'][-1],
      },
    ),
    'unused',
    conditions=[structured.Condition.is_end_episode()],
  )
  dataset = reverb.PatternDataset(
    steps(6, 3),
    [window_config(3), last],
    respect_episode_boundaries=True,
    is_end_of_episode=is_done,
  )
  # Leading dims 3 and 1 merge to None.
  assert dataset.element_spec['obs'].shape.as_list() == [None, 2]
  out = [(int(x['id']), x['obs'].shape[0]) for x in dataset.as_numpy_iterator()]
  assert out == [(2, 3), (2, 1), (5, 3), (5, 1)]


def test_runs_inside_a_training_pipeline():
  dataset = reverb.PatternDataset(
    steps(40, 10).repeat(),
    [window_config(4)],
    respect_episode_boundaries=True,
    is_end_of_episode=is_done,
  )
  assert dataset.cardinality() == tf.data.INFINITE_CARDINALITY
  batches = dataset.batch(8).prefetch(2)

  @tf.function
  def total(ds):
    result = tf.constant(0, tf.int64)
    for batch in ds.take(3):
      result += tf.reduce_sum(batch['id'])
    return result

  # Windows end at steps 3..9 of each episode of 10: 7 per episode.
  ends = [e * 10 + k for e in range(4) for k in range(3, 10)]
  assert int(total(batches)) == sum(ends[:24])


def test_pattern_dataset_with_info():
  dataset = pattern_dataset.pattern_dataset_with_info(
    steps(3, 100), [window_config(2)], True, is_done
  )
  sample = next(iter(dataset))
  assert isinstance(sample, reverb.ReplaySample)
  assert sample.info.key.dtype == tf.uint64
  assert int(sample.info.key) == 0
  assert int(sample.data['id']) == 1


def test_configs_get_the_buffer_length_condition():
  config = window_config(3)
  assert not config.conditions
  reverb.PatternDataset(steps(3, 3), [config], True, is_done)
  assert [(c.buffer_length, c.ge) for c in config.conditions] == [(True, 3)]


def test_bad_arguments():
  with pytest.raises(ValueError, match='At least one config'):
    reverb.PatternDataset(steps(3, 3), [], True, is_done)
  with pytest.raises(ValueError, match='scalar tf.bool'):
    reverb.PatternDataset(
      steps(3, 3), [window_config(2)], True, lambda s: s['id']
    )
  bad = structured.Config(flat=[structured.PatternNode(stop=1)], table='t')
  dataset = reverb.PatternDataset(steps(3, 3), [bad], True, is_done)
  with pytest.raises(
    tf.errors.InvalidArgumentError, match='Invalid configuration at position 0'
  ):
    next(iter(dataset))
