"""Tables from a ``ReverbServerConfig`` (docs/reference/config-format.md), as in Reverb.

``reverb_server --config=...`` builds its tables in C++
(server/service/server_config.cc) with the same selector factory, rate-limiter
validation and table constructor that these functions reach through
``tf_reverb.pybind``, so a config means the same table either way. Unlike
Reverb's, ``tables_from_proto`` keeps a config's ``signature`` (the binary
does too).
"""

from typing import List, Sequence, Union

from tf_reverb import item_selectors
from tf_reverb import rate_limiters
from tf_reverb import reverb_types
from tf_reverb import server
from tf_reverb.proto import checkpoint_pb2
from tf_reverb.proto import schema_pb2

__all__ = [
  'selector_from_proto',
  'rate_limiter_from_proto',
  'tables_from_proto',
]


def selector_from_proto(
  s: schema_pb2.KeyDistributionOptions,
) -> item_selectors.ItemSelector:
  """A new selector described by `s` (fifo, lifo, uniform, heap, prioritized).

  Raises:
    ValueError: if the distribution set is a boolean set to false.
    NotImplementedError: if no distribution is set.
  """
  return item_selectors.selector_from_proto(s)


def rate_limiter_from_proto(
  proto: Union[
    checkpoint_pb2.RateLimiterCheckpoint, schema_pb2.RateLimiterInfo
  ],
) -> rate_limiters.RateLimiter:
  """A generic ``RateLimiter`` with the parameters of `proto`.

  `proto` is the ``rate_limiter`` of a table config (a
  ``RateLimiterCheckpoint``) or a ``RateLimiterInfo``.

  Raises:
    ValueError: for parameters a table would reject.
  """
  return rate_limiters.RateLimiter(
    samples_per_insert=proto.samples_per_insert,
    min_size_to_sample=proto.min_size_to_sample,
    min_diff=proto.min_diff,
    max_diff=proto.max_diff,
  )


def tables_from_proto(
  configs: Sequence[checkpoint_pb2.PriorityTableCheckpoint],
) -> List[server.Table]:
  """One new, empty ``Table`` per config.

  Uses ``table_name``, ``sampler``, ``remover``, ``max_size``,
  ``max_times_sampled``, ``rate_limiter`` and ``signature``; the counters and
  items of a checkpoint entry are ignored.

  Raises:
    ValueError, NotImplementedError: as the selector and limiter functions.
  """
  tables = []
  for config in configs:
    tables.append(
      server.Table(
        name=config.table_name,
        sampler=selector_from_proto(config.sampler),
        remover=selector_from_proto(config.remover),
        max_size=config.max_size,
        max_times_sampled=config.max_times_sampled,
        rate_limiter=rate_limiter_from_proto(config.rate_limiter),
        signature=reverb_types.decode_signature(config.signature),
      )
    )
  return tables
