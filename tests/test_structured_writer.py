"""reverb.structured: the pattern language and the StructuredWriter, against
real in-process servers (docs/concepts/writers-and-patterns.md)."""

import numpy as np
import pytest
import tensorflow as tf

import tf_reverb as reverb
from tf_reverb.proto import patterns_pb2

structured = reverb.structured
Condition = structured.Condition

STEP = {
  'obs': np.zeros(2, np.float32),
  'action': np.int32(0),
  'reward': np.float32(0),
}


def step(i):
  return {
    'obs': np.array([i, -i], np.float32),
    'action': np.int32(i),
    'reward': np.float32(i / 10),
  }


def fifo_table(name, max_size=1000, max_times_sampled=1):
  return reverb.Table(
    name,
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    max_size,
    reverb.rate_limiters.MinSize(1),
    max_times_sampled=max_times_sampled,
  )


@pytest.fixture
def tables_server():
  with reverb.Server(
    [fifo_table('a'), fifo_table('b'), reverb.Table.queue('q', 1)]
  ) as s:
    yield s


def drain(client, table):
  """Every item of a FIFO table with max_times_sampled=1, oldest first; the
  data of each is the flat list of its columns (the tables have no
  signature)."""
  size = client.server_info()[table].current_size
  if not size:
    return []
  return list(client.sample(table, num_samples=size, emit_timesteps=False))


def test_reference_nodes_become_pattern_nodes():
  pattern = structured.pattern_from_transform(
    STEP, lambda s: (s['obs'][-2:], s['action'][-1], s['reward'][-5:-1:2])
  )
  # dm-tree order: action=0, obs=1, reward=2.
  assert pattern[0] == patterns_pb2.PatternNode(flat_source_index=1, start=-2)
  assert pattern[1] == patterns_pb2.PatternNode(flat_source_index=0, stop=-1)
  assert pattern[2] == patterns_pb2.PatternNode(
    flat_source_index=2, start=-5, stop=-1, step=2
  )
  assert not pattern[0].HasField('stop')
  with pytest.raises(ValueError, match='Unsupported key type str'):
    structured.create_reference_step(STEP)['obs']['x']  # pylint: disable=expression-not-assigned


def test_create_config_and_unpack_pattern_round_trip():
  pattern = structured.pattern_from_transform(
    STEP, lambda s: {'o': s['obs'][-2:], 'r': {'x': s['reward'][-1]}}
  )
  config = structured.create_config(pattern, 'a')
  assert config.table == 'a'
  assert config.priority.constant_fn.value == 1.0
  assert len(config.flat) == 2
  assert structured.unpack_pattern(config) == pattern
  bare = structured.Config(flat=[patterns_pb2.PatternNode(stop=-1)], table='a')
  assert structured.unpack_pattern(bare) == list(bare.flat)


@pytest.mark.parametrize(
  'build, expected',
  [
    (lambda: Condition.step_index() == 3, 'step_index: true eq: 3'),
    (
      lambda: Condition.step_index() % 4 == 1,
      'step_index: true mod_eq { mod: 4 eq: 1 }',
    ),
    (
      lambda: Condition.steps_since_applied() >= 5,
      'steps_since_applied: true ge: 5',
    ),
    (
      lambda: Condition.steps_since_applied() > 5,
      'steps_since_applied: true ge: 6',
    ),
    (
      lambda: Condition.step_index() < 2,
      'step_index: true ge: 2 inverse: true',
    ),
    (
      lambda: Condition.step_index() <= 2,
      'step_index: true ge: 3 inverse: true',
    ),
    (
      lambda: Condition.step_index() != 2,
      'step_index: true eq: 2 inverse: true',
    ),
    (lambda: Condition.data(STEP)['action'] == 1, 'flat_source_index: 0 eq: 1'),
    (
      lambda: Condition.data(STEP)['reward'] % 2 != 0,
      'flat_source_index: 2 mod_eq { mod: 2 eq: 0 } inverse: true',
    ),
    (Condition.is_end_episode, 'is_end_episode: true eq: 1'),
  ],
)
def test_condition_builders(build, expected):
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top

  assert build() == text_format.Parse(expected, patterns_pb2.Condition())


def test_td_error_priority_builder():
  priority = structured.td_error(0.9, STEP, lambda s: s['reward'])
  assert priority.td_error.max_priority_weight == pytest.approx(0.9)
  assert priority.td_error.flat_source_index == 2
  with pytest.raises(ValueError, match='max_priority_weight'):
    structured.td_error(1.5, STEP, lambda s: s['reward'])
  with pytest.raises(ValueError, match='must return a leaf'):
    structured.td_error(0.5, STEP, lambda s: s)


def test_infer_signature_uses_ceil_and_names_paths():
  spec = tf.nest.map_structure(
    tf.TensorSpec.from_tensor, tf.nest.map_structure(tf.constant, STEP)
  )
  pattern = structured.pattern_from_transform(
    STEP, lambda s: {'obs': s['obs'][-4::3], 'act': {'last': s['action'][-1]}}
  )
  signature = structured.infer_signature(
    [structured.create_config(pattern, 'a')], spec
  )
  # ceil(4 / 3) = 2 rows (floor would say 1).
  assert signature['obs'] == tf.TensorSpec([2, 2], tf.float32, name='obs')
  assert signature['act']['last'] == tf.TensorSpec(
    [], tf.int32, name='act/last'
  )


def test_infer_signature_merges_leading_dims_and_rejects_conflicts():
  spec = tf.nest.map_structure(
    tf.TensorSpec.from_tensor, tf.nest.map_structure(tf.constant, STEP)
  )
  two = structured.create_config(
    structured.pattern_from_transform(STEP, lambda s: [s['obs'][-2:]]), 'a'
  )
  three = structured.create_config(
    structured.pattern_from_transform(STEP, lambda s: [s['obs'][-3:]]), 'a'
  )
  merged = structured.infer_signature([two, three], spec)
  assert merged[0].shape.as_list() == [None, 2]
  with pytest.raises(ValueError, match='At least one config'):
    structured.infer_signature([], spec)
  other_table = structured.create_config(
    structured.pattern_from_transform(STEP, lambda s: [s['obs'][-2:]]), 'b'
  )
  with pytest.raises(ValueError, match='same table'):
    structured.infer_signature([two, other_table], spec)
  other_dtype = structured.create_config(
    structured.pattern_from_transform(STEP, lambda s: [s['action'][-2:]]), 'a'
  )
  with pytest.raises(ValueError, match='multiple dtypes'):
    structured.infer_signature([two, other_dtype], spec)
  squeezed = structured.create_config(
    structured.pattern_from_transform(STEP, lambda s: [s['obs'][-1]]), 'a'
  )
  with pytest.raises(ValueError, match='incompatible shapes'):
    structured.infer_signature([two, squeezed], spec)


def test_n_step_transitions_reach_the_table(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  pattern = structured.pattern_from_transform(
    STEP,
    lambda s: {
      'obs': s['obs'][-3:],
      'action': s['action'][-3],
      'reward': s['reward'][-3:],
    },
  )
  writer = client.structured_writer(
    [
      structured.create_config(
        pattern, 'a', priority=structured.constant_priority_fn(2.5)
      )
    ]
  )
  for i in range(5):
    writer.append(step(i))
  writer.flush()
  items = drain(client, 'a')
  assert len(items) == 3
  for first, item in enumerate(items):
    action, obs, reward = item.data  # dm-tree order of the pattern
    np.testing.assert_array_equal(
      obs, [[i, -i] for i in range(first, first + 3)]
    )
    assert action == first
    np.testing.assert_allclose(
      reward, [i / 10 for i in range(first, first + 3)]
    )
    assert item.info.priority == 2.5


def test_conditions_select_the_steps(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  last = structured.pattern_from_transform(STEP, lambda s: [s['action'][-1]])
  writer = client.structured_writer(
    [
      structured.create_config(
        last, 'a', conditions=[Condition.step_index() % 3 == 0]
      ),
      structured.create_config(
        last, 'b', conditions=[Condition.data(STEP)['action'] >= 4]
      ),
    ]
  )
  for i in range(7):
    writer.append(step(i))
  writer.flush()
  assert [int(item.data[0]) for item in drain(client, 'a')] == [0, 3, 6]
  assert [int(item.data[0]) for item in drain(client, 'b')] == [4, 5, 6]


def test_end_of_episode_configs_and_buffer_clearing(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  window = structured.pattern_from_transform(STEP, lambda s: [s['action'][-2:]])
  tail = structured.pattern_from_transform(STEP, lambda s: [s['action'][-1]])
  writer = client.structured_writer(
    [
      structured.create_config(window, 'a'),
      structured.create_config(
        tail, 'b', conditions=[Condition.is_end_episode()]
      ),
    ]
  )
  for i in range(3):
    writer.append(step(i))
  writer.end_episode()
  writer.append(step(10))  # a new episode: no window spans the boundary
  writer.append(step(11))
  writer.flush()
  assert [list(item.data[0]) for item in drain(client, 'a')] == [
    [0, 1],
    [1, 2],
    [10, 11],
  ]
  assert [int(item.data[0]) for item in drain(client, 'b')] == [2]


def test_td_error_priorities(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  pattern = structured.pattern_from_transform(
    STEP, lambda s: [s['reward'][-2:]]
  )
  writer = client.structured_writer(
    [
      structured.create_config(
        pattern,
        'a',
        priority=structured.td_error(0.5, STEP, lambda s: s['reward']),
      )
    ]
  )
  writer.append(step(2))
  writer.append(step(-6))
  writer.flush()
  (item,) = drain(client, 'a')
  # |td| = [0.2, 0.6]: 0.5 * 0.6 + 0.5 * 0.4.
  assert item.info.priority == pytest.approx(0.5, rel=1e-5)


def test_partial_steps_make_one_item(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  pattern = structured.pattern_from_transform(
    STEP, lambda s: [s['obs'][-1], s['action'][-1]]
  )
  writer = client.structured_writer([structured.create_config(pattern, 'a')])
  writer.append(
    {'obs': step(1)['obs'], 'action': None, 'reward': None}, partial_step=True
  )
  assert writer.step_is_open
  writer.append({'obs': None, 'action': np.int32(7), 'reward': np.float32(0)})
  assert not writer.step_is_open
  writer.flush()
  (item,) = drain(client, 'a')
  np.testing.assert_array_equal(item.data[0], [1, -1])
  assert item.data[1] == 7


def test_unused_columns_are_not_written(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  pattern = structured.pattern_from_transform(STEP, lambda s: [s['action'][-1]])
  writer = client.structured_writer([structured.create_config(pattern, 'a')])
  writer.append(step(1))
  # 'obs' changes shape: fine, it is never written.
  writer.append(
    {'obs': np.zeros((3, 3)), 'action': np.int32(2), 'reward': np.float32(0)}
  )
  writer.flush()
  assert [int(item.data[0]) for item in drain(client, 'a')] == [1, 2]


def test_errors_name_the_problem(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  with pytest.raises(ValueError, match='At least one config must be provided'):
    client.structured_writer([])
  bad = structured.Config(
    flat=[patterns_pb2.PatternNode(flat_source_index=0, start=1)], table='a'
  )
  with pytest.raises(ValueError, match='Invalid configuration at position 0'):
    client.structured_writer([bad])
  pattern = structured.pattern_from_transform(STEP, lambda s: [s['obs'][-1]])
  writer = client.structured_writer([structured.create_config(pattern, 'a')])
  writer.append(step(0))
  with pytest.raises(
    ValueError,
    match='Flattened data has an unexpected length, got 2 but wanted 3',
  ):
    writer.append({'obs': step(0)['obs'], 'action': 1})
  with pytest.raises(ValueError, match=r"path=\('obs',\)"):
    writer.append(
      {
        'obs': np.zeros(3, np.float32),
        'action': np.int32(0),
        'reward': np.float32(0),
      }
    )


def test_flush_timeout_raises_deadline_exceeded(tables_server):
  client = reverb.Client(f'localhost:{tables_server.port}')
  pattern = structured.pattern_from_transform(STEP, lambda s: [s['action'][-1]])
  writer = client.structured_writer([structured.create_config(pattern, 'q')])
  writer.append(step(0))
  writer.append(step(1))  # the queue holds one item: this one blocks
  with pytest.raises(reverb.DeadlineExceededError):
    writer.flush(timeout_ms=200)
  assert [
    int(s.data[0]) for s in client.sample('q', 1, emit_timesteps=False)
  ] == [0]
  writer.flush(timeout_ms=60_000)


def test_reverb_type_names_for_annotations():
  """rlds and Acme annotate with these names at import time."""
  structured = reverb.structured
  step = {'obs': np.zeros(2, np.float32), 'a': np.int32(0)}

  def transform(ref: structured.ReferenceStep) -> structured.Pattern:
    return {'obs': ref['obs'][-2:]}

  fn: structured.PatternTransform = transform
  pattern = structured.pattern_from_transform(step, fn)
  assert isinstance(pattern['obs'], structured.PatternNode)
  condition = structured.Condition.step_index() % 2 == 0
  assert isinstance(condition, structured.ConditionProto)
  assert structured.ConditionProto is reverb.structured.patterns_pb2.Condition
  config = structured.create_config(pattern, 'my_table', conditions=[condition])
  assert config.conditions[0] == condition
