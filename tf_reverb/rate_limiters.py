"""Rate limiters: when a table lets inserts and samples proceed.

With ``size = inserts - deletes`` and ``cursor = inserts * samples_per_insert
- samples``, a sample may proceed when ``size >= min_size_to_sample`` and
``cursor - 1 >= min_diff``; an insert when the table is still below
``min_size_to_sample`` or ``cursor + samples_per_insert <= max_diff``.
A limiter object serves exactly one table; reusing it raises ``ValueError``.
"""

import logging
import sys
from typing import Tuple, Union

from tf_reverb import pybind
from tf_reverb.proto import schema_pb2

__all__ = ['RateLimiter', 'MinSize', 'SampleToInsertRatio', 'Queue', 'Stack']


class RateLimiter(pybind.RateLimiter):
  """The generic rate limiter; the subclasses are convenient presets.

  A ``pybind.RateLimiter``, as in Reverb.
  """

  def __init__(
    self,
    samples_per_insert: float,
    min_size_to_sample: int,
    min_diff: float,
    max_diff: float,
  ):
    """A limiter with these parameters (see the module docstring).

    Raises:
      ValueError: for parameters the table would reject.
    """
    # Validates (ValueError) as the table will.
    super().__init__(
      float(samples_per_insert),
      int(min_size_to_sample),
      float(min_diff),
      float(max_diff),
    )
    self.samples_per_insert = float(samples_per_insert)
    self.min_size_to_sample = int(min_size_to_sample)
    self.min_diff = float(min_diff)
    self.max_diff = float(max_diff)
    self._owner = None

  def claim(self, owner: str) -> None:
    """Marks the limiter as used by table `owner`; raises if already used."""
    if self._owner is not None:
      raise ValueError(
        f'{self!r} is already used by table {self._owner!r}; every table '
        'needs its own rate limiter object.'
      )
    self._owner = owner

  def info(self) -> schema_pb2.RateLimiterInfo:
    """The parameters as a ``RateLimiterInfo`` proto (no call stats)."""
    return schema_pb2.RateLimiterInfo(
      samples_per_insert=self.samples_per_insert,
      min_diff=self.min_diff,
      max_diff=self.max_diff,
      min_size_to_sample=self.min_size_to_sample,
    )


class MinSize(RateLimiter):
  """Blocks sampling until the table holds `min_size_to_sample` items."""

  def __init__(self, min_size_to_sample: int):
    if min_size_to_sample < 1:
      raise ValueError(
        f'min_size_to_sample ({min_size_to_sample}) must be a positive integer'
      )
    super().__init__(
      1.0, min_size_to_sample, -sys.float_info.max, sys.float_info.max
    )


class SampleToInsertRatio(RateLimiter):
  """Keeps the ratio of samples to inserts near `samples_per_insert`.

  `error_buffer` is the tolerated deviation either side of the target
  (scalar), or the explicit ``(min_diff, max_diff)``.
  """

  def __init__(
    self,
    samples_per_insert: float,
    min_size_to_sample: int,
    error_buffer: Union[float, Tuple[float, float]],
  ):
    if samples_per_insert <= 0:
      raise ValueError(f'samples_per_insert ({samples_per_insert}) must be > 0')
    if isinstance(error_buffer, (int, float)):
      offset = samples_per_insert * min_size_to_sample
      min_diff = offset - error_buffer
      max_diff = offset + error_buffer
    else:
      min_diff, max_diff = error_buffer
    if max_diff - min_diff < 2 * max(1.0, samples_per_insert):
      raise ValueError(
        'The size of error_buffer must be >= max(1.0, samples_per_insert) '
        f'as smaller values could completely block samples and/or inserts '
        f'(got min_diff={min_diff}, max_diff={max_diff}, '
        f'samples_per_insert={samples_per_insert}).'
      )
    if max_diff < samples_per_insert * min_size_to_sample:
      logging.warning(
        'The range covered by the rate limiter (max_diff=%s) is below '
        'samples_per_insert * min_size_to_sample (%s): inserts can block '
        'before sampling starts, so sampling must run concurrently with '
        'inserts or the program deadlocks.',
        max_diff,
        samples_per_insert * min_size_to_sample,
      )
    if min_diff > samples_per_insert * min_size_to_sample:
      raise ValueError(
        f'min_diff ({min_diff}) must not exceed samples_per_insert * '
        f'min_size_to_sample ({samples_per_insert * min_size_to_sample}): '
        'sampling could never start.'
      )
    if min_size_to_sample < 1:
      raise ValueError(
        f'min_size_to_sample ({min_size_to_sample}) must be a positive integer'
      )
    super().__init__(samples_per_insert, min_size_to_sample, min_diff, max_diff)


class Queue(RateLimiter):
  """A queue of `size` items: meant for ``Table.queue``."""

  def __init__(self, size: int):
    if size < 1:
      raise ValueError(f'size ({size}) must be a positive integer')
    super().__init__(1.0, 1, 0.0, float(size))


class Stack(RateLimiter):
  """A stack of `size` items: meant for ``Table.stack``."""

  def __init__(self, size: int):
    if size < 1:
      raise ValueError(f'size ({size}) must be a positive integer')
    super().__init__(1.0, 1, 0.0, float(size))
