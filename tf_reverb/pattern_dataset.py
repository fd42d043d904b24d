"""``PatternDataset``: StructuredWriter patterns applied to a ``tf.data`` dataset.

The dataset runs the pattern engine of ``reverb.structured`` (the same C++
engine the StructuredWriter uses, server/patterns/) over the steps of an input
dataset, locally and without a server, and emits the trajectories the configs
produce. Imports TensorFlow; eager (TF2) only.
"""

from typing import Any, Callable, Sequence

import tensorflow as tf
import tree

# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.ops import dataset_ops
# pylint: enable=g-direct-tensorflow-import

from tf_reverb import _reverb_dataset
from tf_reverb import replay_sample
from tf_reverb import structured_writer

__all__ = ['PatternDataset', 'pattern_dataset_with_info']


class PatternDataset(dataset_ops.UnaryDataset):
  """Trajectories made by ``structured.Config``s from a dataset of steps.

  Each element of `input_dataset` is one step. After every step for which
  `is_end_of_episode(step)` is true, the configs' end-of-episode conditions
  apply and a new episode starts. The element spec is
  ``structured.infer_signature(configs, input_dataset.element_spec)``; the
  cardinality is infinite for an infinite input and unknown otherwise.
  Lists in the pattern become tuples.
  """

  def __init__(
    self,
    input_dataset: tf.data.Dataset,
    configs: Sequence[structured_writer.Config],
    respect_episode_boundaries: bool,
    is_end_of_episode: Callable[[Any], Any],
  ):
    """Builds the dataset.

    Args:
      input_dataset: a dataset whose elements are steps.
      configs: the patterns to apply; a ``buffer_length`` condition is added
        to each that lacks one (the configs are modified in place).
      respect_episode_boundaries: drop the buffered steps at the end of each
        episode, so no trajectory spans two episodes.
      is_end_of_episode: maps a step to a scalar ``tf.bool``.

    Raises:
      ValueError: if there are no configs, they are inconsistent (see
        ``structured.infer_signature``), or `is_end_of_episode` does not
        return a scalar bool.
    """
    # pylint: disable=g-import-not-at-top
    from tf_reverb.ops import reverb_ops

    # pylint: enable=g-import-not-at-top
    if not configs:
      raise ValueError('At least one config must be provided.')
    structured_writer.add_buffer_length_conditions(configs)
    # tf.data nests hold tuples, not lists.
    self._element_spec = _reverb_dataset.to_tuples(
      structured_writer.infer_signature(configs, input_dataset.element_spec)
    )
    self._steps = input_dataset.map(_flag_end_of_episode(is_end_of_episode))
    flat_spec = tree.flatten(self._element_spec)
    variant = reverb_ops.reverb_pattern_dataset(
      input_dataset=self._steps._variant_tensor,  # pylint: disable=protected-access
      configs=[config.SerializeToString() for config in configs],
      clear_after_episode=respect_episode_boundaries,
      dtypes=[spec.dtype for spec in flat_spec],
      shapes=[spec.shape for spec in flat_spec],
    )
    super().__init__(self._steps, variant)

  @property
  def element_spec(self) -> Any:
    """The nest of ``tf.TensorSpec`` of the produced trajectories."""
    return self._element_spec


def _flag_end_of_episode(
  is_end_of_episode: Callable[[Any], Any],
) -> Callable[..., Any]:
  """A map function: step -> (*flattened step, is_end_of_episode(step))."""

  def with_flag(*args: Any) -> Any:
    step = args[0] if len(args) == 1 else args
    flag = tf.convert_to_tensor(is_end_of_episode(step))
    if flag.dtype != tf.bool or flag.shape.rank != 0:
      raise ValueError(
        'is_end_of_episode must return a scalar tf.bool but returned '
        f'{flag.dtype.name}{flag.shape}.'
      )
    return tuple(tree.flatten(step)) + (flag,)

  return with_flag


def pattern_dataset_with_info(
  input_dataset: tf.data.Dataset,
  configs: Sequence[structured_writer.Config],
  respect_episode_boundaries: bool,
  is_end_of_episode: Callable[[Any], Any],
) -> tf.data.Dataset:
  """``PatternDataset`` whose elements are ``ReplaySample``s with zero info.

  Lets code written for ``TrajectoryDataset`` elements consume locally made
  trajectories. Arguments and errors are those of ``PatternDataset``.
  """
  dataset = PatternDataset(
    input_dataset, configs, respect_episode_boundaries, is_end_of_episode
  )
  dtypes = replay_sample.SampleInfo.tf_dtypes()

  def add_info(*data: Any) -> replay_sample.ReplaySample:
    info = replay_sample.SampleInfo(*[tf.zeros([], dtype) for dtype in dtypes])
    return replay_sample.ReplaySample(
      info=info, data=data[0] if len(data) == 1 else data
    )

  return dataset.map(add_info)
