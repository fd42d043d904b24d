"""Types shared across the API: ``TableInfo`` and selector aliases."""

import collections
import dataclasses
import sys
from typing import Any, Dict, List, Optional

from google.protobuf import message
import tree

from tf_reverb import tensor_spec
from tf_reverb.proto import schema_pb2
from tf_reverb.proto import struct_pb2
from tf_reverb.proto import tensor_pb2

__all__ = ['TableInfo']

# A selector object (see tf_reverb.selectors).
SelectorType = Any
# A nest of specs: tf.TensorSpec, or tensor_spec.TensorSpec without TF.
SpecNest = Any


def _tensorflow_in_use() -> bool:
  return 'tensorflow' in sys.modules


def _shape_proto(shape: tensor_spec.Shape) -> tensor_pb2.TensorShapeProto:
  if shape is None:
    return tensor_pb2.TensorShapeProto(unknown_rank=True)
  return tensor_pb2.TensorShapeProto(
    dim=[
      tensor_pb2.TensorShapeProto.Dim(size=-1 if d is None else d)
      for d in shape
    ]
  )


def _shape_from_proto(proto: tensor_pb2.TensorShapeProto) -> tensor_spec.Shape:
  if proto.unknown_rank:
    return None
  return tuple(None if d.size == -1 else d.size for d in proto.dim)


class _NeedsTensorFlow(Exception):
  """A nest holds values only TensorFlow's coder handles."""


def _is_namedtuple(value: Any) -> bool:
  return isinstance(value, tuple) and hasattr(value, '_fields')


def _encode(value: Any) -> struct_pb2.StructuredValue:
  """Encodes a nest as TensorFlow's nested_structure_coder does."""
  if isinstance(value, dict):
    proto = struct_pb2.StructuredValue()
    fields = proto.dict_value.fields
    for key, item in sorted(value.items(), key=lambda kv: str(kv[0])):
      if not isinstance(key, str):
        raise ValueError(f'Signature dict keys must be strings, got {key!r}')
      fields[key].CopyFrom(_encode(item))
    return proto
  if _is_namedtuple(value):
    pairs = [
      struct_pb2.PairValue(key=field, value=_encode(item))
      for field, item in zip(value._fields, value)
    ]
    return struct_pb2.StructuredValue(
      named_tuple_value=struct_pb2.NamedTupleValue(
        name=type(value).__name__, values=pairs
      )
    )
  if isinstance(value, tuple):
    return struct_pb2.StructuredValue(
      tuple_value=struct_pb2.TupleValue(values=[_encode(v) for v in value])
    )
  if isinstance(value, list):
    return struct_pb2.StructuredValue(
      list_value=struct_pb2.ListValue(values=[_encode(v) for v in value])
    )
  if isinstance(value, tensor_spec.TensorSpec):
    spec = value
  elif _tensorflow_in_use() and _is_tf_tensor_spec(value):
    if type(value).__name__ != 'TensorSpec':
      raise _NeedsTensorFlow()  # BoundedTensorSpec: bounds are TensorProtos
    spec = tensor_spec.TensorSpec.from_spec(value)
  else:
    raise ValueError(f'Unsupported signature spec: {value!r}')
  return struct_pb2.StructuredValue(
    tensor_spec_value=struct_pb2.TensorSpecProto(
      name=spec.name or '',
      shape=_shape_proto(spec.shape),
      dtype=spec.dtype.as_datatype_enum,
    )
  )


def _is_tf_tensor_spec(value: Any) -> bool:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  return isinstance(value, tf.TensorSpec)


def _decode(proto: struct_pb2.StructuredValue) -> Any:
  """Decodes a StructuredValue into TF-free values (tensor_spec.TensorSpec)."""
  kind = proto.WhichOneof('kind')
  if kind == 'tensor_spec_value' or kind == 'bounded_tensor_spec_value':
    spec = getattr(proto, kind)
    return tensor_spec.TensorSpec(
      _shape_from_proto(spec.shape), spec.dtype, spec.name or None
    )
  if kind == 'list_value':
    return [_decode(v) for v in proto.list_value.values]
  if kind == 'tuple_value':
    return tuple(_decode(v) for v in proto.tuple_value.values)
  if kind == 'dict_value':
    fields = proto.dict_value.fields
    return {key: _decode(fields[key]) for key in sorted(fields)}
  if kind == 'named_tuple_value':
    value = proto.named_tuple_value
    keys = [pair.key for pair in value.values]
    cls = collections.namedtuple(value.name, keys)  # as TensorFlow's decoder
    return cls(*[_decode(pair.value) for pair in value.values])
  if kind == 'none_value':
    return None
  if kind in ('float64_value', 'int64_value', 'string_value', 'bool_value'):
    return getattr(proto, kind)
  if kind == 'tensor_shape_value':
    return _shape_from_proto(proto.tensor_shape_value)
  if kind == 'tensor_dtype_value':
    return tensor_spec.DType(proto.tensor_dtype_value)
  raise _NeedsTensorFlow()  # composite TypeSpecs, tensors


def decode_signature(serialized: bytes) -> Optional[SpecNest]:
  """Decodes a table signature (a serialized tensorflow.StructuredValue).

  When TensorFlow is already imported, returns a nest of ``tf.TensorSpec``
  (TensorFlow's own decoder). Otherwise returns a nest of
  ``tensor_spec.TensorSpec`` without importing TensorFlow (BoundedTensorSpecs
  lose their bounds); only signatures with composite specs (ragged, sparse,
  ...) import TensorFlow then.

  Raises:
    ValueError: for bytes that are no StructuredValue, or a signature that
      needs TensorFlow where it is not installed.
  """
  if not serialized:
    return None
  if not _tensorflow_in_use():
    try:
      proto = struct_pb2.StructuredValue.FromString(serialized)
    except message.DecodeError as e:
      raise ValueError(f'Unreadable table signature: {e}') from e
    try:
      return _decode(proto)
    except _NeedsTensorFlow:
      pass
  try:
    # pylint: disable=g-import-not-at-top
    from tensorflow.core.protobuf import struct_pb2 as tf_struct_pb2
    from tensorflow.python.saved_model import nested_structure_coder
    # pylint: enable=g-import-not-at-top
  except ImportError as e:
    raise ValueError(
      'The table signature holds composite specs, which only TensorFlow '
      f'can decode, and TensorFlow cannot be imported: {e}'
    ) from e
  value = tf_struct_pb2.StructuredValue.FromString(serialized)
  return nested_structure_coder.decode_proto(value)


def encode_signature(signature: Optional[SpecNest]) -> bytes:
  """Encodes a nest of specs; b'' for no (or a falsy) signature.

  Leaves are ``tensor_spec.TensorSpec`` or ``tf.TensorSpec``; the message is
  the one TensorFlow's nested_structure_coder makes (serialized with dict
  keys sorted, where TensorFlow's order varies), produced without importing
  TensorFlow (a nest with ``tf.BoundedTensorSpec`` goes through TensorFlow's
  coder, which is loaded then anyway).

  Raises:
    ValueError: for leaves that are no TensorSpec, or non-string dict keys.
  """
  if signature is None or (
    isinstance(signature, (dict, list, tuple)) and not signature
  ):
    return b''
  try:
    # Deterministic: map entries (dict keys) sorted, so equal nests give
    # equal bytes.
    return _encode(signature).SerializeToString(deterministic=True)
  except _NeedsTensorFlow:
    pass
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tensorflow.python.saved_model import nested_structure_coder

  # pylint: enable=g-import-not-at-top
  for leaf in tree.flatten(signature):
    if not isinstance(leaf, (tf.TensorSpec, tensor_spec.TensorSpec)):
      raise ValueError(f'Unsupported signature spec: {leaf!r}')
  signature = tree.map_structure(
    lambda s: (
      s
      if isinstance(s, tf.TensorSpec)
      else tf.TensorSpec(
        None if s.shape is None else list(s.shape),
        s.dtype.as_datatype_enum,
        s.name,
      )
    ),
    signature,
  )
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
  # tf.TensorSpec nest when TensorFlow was imported before decoding, else a
  # tensor_spec.TensorSpec nest; None for tables without a signature.
  signature: Optional[SpecNest]
  current_size: int
  num_episodes: int
  num_deleted_episodes: int
  num_unique_samples: int
  table_worker_time: schema_pb2.TableWorkerTime
  # tf_reverb extensions (Table(max_staleness=, evict_stale=) and
  # Client.set_policy_version): the current policy version and the limit.
  policy_version: int = 0
  max_staleness: Optional[int] = None
  evict_stale: bool = False

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
      table_worker_time=proto.table_worker_time,
      policy_version=proto.policy_version,
      max_staleness=(
        proto.max_staleness if proto.HasField('max_staleness') else None
      ),
      evict_stale=proto.evict_stale,
    )

  @classmethod
  def from_serialized_proto(cls, serialized: bytes) -> 'TableInfo':
    """Builds a TableInfo from a serialized ``TableInfo`` proto."""
    return cls.from_proto(schema_pb2.TableInfo.FromString(serialized))


@dataclasses.dataclass
class LookupResult:
  """What ``Client.lookup`` found.

  Attributes:
    items: key -> ``ReplaySample`` (info with the item's current priority
      and times sampled, probability 0; data: the flat list of columns) of
      every key found, in the order asked.
    missing: the keys no (reachable) server holds, in the order asked.
  """

  items: Dict[int, Any]
  missing: List[int]


@dataclasses.dataclass
class TableStats:
  """A table's contents in numbers, as ``Client.table_stats`` reports them
  (summed over the shards of a sharded client).

  Attributes:
    size: items.
    total_priority: sum of the items' priorities.
    min_priority: smallest priority (0 for an empty table).
    max_priority: largest priority (0 for an empty table).
    times_sampled: times sampled -> number of items sampled that often.
    age_bucket_seconds: upper bounds of the age buckets (seconds since
      insertion); ``age_counts`` has one more bucket, for older items.
    age_counts: items per age bucket.
    min_age_seconds: age of the newest item (0 for an empty table).
    max_age_seconds: age of the oldest item (0 for an empty table).
    policy_version: the table's current policy version (the newest over
      shards).
    stale_items: items too old to be sampled under the table's
      ``max_staleness`` (kept because it does not evict them).
  """

  size: int
  total_priority: float
  min_priority: float
  max_priority: float
  times_sampled: Dict[int, int]
  age_bucket_seconds: List[float]
  age_counts: List[int]
  min_age_seconds: float
  max_age_seconds: float
  policy_version: int = 0
  stale_items: int = 0

  @classmethod
  def from_proto(cls, proto: Any) -> 'TableStats':
    """Builds a TableStats from a ``TableStatsResponse``."""
    return cls(
      size=proto.size,
      total_priority=proto.total_priority,
      min_priority=proto.min_priority,
      max_priority=proto.max_priority,
      times_sampled=dict(sorted(proto.times_sampled.items())),
      age_bucket_seconds=list(proto.age_bucket_seconds),
      age_counts=list(proto.age_counts),
      min_age_seconds=proto.min_age_seconds,
      max_age_seconds=proto.max_age_seconds,
      policy_version=proto.policy_version,
      stale_items=proto.stale_items,
    )
