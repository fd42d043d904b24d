"""``ReplaySample`` and ``SampleInfo``: what sampling returns."""

from typing import Any, NamedTuple, Sequence, Tuple, Union

__all__ = ['ReplaySample', 'SampleInfo', 'VersionedSampleInfo']


class SampleInfo(NamedTuple):
  """Metadata of a sampled item.

  Attributes:
    key: the item's key.
    probability: the probability with which it was selected.
    table_size: the table's size when it was sampled.
    priority: its priority when it was sampled.
    times_sampled: how often it has been sampled, this sample included.
  """

  key: Any
  probability: Any
  table_size: Any
  priority: Any
  times_sampled: Any

  @classmethod
  def tf_dtypes(cls) -> Tuple[Any, ...]:
    """The TensorFlow dtypes of the fields (imports TensorFlow)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    return (tf.uint64, tf.double, tf.int64, tf.double, tf.int32)

  @classmethod
  def tf_shapes(cls) -> Tuple[Any, ...]:
    """The TensorFlow shapes of the fields: all scalars."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    return tuple(tf.TensorShape([]) for _ in cls._fields)

  @classmethod
  def zeros(cls) -> 'SampleInfo':
    """A SampleInfo of zeros."""
    return cls(0, 0.0, 0, 0.0, 0)


class VersionedSampleInfo(NamedTuple):
  """``SampleInfo`` with the sampled item's policy version (a tf_reverb
  extension).

  What ``Client.lookup`` and ``Client.scan`` report, and what sampling
  reports when asked (``emit_policy_version=True`` of ``Client.sample`` and
  ``NumpyIterator``). Sampling reports ``SampleInfo`` by default, whose five
  fields are Reverb's, so code written for Reverb sees the structure it
  expects.

  Attributes:
    key: the item's key.
    probability: the probability with which it was selected.
    table_size: the table's size when it was sampled.
    priority: its priority when it was sampled.
    times_sampled: how often it has been sampled, this sample included.
    policy_version: the version of the policy that produced the item (its
      writer's, or the table's current version when it was inserted).
  """

  key: Any
  probability: Any
  table_size: Any
  priority: Any
  times_sampled: Any
  policy_version: Any


def make_sample_info(
  values: Sequence[Any], emit_policy_version: bool
) -> Union[SampleInfo, VersionedSampleInfo]:
  """The info of a sample from the six values the C++ core reports (the
  ``SampleInfo`` fields, then the policy version): a ``VersionedSampleInfo``
  when `emit_policy_version`, else a ``SampleInfo``."""
  if emit_policy_version:
    return VersionedSampleInfo(*values)
  return SampleInfo(*values[:5])


class ReplaySample(NamedTuple):
  """A sampled item: its ``SampleInfo`` and its data."""

  info: SampleInfo
  data: Any
