"""``ReplaySample`` and ``SampleInfo``: what sampling returns."""

from typing import Any, NamedTuple, Tuple

__all__ = ['ReplaySample', 'SampleInfo']


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


class ReplaySample(NamedTuple):
  """A sampled item: its ``SampleInfo`` and its data."""

  info: SampleInfo
  data: Any
