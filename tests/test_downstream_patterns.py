"""Downstream code on tf_reverb under ``import reverb``: the call patterns of
Acme's Reverb adders and datasets, TF-Agents' Reverb replay buffer, observers
and variable container, and rlds' pattern helpers.

Each test is a small program of our own that makes the same calls, with the
same arguments and expectations, as the library code its comment names (no
code of those libraries is copied), against real servers on real ports.
"""

import collections
import itertools
import operator
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import tensor_spec as tf_tensor_spec
import tree

import tf_reverb

# The libraries `import reverb`; child processes keep their own environment.
tf_reverb.install_as_reverb(child_processes=False)
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position
from reverb import item_selectors  # pylint: disable=g-import-not-at-top,wrong-import-position
from reverb import rate_limiters  # pylint: disable=g-import-not-at-top,wrong-import-position
from reverb import structured_writer as sw  # pylint: disable=g-import-not-at-top,wrong-import-position

from tests.conftest import run_python  # pylint: disable=g-import-not-at-top,wrong-import-position

# Acme's step and trajectory structures (acme/adders/reverb/base.py) and its
# transition (acme/types.py), as namedtuples of the same fields.
Step = collections.namedtuple(
  'Step',
  ['observation', 'action', 'reward', 'discount', 'start_of_episode', 'extras'],
)
Trajectory = Step
Transition = collections.namedtuple(
  'Transition',
  ['observation', 'action', 'reward', 'discount', 'next_observation', 'extras'],
)
# TF-Agents' trajectory (tf_agents/trajectories/trajectory.py).
AgentsTrajectory = collections.namedtuple(
  'Trajectory',
  [
    'step_type',
    'observation',
    'action',
    'policy_info',
    'next_step_type',
    'reward',
    'discount',
  ],
)

OBS_SHAPE = (2,)


def _step_spec(extras=()):
  """The acme step spec: obs [2] f32, action i32, reward/discount f32."""
  return Step(
    observation=tf.TensorSpec(OBS_SHAPE, tf.float32),
    action=tf.TensorSpec([], tf.int32),
    reward=tf.TensorSpec([], tf.float32),
    discount=tf.TensorSpec([], tf.float32),
    start_of_episode=tf.TensorSpec([], tf.bool),
    extras=extras,
  )


def _named(spec_nest, outer=()):
  """Specs named by path, with optional outer dims (acme's signature())."""
  return tree.map_structure_with_path(
    lambda path, s: tf.TensorSpec(
      [*outer, *s.shape], s.dtype, name='/'.join(str(p) for p in path)
    ),
    spec_nest,
  )


def _obs(t):
  return np.full(OBS_SHAPE, t, np.float32)


def _table(name, signature=None, sampler=None, max_size=1000):
  return reverb.Table(
    name=name,
    sampler=sampler or reverb.selectors.Uniform(),
    remover=reverb.selectors.Fifo(),
    max_size=max_size,
    rate_limiter=reverb.rate_limiters.MinSize(1),
    signature=signature,
  )


def _all_items(client, table, order):
  """Every item of `table` (sampled until each key was seen), sorted by
  `order(data)`; data is the flat list of the item's columns."""
  size = client.server_info()[table].current_size
  items = {}
  while len(items) < size:
    for sample in client.sample(table, num_samples=50, emit_timesteps=False):
      items[sample.info.key] = sample.data
  return sorted(items.values(), key=lambda data: order(data))


def _by_observations(data):
  """Items ordered by their observation column (column 0), as a list."""
  return np.asarray(data[0]).ravel().tolist()


class _AcmeLikeAdder:
  """The writer life cycle of acme/adders/reverb/base.py's ReverbAdder.

  add_first appends the observation as a partial step; add appends the
  action/reward/discount (completing the step) and the next observation
  (partial); the last step of an episode is completed with zeros; reset
  ends the episode (clear_buffers=True) and keeps the writer.
  """

  def __init__(self, client, max_sequence_length, max_in_flight_items=2):
    self._client = client
    self._max_sequence_length = max_sequence_length
    self._max_in_flight_items = max_in_flight_items
    self.__writer = None

  @property
  def _writer(self):
    if self.__writer is None:
      self.__writer = self._client.trajectory_writer(
        num_keep_alive_refs=self._max_sequence_length, validate_items=True
      )
    return self.__writer

  def add_first(self, observation):
    self._writer.append(
      dict(observation=observation, start_of_episode=True), partial_step=True
    )

  def add(self, action, reward, next_observation, last):
    current_step = dict(
      action=action, reward=reward, discount=np.float32(0.0 if last else 1.0)
    )
    self._writer.append(current_step)
    self._writer.append(
      dict(observation=next_observation, start_of_episode=False),
      partial_step=True,
    )
    self._write()
    if last:
      self._writer.append(tree.map_structure(np.zeros_like, current_step))
      self._write_last()
      self.reset()

  def reset(self, timeout_ms=None):
    self._writer.end_episode(clear_buffers=True, timeout_ms=timeout_ms)

  def close(self):
    # ReverbAdder.__del__: flush with a timeout, then close.
    try:
      self._writer.flush(0, timeout_ms=10_000)
    except reverb.DeadlineExceededError:
      raise
    self._writer.close()

  def _write(self):
    raise NotImplementedError

  def _write_last(self):
    raise NotImplementedError


def _calculate_priorities(priority_fns, trajectory):
  """acme/adders/reverb/utils.py: numpy view only if some fn needs it."""
  if any(fn is not None for fn in priority_fns.values()):
    trajectory = tree.map_structure(lambda col: col.numpy(), trajectory)
  return {
    table: (fn(trajectory) if fn else 1.0) for table, fn in priority_fns.items()
  }


# acme/adders/reverb/sequence.py (SequenceAdder, ZERO_PAD end behaviour) on
# acme/adders/reverb/base.py's writer life cycle.
def test_acme_sequence_adder_zero_pad():
  seq_len, period = 3, 2
  signature = _named(_step_spec(), outer=(seq_len,))
  with reverb.Server(
    tables=[_table('priority_table', signature)], port=None
  ) as server:
    client = server.localhost_client()

    class SequenceAdder(_AcmeLikeAdder):
      def __init__(self):
        super().__init__(client, max_sequence_length=seq_len + 1)
        self.priority_fns = {
          'priority_table': lambda traj: float(np.sum(traj.reward)) + 1.0
        }

      def _maybe_create_item(
        self, sequence_length, end_of_episode=False, force=False
      ):
        steps = self._writer.episode_steps
        first_write = steps == sequence_length
        period_reached = (
          steps > sequence_length and (steps - sequence_length) % period == 0
        )
        if not first_write and not period_reached and not force:
          return
        if end_of_episode:
          get_traj = operator.itemgetter(slice(-sequence_length, None))
        else:
          get_traj = operator.itemgetter(slice(-sequence_length - 1, -1))
        history = self._writer.history
        trajectory = Trajectory(
          **tree.map_structure(get_traj, history), extras=()
        )
        for table, priority in _calculate_priorities(
          self.priority_fns, trajectory
        ).items():
          self._writer.create_item(table, priority, trajectory)
          self._writer.flush(self._max_in_flight_items)

      def _write(self):
        self._maybe_create_item(seq_len)

      def _write_last(self):
        steps = self._writer.episode_steps
        if steps <= seq_len:
          delta = seq_len - steps
        else:
          delta = (period - (steps - seq_len)) % period
        zero_step = tree.map_structure(
          lambda x: np.zeros_like(x[-2].numpy()), self._writer.history
        )
        for _ in range(delta):
          self._writer.append(zero_step)
        self._maybe_create_item(
          seq_len, end_of_episode=True, force=delta == 0 or steps < seq_len
        )

    adder = SequenceAdder()
    for episode in range(2):
      adder.add_first(_obs(100 * episode))
      for t in range(5):
        adder.add(
          np.int32(t), np.float32(t), _obs(100 * episode + t + 1), last=t == 4
        )
    adder.close()

    items = _all_items(client, 'priority_table', _by_observations)
    # Per episode: rows 0-2 (3rd add), rows 2-4 (5th add), then rows 4-6:
    # row 5 is the final observation completed by the zero step, row 6 the
    # zero padding built from `history[-2].numpy()`.
    assert len(items) == 6
    first, second, padded = items[:3]
    np.testing.assert_array_equal(first[0][:, 0], [0, 1, 2])  # observation
    np.testing.assert_array_equal(first[4], [True, False, False])
    np.testing.assert_array_equal(second[0][:, 0], [2, 3, 4])
    np.testing.assert_array_equal(padded[0][:, 0], [4, 5, 0])
    np.testing.assert_array_equal(padded[1], [4, 0, 0])  # action
    np.testing.assert_array_equal(padded[3], [0, 0, 0])  # discount
    np.testing.assert_array_equal(items[3][0][:, 0], [100, 101, 102])
    dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address,
      table='priority_table',
      max_in_flight_samples_per_worker=4,
    )
    sample = next(iter(dataset.batch(2, drop_remainder=True)))
    assert sample.data.observation.shape == (2, seq_len, *OBS_SHAPE)
    assert sample.data.start_of_episode.dtype == tf.bool


# acme/adders/reverb/transition.py (NStepTransitionAdder): absolute history
# indices that restart with each episode, new columns appended mid-episode
# with a computed `partial_step`, Transition items of squeezed columns.
def test_acme_n_step_transition_adder():
  n_step, discount = 2, 0.5
  signature = _named(
    Transition(
      observation=tf.TensorSpec(OBS_SHAPE, tf.float32),
      action=tf.TensorSpec([], tf.int32),
      reward=tf.TensorSpec([], tf.float32),
      discount=tf.TensorSpec([], tf.float32),
      next_observation=tf.TensorSpec(OBS_SHAPE, tf.float32),
      extras=(),
    )
  )
  with reverb.Server(tables=[_table('priority_table', signature)]) as server:
    client = reverb.Client(f'localhost:{server.port}')

    class NStepAdder(_AcmeLikeAdder):
      def __init__(self):
        super().__init__(
          client, max_sequence_length=n_step + 1, max_in_flight_items=5
        )
        self.first_idx = self.last_idx = 0

      def add(self, *args, **kwargs):  # pylint: disable=arguments-differ
        if self._writer.episode_steps >= n_step:
          self.first_idx += 1
        self.last_idx += 1
        super().add(*args, **kwargs)

      def reset(self, timeout_ms=None):
        super().reset(timeout_ms)
        self.first_idx = self.last_idx = 0

      def _write(self):
        history = self._writer.history
        s, a = tree.map_structure(
          lambda x: x[self.first_idx],
          (history['observation'], history['action']),
        )
        s_ = tree.map_structure(
          lambda x: x[self.last_idx], history['observation']
        )
        rewards, discounts = tree.map_structure(
          lambda x: x[self.first_idx : self.last_idx].numpy(),
          (history['reward'], history['discount']),
        )
        total, ret = np.float32(1.0), np.float32(0.0)
        for r, d in zip(rewards, discounts):
          ret += total * r
          total *= np.float32(discount) * d
        self._writer.append(
          dict(n_step_return=np.float32(ret), total_discount=total),
          partial_step=self._writer.episode_steps <= self.last_idx,
        )
        history = self._writer.history
        n_step_return, total_discount = tree.map_structure(
          lambda x: x[-1], (history['n_step_return'], history['total_discount'])
        )
        transition = Transition(
          observation=s,
          action=a,
          reward=n_step_return,
          discount=total_discount,
          next_observation=s_,
          extras=(history['extras'] if 'extras' in history else ()),
        )
        for table, priority in _calculate_priorities(
          {'priority_table': None}, transition
        ).items():
          self._writer.create_item(
            table=table, priority=priority, trajectory=transition
          )
          self._writer.flush(self._max_in_flight_items)

      def _write_last(self):
        self.first_idx += 1
        while self.first_idx < self.last_idx:
          self._write()
          self.first_idx += 1

    adder = NStepAdder()
    for episode in range(2):
      base = 10 * episode
      adder.add_first(_obs(base))
      for t in range(3):
        adder.add(
          np.int32(base + t), np.float32(1.0), _obs(base + t + 1), last=t == 2
        )
    adder.close()

    items = _all_items(
      client,
      'priority_table',
      lambda data: [float(data[0][0]), float(data[4][0])],
    )
    # Per episode of 3 steps: (0->1), (0->2), (1->3), then the tail (2->3).
    assert len(items) == 8
    pairs = [
      (int(obs[0]), int(next_obs[0])) for obs, _, _, _, next_obs in items
    ]
    assert pairs == [
      (0, 1),
      (0, 2),
      (1, 3),
      (2, 3),
      (10, 11),
      (10, 12),
      (11, 13),
      (12, 13),
    ]
    assert [float(item[2]) for item in items[:4]] == [1.0, 1.5, 1.5, 1.0]
    dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address,
      table='priority_table',
      max_in_flight_samples_per_worker=2,
    )
    sample = next(iter(dataset))
    assert isinstance(sample.data, tuple) and len(sample.data) == 6
    assert sample.data.next_observation.shape == OBS_SHAPE


# acme/adders/reverb/episode.py (EpisodeAdder with padding_fn): padding
# built from `col[-1].shape`/`col[-1].dtype`, `history.get('extras', ())`,
# the whole episode as `x[:]`.
def test_acme_episode_adder_with_padding():
  max_len = 5
  signature = _named(_step_spec(), outer=(max_len,))
  with reverb.Server([_table('priority_table', signature)]) as server:
    client = server.localhost_client()

    class EpisodeAdder(_AcmeLikeAdder):
      def __init__(self):
        super().__init__(client, max_sequence_length=max_len)

      def _write(self):
        pass

      def _write_last(self):
        if self._writer.episode_steps < max_len:
          history = self._writer.history
          padding_step = dict(
            observation=history['observation'],
            action=history['action'],
            reward=history['reward'],
            discount=history['discount'],
            extras=history.get('extras', ()),
          )
          padding_step = tree.map_structure(
            lambda col: np.zeros(col[-1].shape, col[-1].dtype), padding_step
          )
          padding_step['start_of_episode'] = False
          while self._writer.episode_steps < max_len:
            self._writer.append(padding_step)
        trajectory = Trajectory(
          **tree.map_structure(lambda x: x[:], self._writer.history), extras=()
        )
        self._writer.create_item('priority_table', 1.0, trajectory)
        self._writer.flush(self._max_in_flight_items)

    adder = EpisodeAdder()
    adder.add_first(_obs(1))
    adder.add(np.int32(7), np.float32(2.0), _obs(2), last=False)
    adder.add(np.int32(8), np.float32(3.0), _obs(3), last=True)
    adder.close()
    (item,) = _all_items(client, 'priority_table', _by_observations)
    np.testing.assert_array_equal(item[0][:, 0], [1, 2, 3, 0, 0])
    np.testing.assert_array_equal(item[1], [7, 8, 0, 0, 0])
    assert item[1].dtype == np.int32


# acme/adders/reverb/structured.py (StructuredAdder, create_sequence_config,
# create_n_step_transition_config) with reverb.structured_writer as `sw`.
def test_acme_structured_adder():
  step_spec = _named(_step_spec())
  seq_len, period = 3, 2

  def sequence_pattern(n):
    return sw.pattern_from_transform(
      step_spec,
      lambda step: Trajectory(*tree.map_structure(lambda x: x[-n:], step)),
    )

  configs = [
    sw.create_config(
      pattern=sequence_pattern(seq_len),
      table='sequences',
      conditions=[
        sw.Condition.step_index() >= seq_len - 1,
        sw.Condition.step_index() % period == (seq_len - 1) % period,
      ],
    )
  ]
  for x in range(1, seq_len):
    configs.append(
      sw.create_config(
        pattern=sequence_pattern(x),
        table='sequences',
        conditions=[
          sw.Condition.is_end_episode(),
          sw.Condition.step_index() == x - 1,
        ],
      )
    )

  def n_step_pattern(n):
    ref = sw.create_reference_step(step_spec)
    get_first = lambda x: x[-(n + 1) : -n]
    get_all = lambda x: x[-(n + 1) : -1]
    return Trajectory(
      observation=tree.map_structure(
        lambda x: x[-(n + 1) :: n], ref.observation
      ),
      action=tree.map_structure(get_first, ref.action),
      reward=tree.map_structure(get_all, ref.reward),
      discount=tree.map_structure(get_all, ref.discount),
      start_of_episode=tree.map_structure(get_first, ref.start_of_episode),
      extras=tree.map_structure(get_first, ref.extras),
    )

  configs.append(
    sw.create_config(pattern=n_step_pattern(1), table='transitions')
  )
  signatures = {}
  for table, table_configs in itertools.groupby(configs, lambda c: c.table):
    signatures[table] = sw.infer_signature(list(table_configs), step_spec)
  assert signatures['transitions'].observation.shape == [2, *OBS_SHAPE]
  assert signatures['sequences'].observation.shape.as_list() == [
    None,
    *OBS_SHAPE,
  ]

  with reverb.Server(
    [
      _table('sequences', signatures['sequences']),
      _table('transitions', signatures['transitions']),
    ]
  ) as server:
    client = server.localhost_client()
    writer = client.structured_writer(configs)
    none_step = tree.map_structure(lambda _: None, step_spec)
    make_step = lambda **kw: Step(**{**none_step._asdict(), **kw})
    writer.append(
      data=make_step(observation=_obs(0), start_of_episode=True),
      partial_step=True,
    )
    writer.flush(2)
    for t in range(4):
      assert writer.step_is_open
      current = make_step(
        action=np.int32(t), reward=np.float32(t), discount=np.float32(1.0)
      )
      writer.append(current)
      writer.append(
        data=make_step(observation=_obs(t + 1), start_of_episode=False),
        partial_step=True,
      )
      writer.flush(2)
    writer.append(
      tree.map_structure(
        lambda x: None if x is None else np.zeros_like(x), current
      )
    )
    writer.end_episode(clear_buffers=True, timeout_ms=None)
    writer.flush(0, timeout_ms=10_000)

    sequences = _all_items(client, 'sequences', _by_observations)
    assert [list(s[0][:, 0]) for s in sequences] == [[0, 1, 2], [2, 3, 4]]
    transitions = _all_items(client, 'transitions', _by_observations)
    assert [list(s[0][:, 0]) for s in transitions] == [
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 4],
    ]
    dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address,
      table='transitions',
      max_in_flight_samples_per_worker=1,
    )
    sample = next(iter(dataset))
    assert sample.data.action.shape == (1,)


# acme/utils/reverb_utils.py (make_replay_table_from_info): a Table rebuilt
# from a TableInfo of server_info(), signature included.
def test_acme_replay_table_from_info():
  signature = _named(_step_spec(), outer=(None,))
  with reverb.Server(
    [
      reverb.Table(
        name='replay',
        sampler=reverb.selectors.Prioritized(0.6),
        remover=reverb.selectors.Fifo(),
        max_size=10,
        rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=2.0, min_size_to_sample=1, error_buffer=4.0
        ),
        max_times_sampled=3,
        signature=signature,
      )
    ]
  ) as server:
    info = server.localhost_client().server_info()['replay']

  def selector(options):
    one_of = options.WhichOneof('distribution')
    if one_of == 'fifo':
      return item_selectors.Fifo()
    if one_of == 'prioritized':
      return item_selectors.Prioritized(options.prioritized.priority_exponent)
    raise AssertionError(one_of)

  limiter = info.rate_limiter_info
  table = reverb.Table(
    name=info.name,
    sampler=selector(info.sampler_options),
    remover=selector(info.remover_options),
    max_size=info.max_size,
    rate_limiter=rate_limiters.SampleToInsertRatio(
      samples_per_insert=limiter.samples_per_insert,
      min_size_to_sample=limiter.min_size_to_sample,
      error_buffer=(limiter.min_diff, limiter.max_diff),
    ),
    max_times_sampled=info.max_times_sampled,
    signature=info.signature,
  )
  with reverb.Server(tables=[table]) as server:
    rebuilt = server.localhost_client().server_info()['replay']
  assert rebuilt.sampler_options == info.sampler_options
  assert rebuilt.rate_limiter_info.min_diff == limiter.min_diff
  assert rebuilt.max_times_sampled == 3
  assert rebuilt.signature == info.signature


# acme/datasets/reverb.py (make_reverb_dataset): TrajectoryDatasets built
# by from_table_signature inside `interleave`, a table->weight mapping
# through sample_from_datasets, batch/prefetch, as_numpy_iterator.
def test_acme_make_reverb_dataset():
  signature = _named(_step_spec(), outer=(2,))
  with reverb.Server([_table('a', signature), _table('b', signature)]) as s:
    address = f'localhost:{s.port}'
    client = reverb.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for t in range(3):
        writer.append(
          dict(
            observation=_obs(t),
            action=np.int32(t),
            reward=np.float32(t),
            discount=np.float32(1),
            start_of_episode=t == 0,
          )
        )
        if writer.episode_steps >= 2:
          trajectory = Trajectory(
            **tree.map_structure(lambda x: x[-2:], writer.history), extras=()
          )
          writer.create_item('a', 1.0, trajectory)
          writer.create_item('b', 1.0, trajectory)

    def make_dataset(unused_idx):
      datasets = [
        reverb.TrajectoryDataset.from_table_signature(
          server_address=address,
          table=table,
          max_in_flight_samples_per_worker=4,
        )
        for table in ('a', 'b')
      ]
      dataset = tf.data.Dataset.sample_from_datasets(datasets, [0.5, 0.5])
      return dataset.batch(2, drop_remainder=True)

    dataset = (
      tf.data.Dataset.range(2)
      .interleave(
        map_func=make_dataset,
        cycle_length=2,
        num_parallel_calls=2,
        deterministic=False,
      )
      .prefetch(2)
    )
    sample = next(dataset.as_numpy_iterator())
    assert isinstance(sample, reverb.ReplaySample)
    assert isinstance(sample.info, reverb.SampleInfo)
    assert sample.info.key.dtype == np.uint64
    assert sample.data.observation.shape == (2, 2, *OBS_SHAPE)
    assert sample.data.start_of_episode.dtype == np.bool_


def _agents_spec():
  """A TF-Agents collect data spec: bounded action, empty policy_info."""
  return AgentsTrajectory(
    step_type=tf.TensorSpec([], tf.int32, 'step_type'),
    observation={'pos': tf.TensorSpec(OBS_SHAPE, tf.float32, 'pos')},
    action=tf_tensor_spec.BoundedTensorSpec([], tf.int64, 0, 3, 'action'),
    policy_info=(),
    next_step_type=tf.TensorSpec([], tf.int32, 'step_type'),
    reward=tf.TensorSpec([], tf.float32, 'reward'),
    discount=tf_tensor_spec.BoundedTensorSpec(
      [], tf.float32, 0.0, 1.0, 'discount'
    ),
  )


def _add_outer_dim(spec, dim=None):
  """tf_agents.specs.tensor_spec.add_outer_dim, for the spec kinds here."""

  def add(s):
    shape = [dim, *s.shape.as_list()]
    if isinstance(s, tf_tensor_spec.BoundedTensorSpec):
      return tf_tensor_spec.BoundedTensorSpec(
        shape, s.dtype, s.minimum, s.maximum, s.name
      )
    return tf.TensorSpec(shape, s.dtype, s.name)

  return tf.nest.map_structure(add, spec)


def _agents_step(t, boundary=False):
  return AgentsTrajectory(
    step_type=np.int32(2 if boundary else 1),
    observation={'pos': _obs(t)},
    action=np.int64(t % 4),
    policy_info=(),
    next_step_type=np.int32(0 if boundary else 1),
    reward=np.float32(t),
    discount=np.float32(1.0),
  )


# tf_agents/replay_buffers/reverb_utils.py (ReverbAddTrajectoryObserver):
# tf.nest over writer.history, several tables, end-of-episode padding made
# of eager tensors (tf.zeros_like), end_episode() between episodes; and
# get_table_signature() compared with add_outer_dim(data_spec)
# (tf_agents/replay_buffers/rlds_to_reverb.py).
def test_tf_agents_trajectory_observer():
  seq_len = 3
  signature = _add_outer_dim(_agents_spec())
  with reverb.Server(
    [_table('experience', signature), _table('experience_2', signature)]
  ) as server:
    py_client = reverb.Client(f'localhost:{server.port}')
    table_names = ['experience', 'experience_2']
    writer = py_client.trajectory_writer(num_keep_alive_refs=seq_len)
    cached = 0

    def write_cached_steps():
      if cached >= seq_len:
        trajectory = tf.nest.map_structure(
          lambda d: d[-seq_len:], writer.history
        )
        for table_name in table_names:
          writer.create_item(
            table=table_name, trajectory=trajectory, priority=1
          )

    for t in range(4):
      step = _agents_step(t, boundary=t == 3)
      writer.append(step)
      cached += 1
      write_cached_steps()
    # pad_end_of_episodes: boundary steps of zeros, as eager tensors.
    zero_step = _agents_step(0, boundary=True)._replace(
      observation=tf.nest.map_structure(tf.zeros_like, step.observation),
      reward=tf.zeros_like(step.reward),
    )
    for _ in range(seq_len - 1):
      writer.append(zero_step)
      cached += 1
      write_cached_steps()
    writer.end_episode()
    writer.flush()
    writer.close()

    assert py_client.server_info()['experience'].current_size == 4
    items = _all_items(
      py_client, 'experience_2', lambda data: np.ravel(data[1]).tolist()
    )
    np.testing.assert_array_equal(items[-1][1][:, 0], [3, 0, 0])
    table_signature = py_client.server_info()['experience'].signature
    assert table_signature == _add_outer_dim(_agents_spec())


# tf_agents/replay_buffers/reverb_utils.py (ReverbAddEpisodeObserver):
# `tf.nest.map_structure(lambda h: h[:], writer.history)` per episode, the
# writer reused after end_episode().
def test_tf_agents_episode_observer():
  signature = _add_outer_dim(_agents_spec())
  with reverb.Server([_table('episodes', signature)]) as server:
    py_client = reverb.Client(f'localhost:{server.port}')
    writer = py_client.trajectory_writer(num_keep_alive_refs=10 + 1)
    for episode_length in (3, 2):
      for t in range(episode_length):
        writer.append(_agents_step(t, boundary=t == episode_length - 1))
      trajectory = tf.nest.map_structure(lambda h: h[:], writer.history)
      writer.create_item(table='episodes', trajectory=trajectory, priority=1.0)
      writer.end_episode()
    writer.close()
    lengths = [
      len(item[0])
      for item in _all_items(py_client, 'episodes', lambda data: -len(data[0]))
    ]
    assert lengths == [3, 2]


# tf_agents/replay_buffers/reverb_replay_buffer.py (ReverbReplayBuffer and
# make_reverb_dataset): TableInfo fields, TFClient(address, shared_name),
# TrajectoryDataset with positional dtypes/shapes and a None sequence
# dimension, a map that unpacks the ReplaySample as `info, traj`,
# interleave, update_priorities from sampled keys, reset.
def test_tf_agents_reverb_replay_buffer():
  spec = _agents_spec()
  seq_len = 2
  with reverb.Server(
    [
      _table(
        'experience',
        _add_outer_dim(spec),
        sampler=reverb.selectors.Prioritized(0.8),
      ),
      reverb.Table.queue(name='fifo', max_size=10),
    ]
  ) as server:
    address = 'localhost:{}'.format(server.port)
    py_client = reverb.Client(address)
    tf_client = reverb.TFClient(address, 'rb_tf_client')
    table_info = py_client.server_info()['experience']
    assert not (
      table_info.sampler_options.is_deterministic
      and table_info.remover_options.is_deterministic
    )
    fifo = py_client.server_info()['fifo']
    assert (
      fifo.sampler_options.is_deterministic
      and fifo.remover_options.is_deterministic
    )
    assert table_info.max_size == 1000
    assert 'experience' in '{}'.format(table_info)

    writer = py_client.trajectory_writer(num_keep_alive_refs=seq_len)
    for t in range(4):
      writer.append(_agents_step(t))
      if writer.episode_steps >= seq_len:
        writer.create_item(
          table='experience',
          priority=1,
          trajectory=tf.nest.map_structure(
            lambda d: d[-seq_len:], writer.history
          ),
        )
    writer.flush()
    assert py_client.server_info()['experience'].current_size == 3

    dtypes = tf.nest.map_structure(lambda x: tf.as_dtype(x.dtype), spec)
    shapes = tf.nest.map_structure(lambda x: (None,) + x.shape, spec)

    def generate_reverb_dataset(_):
      dataset = reverb.TrajectoryDataset(
        address,
        'experience',
        dtypes,
        shapes,
        max_in_flight_samples_per_worker=3,
        num_workers_per_iterator=1,
        max_samples_per_stream=-1,
        rate_limiter_timeout_ms=-1,
      )

      def broadcast_info(info_traj):
        info, traj = info_traj
        first_elem = tf.nest.flatten(traj)[0]
        length = first_elem.shape[0] or tf.shape(first_elem)[0]
        info = tf.nest.map_structure(lambda t: tf.repeat(t, [length]), info)
        return reverb.ReplaySample(info, traj)

      return dataset.map(broadcast_info).map(
        lambda sample: (sample.data, sample.info)
      )

    dataset = tf.data.Dataset.range(2).interleave(
      generate_reverb_dataset,
      cycle_length=2,
      num_parallel_calls=tf.data.experimental.AUTOTUNE,
    )
    options = tf.data.Options()
    options.experimental_deterministic = False
    dataset = dataset.with_options(options).batch(2, drop_remainder=True)
    data, info = next(iter(dataset))
    assert data.observation['pos'].shape == (2, seq_len, *OBS_SHAPE)
    assert info.key.shape == (2, seq_len) and info.key.dtype == tf.uint64

    key = info.key[0, 0]
    tf_client.update_priorities(
      'experience', tf.reshape(key, [1]), tf.constant([5.0], tf.float64)
    )
    priorities = {
      s.info.key: s.info.priority
      for s in py_client.sample(
        'experience', num_samples=20, emit_timesteps=False
      )
    }
    assert priorities[int(key)] == 5.0
    py_client.reset('experience')
    assert py_client.server_info()['experience'].current_size == 0


# tf_agents/experimental/distributed/reverb_variable_container.py
# (ReverbVariableContainer): table signature of the variables' nest; push
# through TFClient.insert of tf.nest.flatten(variables) in a tf.function;
# pull through TFClient.sample(table, data_dtypes=[dtype nest]).data[0];
# then assign.
def test_tf_agents_variable_container():
  variables = {
    'policy_variables': [
      tf.Variable(tf.ones([2, 3])),
      tf.Variable(tf.zeros([3])),
    ],
    'train_step': tf.Variable(0, dtype=tf.int64),
  }
  signature = tf.nest.map_structure(
    lambda v: tf.TensorSpec(v.shape, dtype=v.dtype), variables
  )
  with reverb.Server(
    tables=[
      reverb.Table(
        name='variables',
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        rate_limiter=reverb.rate_limiters.MinSize(1),
        max_size=1,
        max_times_sampled=0,
        signature=signature,
      )
    ],
    port=None,
  ) as server:
    address = f'localhost:{server.port}'
    table_info = reverb.Client(address).server_info()['variables']
    assert table_info.max_size == 1 and table_info.signature
    dtypes = tf.nest.map_structure(
      lambda spec: spec.dtype, table_info.signature
    )
    tf_client = reverb.TFClient(address)

    @tf.function
    def push(values):
      tf_client.insert(
        data=tf.nest.flatten(values),
        tables=tf.constant(['variables']),
        priorities=tf.constant([1.0], dtype=tf.float64),
      )

    variables['train_step'].assign(41)
    variables['policy_variables'][1].assign([1.0, 2.0, 3.0])
    push(variables)
    pulled = tf_client.sample('variables', data_dtypes=[dtypes]).data[0]

    targets = tf.nest.map_structure(
      tf.Variable, tf.nest.map_structure(tf.zeros_like, variables)
    )

    @tf.function
    def assign(targets, values):
      for variable, value in zip(
        tf.nest.flatten(targets), tf.nest.flatten(values)
      ):
        variable.assign(value)

    assign(targets, pulled)
    assert int(targets['train_step'].numpy()) == 41
    np.testing.assert_array_equal(
      targets['policy_variables'][1].numpy(), [1.0, 2.0, 3.0]
    )
    # A second push replaces the item (max_size=1).
    variables['train_step'].assign(42)
    push(variables)
    pulled = tf_client.sample('variables', data_dtypes=[dtypes]).data[0]
    assert int(pulled['train_step']) == 42


# TF-Agents' examples (tf_agents/experimental/distributed/examples/*,
# tf_agents/examples/*) and Acme's distributed experiments:
# `reverb.platform.checkpointers_lib.DefaultCheckpointer(path=...)` after a
# bare `import reverb`, passed to Server(..., checkpointer=...). A fresh
# interpreter, so that no earlier import made the submodule an attribute.
def test_platform_checkpointers_lib_after_bare_import(tmp_path):
  run_python(
    textwrap.dedent(f'''
      import numpy as np
      import tf_reverb
      tf_reverb.install_as_reverb(child_processes=False)
      import reverb

      def table():
        return reverb.Table('experience', sampler=reverb.selectors.Uniform(),
                            remover=reverb.selectors.Fifo(), max_size=10,
                            rate_limiter=reverb.rate_limiters.MinSize(1))

      checkpointer = reverb.platform.checkpointers_lib.DefaultCheckpointer(
          path={str(tmp_path)!r})
      server = reverb.Server([table()], port=None, checkpointer=checkpointer)
      server.localhost_client().insert(np.int32(3), {{'experience': 1.0}})
      path = server.localhost_client().checkpoint()
      assert path.startswith({str(tmp_path)!r}), path
      server.stop()
      assert (reverb.platform.default.checkpointers.DefaultCheckpointer
              is reverb.checkpointers.DefaultCheckpointer)
      checkpointer = reverb.platform.checkpointers_lib.DefaultCheckpointer(
          path={str(tmp_path)!r})
      server = reverb.Server(tables=[table()], checkpointer=checkpointer)
      assert server.localhost_client().server_info()[
          'experience'].current_size == 1
      server.stop()
  ''')
  )


# rlds/transformations/pattern.py (pattern_map, pattern_map_from_transform):
# `reverb.structured_writer.*` reached as attributes of the package, a step
# spec from a nested steps dataset, tf.nest slicing of reference steps, and
# PatternDataset with keyword arguments.
def test_rlds_pattern_map():
  steps = {
    'observation': tf.range(6, dtype=tf.float32),
    'is_last': tf.constant([False, False, True, False, False, True]),
  }
  episodes = tf.data.Dataset.from_tensors(
    {'steps': tf.data.Dataset.from_tensor_slices(steps)}
  )
  spec = episodes.element_spec['steps'].element_spec

  def transform(step):
    return {
      'last_two': tf.nest.map_structure(lambda x: x[-2:], step['observation'])
    }

  pattern = reverb.structured_writer.pattern_from_transform(spec, transform)
  config = reverb.structured_writer.create_config(
    pattern, table='transition', conditions=[]
  )
  assert isinstance(config, reverb.structured_writer.Config)
  assert isinstance(
    sw.create_reference_step(spec), dict
  )  # a ReferenceStep nest
  for respect, expected in (
    (True, [[0, 1], [1, 2], [3, 4], [4, 5]]),
    (False, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]),
  ):
    dataset = reverb.PatternDataset(
      input_dataset=episodes.flat_map(lambda e: e['steps']),
      configs=[config],
      respect_episode_boundaries=respect,
      is_end_of_episode=lambda step: step['is_last'],
    )
    got = [element['last_two'].numpy().tolist() for element in dataset]
    assert got == expected


# acme/adders/reverb/base.py and structured.py __del__: flush(0,
# timeout_ms=...) caught as reverb.DeadlineExceededError while the rate
# limiter holds items back; end_episode(timeout_ms=...) likewise.
def test_acme_flush_deadline_is_reverb_deadline_exceeded():
  with reverb.Server([reverb.Table.queue('queue', max_size=1)]) as server:
    writer = server.localhost_client().trajectory_writer(num_keep_alive_refs=1)
    for i in range(3):
      writer.append({'x': np.int32(i)})
      writer.create_item('queue', 1.0, {'x': writer.history['x'][-1]})
    with pytest.raises(reverb.DeadlineExceededError):
      writer.flush(0, timeout_ms=50)
    with pytest.raises(reverb.errors.DeadlineExceededError):
      writer.end_episode(clear_buffers=True, timeout_ms=50)
    writer.close()


# acme/jax/experiments (disable_insert_blocking in run_experiment.py and
# make_distributed_experiment.py): a Table's `info.rate_limiter_info`, a
# generic RateLimiter by keywords, `table.replace(rate_limiter=...)`, the
# replaced tables served.
def test_acme_disable_insert_blocking():
  tables = [
    reverb.Table(
      name='priority_table',
      sampler=reverb.selectors.Prioritized(0.6),
      remover=reverb.selectors.Fifo(),
      max_size=100,
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=4.0, min_size_to_sample=2, error_buffer=10.0
      ),
    )
  ]
  modified, sample_sizes = [], []
  for table in tables:
    info = table.info.rate_limiter_info
    limiter = reverb.rate_limiters.RateLimiter(
      samples_per_insert=info.samples_per_insert,
      min_size_to_sample=info.min_size_to_sample,
      min_diff=info.min_diff,
      max_diff=np.finfo(np.float64).max,
    )
    modified.append(table.replace(rate_limiter=limiter))
    sample_sizes.append(max(1, int((info.max_diff - info.min_diff) / 2)))
  assert sample_sizes == [10]
  with reverb.Server(modified, port=None) as server:
    client = server.localhost_client()
    # The original limiter would block the 4th insert without samples.
    for k in range(20):
      client.insert([np.float32(k)], {'priority_table': 1.0})
    info = client.server_info()['priority_table']
    assert info.current_size == 20
    assert info.sampler_options.prioritized.priority_exponent == (
      pytest.approx(0.6)
    )


# acme/agents/tf/{dqn,d4pg,r2d2}/learning.py: priorities updated from the
# sampled keys inside the learner's tf.function, by keywords
# (table=, keys=, priorities=tf.cast(..., tf.float64)).
def test_acme_tf_learner_update_priorities_in_tf_function():
  with reverb.Server(
    [_table('priority_table', sampler=reverb.selectors.Prioritized(0.6))]
  ) as s:
    address = f'localhost:{s.port}'
    client = reverb.Client(address)
    for k in range(8):
      client.insert([np.float32(k)], {'priority_table': 1.0})
    replay_client = reverb.TFClient(server_address=address)
    iterator = iter(
      reverb.TrajectoryDataset(
        address,
        'priority_table',
        (tf.float32,),
        (tf.TensorShape([1]),),
        max_in_flight_samples_per_worker=4,
      ).batch(4)
    )

    @tf.function
    def step():
      inputs = next(iterator)
      keys = inputs.info.key
      priorities = tf.abs(inputs.data[0][:, 0]) + 0.5
      replay_client.update_priorities(
        table='priority_table',
        keys=keys,
        priorities=tf.cast(priorities, tf.float64),
      )
      return keys, priorities

    keys, priorities = step()
    expected = dict(zip(keys.numpy().tolist(), priorities.numpy().tolist()))
    seen = {}
    while len(seen) < 8:
      for sample in client.sample(
        'priority_table', num_samples=50, emit_timesteps=False
      ):
        seen[sample.info.key] = sample.info.priority
    for key, priority in expected.items():
      assert seen[key] == pytest.approx(priority)


def test_pre_014_get_signature_timeout_ms_keyword():
  # acme/adders/reverb/base.py (Acme 0.4) and older TF-Agents reverb_utils.py:
  # trajectory_writer(num_keep_alive_refs=..., get_signature_timeout_ms=...).
  signature = {'x': tf.TensorSpec([], tf.int64)}
  with reverb.Server([_table('sig', signature=signature)]) as server:
    address = f'localhost:{server.port}'
    with reverb.Client(address).trajectory_writer(
      num_keep_alive_refs=1, get_signature_timeout_ms=None
    ) as writer:
      writer.append({'x': np.int64(1)})
      writer.create_item('sig', 1.0, {'x': writer.history['x'][-1]})
    writer = reverb.Client(address).trajectory_writer(
      num_keep_alive_refs=1,
      validate_items=False,
      get_signature_timeout_ms=60_000,
    )
    writer.append({'x': np.float32(1)})
    # Set, the keyword turns validation on: the mismatch is caught here.
    with pytest.raises(ValueError, match='sig'):
      writer.create_item('sig', 1.0, {'x': writer.history['x'][-1]})
    writer.close()
    assert reverb.Client(address).server_info()['sig'].current_size == 1
  with pytest.raises(ValueError, match='get_signature_timeout_ms'):
    reverb.Client(address).trajectory_writer(1, get_signature_timeout_ms=-1)
  # The server is gone: the signature fetch gives up instead of hanging.
  with pytest.raises(reverb.errors.DeadlineExceededError):
    reverb.Client(address).trajectory_writer(1, get_signature_timeout_ms=200)
