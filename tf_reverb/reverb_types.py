"""Types shared across the API: ``TableInfo`` and selector aliases."""

import dataclasses
from typing import Any, Optional

from tf_reverb.proto import schema_pb2

# A selector object (see tf_reverb.selectors).
SelectorType = Any
# A nest of tf.TensorSpec.
SpecNest = Any


def decode_signature(serialized: bytes) -> Optional[SpecNest]:
  """Decodes a table signature (a serialized tensorflow.StructuredValue).

  Imports TensorFlow, but only when there is a signature to decode.
  """
  if not serialized:
    return None
  # pylint: disable=g-import-not-at-top
  from tensorflow.core.protobuf import struct_pb2
  from tensorflow.python.saved_model import nested_structure_coder
  # pylint: enable=g-import-not-at-top
  value = struct_pb2.StructuredValue.FromString(serialized)
  return nested_structure_coder.decode_proto(value)


def encode_signature(signature: Optional[SpecNest]) -> bytes:
  """Encodes a nest of tf.TensorSpec; b'' for no (or a falsy) signature."""
  if not signature:
    return b''
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tree
  from tensorflow.python.saved_model import nested_structure_coder
  # pylint: enable=g-import-not-at-top
  for leaf in tree.flatten(signature):
    if not isinstance(leaf, tf.TensorSpec):
      raise ValueError(f'Unsupported signature spec: {leaf!r}')
  return nested_structure_coder.encode_structure(signature).SerializeToString()


@dataclasses.dataclass
class TableInfo:
  """A table's configuration and state, as ``Client.server_info`` reports."""
  name: str
  sampler_options: schema_pb2.KeyDistributionOptions
  remover_options: schema_pb2.KeyDistributionOptions
  max_size: int
  max_times_sampled: int
  rate_limiter_info: schema_pb2.RateLimiterInfo
  signature: Optional[SpecNest]
  current_size: int
  num_episodes: int
  num_deleted_episodes: int
  num_unique_samples: int
  table_worker_time: schema_pb2.TableWorkerTime

  @classmethod
  def from_proto(cls, proto: schema_pb2.TableInfo) -> 'TableInfo':
    """Builds a TableInfo from its proto (decoding the signature)."""
    return cls(
        name=proto.name,
        sampler_options=proto.sampler_options,
        remover_options=proto.remover_options,
        max_size=proto.max_size,
        max_times_sampled=proto.max_times_sampled,
        rate_limiter_info=proto.rate_limiter_info,
        signature=decode_signature(proto.signature),
        current_size=proto.current_size,
        num_episodes=proto.num_episodes,
        num_deleted_episodes=proto.num_deleted_episodes,
        num_unique_samples=proto.num_unique_samples,
        table_worker_time=proto.table_worker_time)

  @classmethod
  def from_serialized_proto(cls, serialized: bytes) -> 'TableInfo':
    """Builds a TableInfo from a serialized ``TableInfo`` proto."""
    return cls.from_proto(schema_pb2.TableInfo.FromString(serialized))
