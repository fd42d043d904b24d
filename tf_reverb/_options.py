"""Validation of the sampler flow-control options shared by the datasets and
``NumpyIterator``, and of the writers' policy versions (no TensorFlow)."""

import numbers
from typing import Optional


def validate_sampler_options(
  max_in_flight_samples_per_worker: int,
  num_workers_per_iterator: int,
  max_samples_per_stream: int,
  rate_limiter_timeout_ms: int,
  max_samples: int,
) -> None:
  """Raises ValueError for options the samplers reject (docs/concepts/datasets.md)."""
  if max_in_flight_samples_per_worker < 1:
    raise ValueError(
      'max_in_flight_samples_per_worker (%d) must be >= 1'
      % max_in_flight_samples_per_worker
    )
  if num_workers_per_iterator < 1 and num_workers_per_iterator != -1:
    raise ValueError(
      'num_workers_per_iterator (%d) must be a strictly positive integer '
      'or -1 (auto)' % num_workers_per_iterator
    )
  if max_samples_per_stream < 1 and max_samples_per_stream != -1:
    raise ValueError(
      'max_samples_per_stream (%d) must be a strictly positive integer or -1'
      % max_samples_per_stream
    )
  if rate_limiter_timeout_ms < -1:
    raise ValueError(
      'rate_limiter_timeout_ms must be an integer >= -1, got %d (-1 waits '
      'forever, 0 gives up at once, T > 0 ends after T ms without data)'
      % rate_limiter_timeout_ms
    )
  if max_samples < 1 and max_samples != -1:
    raise ValueError(
      'max_samples (%d) must be a strictly positive integer or -1 (unlimited)'
      % max_samples
    )


def validate_policy_version(policy_version: Optional[int]) -> Optional[int]:
  """`policy_version` checked for a writer or insert: None or an int >= 0."""
  if policy_version is None:
    return None
  if isinstance(policy_version, bool) or not isinstance(
    policy_version, numbers.Integral
  ):
    raise TypeError(
      'policy_version must be an int or None, got '
      f'{type(policy_version).__name__}: {policy_version!r}'
    )
  if policy_version < 0:
    raise ValueError(f'policy_version ({policy_version}) must be >= 0')
  return int(policy_version)
