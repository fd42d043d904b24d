"""Mutators of the gRPC fuzz.

Field-level mutators of a valid ``InsertBuilder``, registered with a name
and a weight in ``INSERT_MUTATORS``: each breaks one thing, keeps the rest of
the call valid and returns what it did. ``byte_mutation`` damages any
serialized message at the byte level.
"""

import math
import random
import struct
from typing import Any, Callable, Dict, Sequence, TYPE_CHECKING, Tuple

from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc
from tf_reverb.proto import tensor_pb2 as tp

from .builders import (
  ChunkMeta,
  DT_DOUBLE,
  DT_FLOAT,
  DT_INT32,
  DT_RESOURCE,
  DT_STRING,
  DT_UINT16,
  DT_VARIANT,
  ITEMSIZE,
  InsertBuilder,
  TABLE_NAMES,
  add_column,
  encode_column,
  make_chunk,
  random_column,
  set_shape,
  string_content,
)
from .compression import (
  SNAPPY,
  ZSTD,
  codecs,
  snappy_declaring,
  varint,
  zstd_frame,
)

if TYPE_CHECKING:
  from .fuzzer import Fuzzer


# --------------------------------------------------------------------------
# Field-level mutations (InsertStream)


def _target(
  b: InsertBuilder,
) -> Tuple[
  sc.ChunkData, int, sc.PrioritizedItem, sc.FlatTrajectory.Column, Any
]:
  """The chunk (and tensor index) behind the first slice of the first item."""
  _, item = b.items()[0]
  column = item.flat_trajectory.columns[0]
  s = column.chunk_slices[0]
  chunk = next(c for _, c in b.chunk_protos() if c.chunk_key == s.chunk_key)
  return chunk, s.index, item, column, s


def _numeric_target(
  b: InsertBuilder,
) -> Tuple[sc.ChunkData, tp.TensorProto, sc.FlatTrajectory.Column]:
  """A (chunk, tensor, column) of the first item whose tensor is numeric.

  The column is narrowed to one unsqueezed row (row 0) of that tensor, so
  that only the tensor's content can make the item invalid. A string column
  is turned into float32 if the item has no numeric one.
  """
  _, item = b.items()[0]
  chunks = {c.chunk_key: c for _, c in b.chunk_protos()}
  for column in item.flat_trajectory.columns:
    s = column.chunk_slices[0]
    tensor = chunks[s.chunk_key].data.tensors[s.index]
    if tensor.dtype != DT_STRING or column is item.flat_trajectory.columns[-1]:
      break
  if tensor.dtype == DT_STRING:
    tensor.dtype = DT_FLOAT
  key, index = s.chunk_key, s.index
  del column.chunk_slices[:]
  column.chunk_slices.add(chunk_key=key, offset=0, length=1, index=index)
  column.squeeze = False
  return chunks[key], tensor, column


def _row_elements(tensor: tp.TensorProto) -> int:
  return math.prod(d.size for d in tensor.tensor_shape.dim[1:])


def _declare(
  b: InsertBuilder, rng: random.Random, codec: int, declared: int
) -> str:
  """A numeric tensor whose codec frame declares `declared` bytes, shape to match."""
  chunk, tensor, _ = _numeric_target(b)
  row_bytes = _row_elements(tensor) * ITEMSIZE[tensor.dtype]
  rows = max(1, declared // max(row_bytes, 1))
  dims = [rows] + [d.size for d in tensor.tensor_shape.dim[1:]]
  set_shape(tensor, dims)
  payload = rng.randbytes(rng.choice([16, 64, 256]))
  chunk.compression = codec
  if codec == ZSTD:
    tensor.tensor_content = zstd_frame(payload, rows * row_bytes)
  else:
    tensor.tensor_content = snappy_declaring(
      codecs().snappy_compress(payload), rows * row_bytes
    )
  chunk.data_uncompressed_size = rows * row_bytes
  return (
    f'{"zstd frame" if codec == ZSTD else "snappy block"} declaring '
    f'{rows * row_bytes} bytes holding {len(payload)}, tensor dtype {tensor.dtype} '
    f'shape {dims}, data_uncompressed_size to match; item slices row 0'
  )


def _string_target(b: InsertBuilder) -> tp.TensorProto:
  """The first item's first column's tensor turned into a [2] string tensor
  (the column slices its row 0, unsqueezed)."""
  chunk, tensor, column = _numeric_target(b)
  tensor.dtype = DT_STRING
  set_shape(tensor, [2])
  chunk.compression = SNAPPY
  return tensor


def _new_chunk(
  b: InsertBuilder,
  rng: random.Random,
  dtype: int,
  row_shape: Tuple[int, ...],
  rows: int,
  compression: int = SNAPPY,
) -> int:
  """Adds a valid one-tensor chunk to the first message; returns its key."""
  key = rng.getrandbits(64)
  column = random_column(rng, dtype, row_shape, rows)
  b.messages[0].chunks.append(make_chunk(key, [column], compression))
  b.chunks[key] = ChunkMeta(key, [column], compression, False)
  return key


def _flip_bits(rng: random.Random, data: bytes, flips: int) -> bytes:
  out = bytearray(data)
  for _ in range(flips):
    if not out:
      break
    i = rng.randrange(len(out))
    out[i] ^= 1 << rng.randrange(8)
  return bytes(out)


# Field-level mutators of a valid InsertBuilder: name -> (weight, function
# returning the detail). Each keeps the rest of the call valid.
InsertMutator = Callable[[random.Random, InsertBuilder, 'Fuzzer'], str]
INSERT_MUTATORS: Dict[str, Tuple[int, InsertMutator]] = {}


def insert_mutator(
  name: str, weight: int = 2
) -> Callable[[InsertMutator], InsertMutator]:
  """Registers a field-level InsertStream mutator."""

  def register(function: InsertMutator) -> InsertMutator:
    INSERT_MUTATORS[name] = (weight, function)
    return function

  return register


@insert_mutator('chunk.compression_out_of_range')
def _m_compression(rng, b, _):
  chunk, *_ = _target(b)
  chunk.compression = rng.choice([2, 3, 7, 1000, 2**31 - 1, -1, -(2**31)])
  return f'ChunkData.compression={chunk.compression}'


@insert_mutator('chunk.codec_flag_mismatch')
def _m_codec_flag(rng, b, _):
  chunk, _, _ = _numeric_target(b)
  chunk.compression = ZSTD if chunk.compression == SNAPPY else SNAPPY
  return (
    f'compression flag says {"zstd" if chunk.compression == ZSTD else "snappy"}, '
    'tensors were encoded with the other codec'
  )


@insert_mutator('chunk.data_tensors_len_wrong')
def _m_tensors_len(rng, b, _):
  chunk, *_ = _target(b)
  chunk.data_tensors_len = rng.choice(
    [0, -1, len(chunk.data.tensors) + 1, 2**31 - 1, -(2**31)]
  )
  return f'data_tensors_len={chunk.data_tensors_len} for {len(chunk.data.tensors)} tensors'


@insert_mutator('chunk.data_uncompressed_size_wrong')
def _m_uncompressed(rng, b, _):
  chunk, *_ = _target(b)
  chunk.data_uncompressed_size = rng.choice(
    [-1, 0, 2**40, 2**62, 2**63 - 1, -(2**63), chunk.data_uncompressed_size + 1]
  )
  return f'data_uncompressed_size={chunk.data_uncompressed_size}'


@insert_mutator('chunk.delta_flag_flipped', 1)
def _m_delta(rng, b, _):
  chunk, *_ = _target(b)
  chunk.delta_encoded = not chunk.delta_encoded
  return f'delta_encoded={chunk.delta_encoded} (content unchanged: valid, other values)'


@insert_mutator('chunk.sequence_range_odd', 1)
def _m_sequence_range(rng, b, _):
  chunk, *_ = _target(b)
  r = chunk.sequence_range
  r.start, r.end = rng.choice(
    [(-5, -10), (10, 2), (2**31 - 1, -(2**31)), (0, 0)]
  )
  r.episode_id = rng.choice([0, 2**64 - 1, r.episode_id])
  r.sparse = rng.random() < 0.5
  return f'sequence_range={{episode {r.episode_id}, {r.start}..{r.end}, sparse {r.sparse}}}'


@insert_mutator('chunk.without_tensors')
def _m_no_tensors(rng, b, _):
  chunk, *_ = _target(b)
  chunk.ClearField('data')
  return (
    f'ChunkData.data cleared (data_tensors_len still {chunk.data_tensors_len})'
  )


@insert_mutator('chunk.tensors_in_deprecated_data')
def _m_deprecated_data(rng, b, _):
  chunk, *_ = _target(b)
  chunk.deprecated_data.extend(chunk.data.tensors)
  chunk.ClearField('data')
  return 'tensors moved from ChunkData.data (5) to deprecated_data (3)'


@insert_mutator('chunk.duplicate_key_other_content')
def _m_duplicate_chunk(rng, b, _):
  chunk, index, item, column, s = _target(b)
  first_rows = chunk.data.tensors[index].tensor_shape.dim[0].size
  bigger = sc.ChunkData()
  bigger.CopyFrom(chunk)
  t = bigger.data.tensors[index]
  dims = [d.size for d in t.tensor_shape.dim]
  dims[0] = first_rows + 3
  meta = b.chunks[chunk.chunk_key].columns[index]
  column_data = random_column(rng, meta.dtype, meta.row_shape, dims[0])
  bigger.data.tensors[index].CopyFrom(
    encode_column(column_data, bigger.compression, bigger.delta_encoded)
  )
  b.messages[-1].chunks.append(bigger)
  del column.chunk_slices[:]
  column.chunk_slices.add(
    chunk_key=chunk.chunk_key, offset=first_rows, length=2, index=index
  )
  column.squeeze = False
  return (
    f'a second chunk with key {chunk.chunk_key} and {dims[0]} rows (the first has '
    f'{first_rows}); the item slices rows [{first_rows}, {first_rows + 2}) '
    'which only the second has'
  )


@insert_mutator('chunk.key_extreme', 1)
def _m_chunk_key(rng, b, _):
  chunk, *_ = _target(b)
  old, new = chunk.chunk_key, rng.choice([0, 2**64 - 1])
  chunk.chunk_key = new
  for _, item in b.items():
    for column in item.flat_trajectory.columns:
      for s in column.chunk_slices:
        if s.chunk_key == old:
          s.chunk_key = new
  for message in b.messages:
    message.keep_chunk_keys[:] = [
      new if k == old else k for k in message.keep_chunk_keys
    ]
  return f'chunk_key={new} (valid)'


@insert_mutator('tensor.dtype_out_of_range', 3)
def _m_dtype_invalid(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  tensor.dtype = rng.choice(
    [0, DT_RESOURCE, DT_VARIANT, 24, 100, 2**31 - 1, -1, -100]
  )
  return f'tensor dtype={tensor.dtype}'


@insert_mutator('tensor.dtype_changed', 2)
def _m_dtype_changed(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  old = tensor.dtype
  tensor.dtype = rng.choice(
    [d for d in list(ITEMSIZE) + [DT_STRING] if d != old]
  )
  return f'tensor dtype {old} -> {tensor.dtype}, content unchanged'


@insert_mutator('column.dtype_mismatch_between_slices')
def _m_dtype_mismatch(rng, b, _):
  chunk, tensor, column = _numeric_target(b)
  other = DT_DOUBLE if tensor.dtype != DT_DOUBLE else DT_INT32
  key = _new_chunk(
    b, rng, other, tuple(d.size for d in tensor.tensor_shape.dim[1:]), 2
  )
  column.chunk_slices.add(chunk_key=key, offset=0, length=2, index=0)
  return f'column joins dtype {tensor.dtype} with dtype {other}'


@insert_mutator('column.row_shape_mismatch_between_slices')
def _m_shape_mismatch(rng, b, _):
  chunk, tensor, column = _numeric_target(b)
  row = tuple(d.size for d in tensor.tensor_shape.dim[1:]) + (2,)
  key = _new_chunk(b, rng, tensor.dtype, row, 2)
  column.chunk_slices.add(chunk_key=key, offset=0, length=1, index=0)
  return f'column joins row shape {list(row[:-1])} with {list(row)}'


@insert_mutator('tensor.shape_rank_0')
def _m_rank0(rng, b, _):
  chunk, index, *_ = _target(b)
  set_shape(chunk.data.tensors[index], [])
  return 'chunk tensor shape [] (no rows), item slices row 0'


@insert_mutator('tensor.shape_zero_rows')
def _m_zero_rows(rng, b, _):
  chunk, index, *_ = _target(b)
  t = chunk.data.tensors[index]
  dims = [0] + [d.size for d in t.tensor_shape.dim[1:]]
  set_shape(t, dims)
  return f'chunk tensor shape {dims}, content unchanged, item slices row 0'


@insert_mutator('tensor.shape_negative_dim', 3)
def _m_negative_dim(rng, b, _):
  chunk, index, *_ = _target(b)
  t = chunk.data.tensors[index]
  dims = [d.size for d in t.tensor_shape.dim]
  where = rng.randrange(len(dims) + 1)
  value = rng.choice([-1, -2, -(2**31), -(2**62), -(2**63)])
  if where == len(dims):
    dims.append(value)
  else:
    dims[where] = value
  set_shape(t, dims)
  return f'chunk tensor shape {dims}'


@insert_mutator('tensor.shape_huge_dims', 3)
def _m_huge_dims(rng, b, _):
  chunk, index, *_ = _target(b)
  t = chunk.data.tensors[index]
  dims = [d.size for d in t.tensor_shape.dim]
  dims[rng.randrange(len(dims))] = rng.choice([2**31, 2**40, 2**62, 2**63 - 1])
  set_shape(t, dims)
  return f'chunk tensor shape {dims}, content unchanged'


@insert_mutator('tensor.shape_product_overflows_int64', 2)
def _m_overflow(rng, b, _):
  chunk, index, *_ = _target(b)
  t = chunk.data.tensors[index]
  dims = rng.choice(
    [[2**31, 2**31, 2**31], [3, 2**62], [2**32] * 3, [2**21] * 4]
  )
  set_shape(t, dims)
  return f'chunk tensor shape {dims} (element count overflows int64)'


@insert_mutator('tensor.shape_high_rank', 1)
def _m_high_rank(rng, b, _):
  chunk, index, *_ = _target(b)
  t = chunk.data.tensors[index]
  dims = [d.size for d in t.tensor_shape.dim]
  ones = rng.choice([40, 300, 5000])
  set_shape(t, dims + [1] * ones)
  return f'chunk tensor of rank {len(dims) + ones} (trailing 1s: same bytes)'


@insert_mutator('tensor.shape_unknown_rank')
def _m_unknown_rank(rng, b, _):
  chunk, index, *_ = _target(b)
  chunk.data.tensors[index].tensor_shape.unknown_rank = True
  return 'tensor_shape.unknown_rank=true (dims kept)'


@insert_mutator('tensor.content_truncated', 3)
def _m_truncated(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  n = len(tensor.tensor_content)
  tensor.tensor_content = tensor.tensor_content[: rng.randrange(max(n, 1))]
  codec = 'zstd' if chunk.compression == ZSTD else 'snappy'
  return (
    f'{codec} tensor_content cut from {n} to {len(tensor.tensor_content)} bytes'
  )


@insert_mutator('tensor.content_garbage', 3)
def _m_garbage(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  tensor.tensor_content = rng.randbytes(rng.choice([1, 7, 64, 999]))
  codec = 'zstd' if chunk.compression == ZSTD else 'snappy'
  return f'{codec} tensor_content = {len(tensor.tensor_content)} random bytes'


@insert_mutator('tensor.content_bitflip', 3)
def _m_bitflip(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  flips = rng.choice([1, 2, 8])
  tensor.tensor_content = _flip_bits(rng, tensor.tensor_content, flips)
  codec = 'zstd' if chunk.compression == ZSTD else 'snappy'
  return f'{flips} bit flips in the {codec} tensor_content'


@insert_mutator('tensor.content_empty', 2)
def _m_empty_content(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  tensor.ClearField('tensor_content')
  return f'empty tensor_content for shape {[d.size for d in tensor.tensor_shape.dim]}'


@insert_mutator('tensor.content_trailing_garbage', 2)
def _m_trailing(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  tensor.tensor_content += rng.randbytes(rng.choice([1, 5, 100]))
  codec = 'zstd' if chunk.compression == ZSTD else 'snappy'
  return f'random bytes appended to a valid {codec} tensor_content'


for _codec, _name in ((SNAPPY, 'snappy'), (ZSTD, 'zstd')):
  for _power in (40, 62):
    insert_mutator(f'tensor.{_name}_declares_2^{_power}_bytes', 2)(
      lambda rng, b, _, c=_codec, p=_power: _declare(b, rng, c, 2**p)
    )


@insert_mutator('tensor.zstd_declares_wrong_size', 2)
def _m_zstd_wrong(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  nbytes = (
    math.prod(d.size for d in tensor.tensor_shape.dim) * ITEMSIZE[tensor.dtype]
  )
  holds = max(0, nbytes + rng.choice([-1, 1, 8, -nbytes]))
  chunk.compression = ZSTD
  tensor.tensor_content = zstd_frame(rng.randbytes(holds), nbytes)
  return f'zstd frame declaring the shape\'s {nbytes} bytes but holding {holds}'


@insert_mutator('tensor.zstd_without_content_size', 2)
def _m_zstd_no_size(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  nbytes = (
    math.prod(d.size for d in tensor.tensor_shape.dim) * ITEMSIZE[tensor.dtype]
  )
  chunk.compression = ZSTD
  tensor.tensor_content = zstd_frame(rng.randbytes(nbytes), None)
  return (
    f'zstd frame without Frame_Content_Size holding the right {nbytes} bytes'
  )


@insert_mutator('tensor.zstd_huge_window', 1)
def _m_zstd_window(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  nbytes = (
    math.prod(d.size for d in tensor.tensor_shape.dim) * ITEMSIZE[tensor.dtype]
  )
  chunk.compression = ZSTD
  window = rng.choice([31, 41])
  tensor.tensor_content = zstd_frame(
    rng.randbytes(nbytes), nbytes, window_log=window
  )
  return f'zstd frame with window log {window} holding the right {nbytes} bytes'


@insert_mutator('tensor.zstd_skippable_and_two_frames', 1)
def _m_zstd_frames(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  nbytes = (
    math.prod(d.size for d in tensor.tensor_shape.dim) * ITEMSIZE[tensor.dtype]
  )
  data = rng.randbytes(nbytes)
  chunk.compression = ZSTD
  if rng.random() < 0.5:
    skip = rng.randbytes(8)
    tensor.tensor_content = (
      struct.pack('<II', 0x184D2A50, len(skip))
      + skip
      + codecs().zstd_compress(data)
    )
    return f'a skippable frame, then a valid zstd frame of {nbytes} bytes'
  half = nbytes // 2
  tensor.tensor_content = codecs().zstd_compress(
    data[:half]
  ) + codecs().zstd_compress(data[half:])
  return f'two zstd frames of {half} and {nbytes - half} bytes (right total)'


@insert_mutator('tensor.zstd_rle_block', 1)
def _m_zstd_rle(rng, b, _):
  chunk, tensor, column = _numeric_target(b)
  row_bytes = _row_elements(tensor) * ITEMSIZE[tensor.dtype]
  rows = max(1, rng.choice([1 << 10, 100 << 10]) // max(row_bytes, 1))
  dims = [rows] + [d.size for d in tensor.tensor_shape.dim[1:]]
  set_shape(tensor, dims)
  chunk.compression = ZSTD
  nbytes = rows * row_bytes
  tensor.tensor_content = zstd_frame(
    bytes([rng.randrange(1, 256)]) * nbytes, nbytes, rle=True
  )
  chunk.data_uncompressed_size = nbytes
  return (
    f'valid zstd frame of one RLE block: {nbytes} bytes from 15 (shape {dims})'
  )


@insert_mutator('tensor.string_bad_varints', 4)
def _m_string_varints(rng, b, _):
  tensor = _string_target(b)
  choice = rng.randrange(6)
  tensor.tensor_content = [
    b'\xff\xff\xff',  # unterminated varint
    b'\xff' * 10 + b'\x01' + b'ab',  # 11-byte varint
    varint(2**62) + varint(1) + b'abc',  # a length past the end
    varint(2**64 - 1)
    + varint(2**64 - 1)
    + b'x',  # lengths overflowing their sum
    varint(1),  # fewer varints than strings
    varint(1) + varint(1) + b'ab' + b'trailing',  # bytes after the strings
  ][choice]
  return f'string tensor [2] with content {tensor.tensor_content[:24].hex()} (variant {choice})'


@insert_mutator('tensor.string_content_compressed', 1)
def _m_string_compressed(rng, b, _):
  tensor = _string_target(b)
  content = string_content([b'hello', b'world!'])
  tensor.tensor_content = (
    codecs().zstd_compress(content)
    if rng.random() < 0.5
    else codecs().snappy_compress(content)
  )
  return 'string tensor whose tensor_content is compressed (strings never are)'


@insert_mutator('tensor.values_in_typed_fields', 1)
def _m_typed_fields(rng, b, _):
  chunk, tensor, _ = _numeric_target(b)
  count = math.prod(d.size for d in tensor.tensor_shape.dim)
  tensor.ClearField('tensor_content')
  tensor.dtype = DT_FLOAT
  tensor.float_val.extend([1.5] * count)
  return 'float32 values in TensorProto.float_val, tensor_content empty'


@insert_mutator('item.unknown_table', 2)
def _m_unknown_table(rng, b, _):
  _, item = rng.choice(b.items())
  item.table = rng.choice(
    ['nope', '', 'x' * 10000, 'uniform ', 'UNIFORM', 'uni\x00form', 'probe\n']
  )
  return f'item table {item.table[:20]!r} (len {len(item.table)})'


@insert_mutator('item.other_real_table', 1)
def _m_other_table(rng, b, _):
  _, item = rng.choice(b.items())
  item.table = rng.choice([t for t in TABLE_NAMES if t != item.table])
  return f'item into table {item.table!r} instead (valid unless the signature says no)'


@insert_mutator('item.priority_special', 3)
def _m_priority(rng, b, _):
  _, item = rng.choice(b.items())
  item.priority = rng.choice(
    [math.nan, math.inf, -math.inf, -1.0, -0.0, 1e308, 5e-324, -1e-300]
  )
  return f'priority={item.priority!r} into {item.table}'


@insert_mutator('item.times_sampled_odd', 1)
def _m_times_sampled(rng, b, _):
  _, item = rng.choice(b.items())
  item.times_sampled = rng.choice([-1, 2**31 - 1, -(2**31)])
  return f'times_sampled={item.times_sampled}'


@insert_mutator('item.key_extreme', 1)
def _m_item_key(rng, b, _):
  _, item = rng.choice(b.items())
  item.key = rng.choice([0, 2**64 - 1])
  return f'item key={item.key} (valid)'


@insert_mutator('item.duplicate_key', 2)
def _m_dup_key(rng, b, fuzzer):
  items = b.items()
  _, item = items[-1]
  known = fuzzer.known_keys(item.table)
  if len(items) > 1 and rng.random() < 0.5:
    item.key = items[0][1].key
    return 'two items with the same key in one request (priority update)'
  if known:
    item.key = rng.choice(known)
    return f'key of an item already in {item.table} (priority update)'
  item.key = items[0][1].key
  return 'same key as an earlier item'


@insert_mutator('item.inserted_at_odd', 1)
def _m_inserted_at(rng, b, _):
  _, item = rng.choice(b.items())
  item.inserted_at.seconds = rng.choice([-(2**62), 2**62, -1])
  item.inserted_at.nanos = rng.choice([-1, 2 * 10**9, 0])
  return (
    f'inserted_at={{{item.inserted_at.seconds}s, {item.inserted_at.nanos}ns}}'
  )


@insert_mutator('item.deprecated_fields', 1)
def _m_deprecated_item(rng, b, _):
  _, item = rng.choice(b.items())
  item.deprecated_chunk_keys.extend([rng.getrandbits(64), 0])
  item.deprecated_sequence_range.offset = -1
  item.deprecated_sequence_range.length = 2**31 - 1
  return 'deprecated_chunk_keys of unknown chunks and a deprecated_sequence_range set'


@insert_mutator('trajectory.no_columns', 2)
def _m_no_columns(rng, b, _):
  _, item = rng.choice(b.items())
  item.ClearField('flat_trajectory')
  return 'item without flat_trajectory'


@insert_mutator('trajectory.column_without_slices', 2)
def _m_empty_column(rng, b, _):
  _, item = b.items()[0]
  columns = item.flat_trajectory.columns
  if rng.random() < 0.5:
    item.flat_trajectory.columns.add()
    return f'an extra column without slices after {len(columns) - 1} columns'
  del columns[0].chunk_slices[:]
  return 'column 0 without slices'


@insert_mutator('slice.unknown_chunk', 3)
def _m_unknown_chunk(rng, b, _):
  *_, s = _target(b)
  s.chunk_key = rng.getrandbits(64)
  return f'slice names chunk {s.chunk_key}, never sent'


@insert_mutator('slice.offset_negative', 2)
def _m_offset_negative(rng, b, _):
  *_, s = _target(b)
  s.offset = rng.choice([-1, -(2**31)])
  return f'slice offset={s.offset}'


@insert_mutator('slice.length_not_positive', 2)
def _m_length(rng, b, _):
  *_, column, s = _target(b)
  s.length = rng.choice([0, -1, -(2**31)])
  column.squeeze = False
  return f'slice length={s.length}'


@insert_mutator('slice.past_rows', 3)
def _m_past_rows(rng, b, _):
  chunk, index, _, column, s = _target(b)
  rows = chunk.data.tensors[index].tensor_shape.dim[0].size
  s.offset, s.length = rng.choice(
    [
      (rows, 1),
      (0, rows + 1),
      (rows - 1, 2),
      (2**31 - 1, 2**31 - 1),
      (1, 2**31 - 1),
    ]
  )
  column.squeeze = False
  return f'slice [{s.offset}, +{s.length}) of a chunk tensor of {rows} rows'


@insert_mutator('slice.index_missing_tensor', 3)
def _m_index(rng, b, _):
  chunk, _, _, _, s = _target(b)
  s.index = rng.choice(
    [len(chunk.data.tensors), len(chunk.data.tensors) + 5, 2**31 - 1]
  )
  return (
    f'slice index={s.index} into a chunk of {len(chunk.data.tensors)} tensors'
  )


@insert_mutator('slice.index_negative', 2)
def _m_index_negative(rng, b, _):
  *_, s = _target(b)
  s.index = rng.choice([-1, -(2**31)])
  return f'slice index={s.index}'


@insert_mutator('column.squeeze_multi_row', 3)
def _m_squeeze(rng, b, _):
  chunk, index, _, column, s = _target(b)
  rows = chunk.data.tensors[index].tensor_shape.dim[0].size
  if rows >= 2:
    del column.chunk_slices[1:]
    s.offset, s.length = 0, 2
  else:
    column.chunk_slices.add().CopyFrom(s)
  column.squeeze = True
  total = sum(x.length for x in column.chunk_slices)
  return f'squeeze=true on a column of {len(column.chunk_slices)} slice(s), {total} rows'


@insert_mutator('signature.mismatch', 3)
def _m_signature(rng, b, _):
  _, item = b.items()[0]
  item.table = 'prioritized'
  choice = rng.randrange(3)
  columns = item.flat_trajectory.columns
  if choice == 0:
    columns.add().CopyFrom(columns[0])
    return f'item of {len(columns)} columns into the 2-column signature table'
  if choice == 1 and len(columns) > 1:
    del columns[-1]
    return 'item of one column too few into the signature table'
  key = _new_chunk(b, rng, DT_UINT16, (5,), 2)
  del columns[:]
  add_column(item, [(key, 0, 2, 0)])
  add_column(item, [(key, 0, 2, 0)])
  return 'uint16 [2,5] columns into a table whose signature is int32 [?], float32 [?,3]'


@insert_mutator('request.keep_unknown_chunk', 3)
def _m_keep_unknown(rng, b, _):
  message = b.messages[-1]
  if not message.items:
    message = b.messages[0]
  message.keep_chunk_keys.extend([rng.getrandbits(64)])
  return 'keep_chunk_keys names a chunk the stream never sent'


@insert_mutator('request.keep_duplicate_keys', 1)
def _m_keep_duplicates(rng, b, _):
  index, _ = b.items()[0]
  message = b.messages[index]
  key = (
    message.chunks[0].chunk_key
    if message.chunks
    else b.chunk_protos()[0][1].chunk_key
  )
  message.keep_chunk_keys.extend([key, key])
  return 'keep_chunk_keys lists one (sent) chunk twice'


@insert_mutator('request.empty_message', 2)
def _m_empty_message(rng, b, _):
  b.messages.insert(
    rng.randrange(len(b.messages) + 1), rs.InsertStreamRequest()
  )
  return 'an InsertStreamRequest with neither chunks nor items'


@insert_mutator('request.item_before_its_chunks', 2)
def _m_item_first(rng, b, _):
  chunks = [c for m in b.messages for c in m.chunks]
  items = [i for m in b.messages for i in m.items]
  b.messages[:] = [
    rs.InsertStreamRequest(items=items),
    rs.InsertStreamRequest(chunks=chunks),
  ]
  return 'the items come one message before their chunks'


@insert_mutator('request.chunk_released_then_used', 2)
def _m_released(rng, b, _):
  chunks = [c for m in b.messages for c in m.chunks]
  items = [i for m in b.messages for i in m.items]
  second = sc.PrioritizedItem()
  second.CopyFrom(items[0])
  second.key = rng.getrandbits(64)
  b.messages[:] = [
    rs.InsertStreamRequest(chunks=chunks, items=items),
    rs.InsertStreamRequest(items=[second]),
  ]
  return (
    'chunks not kept after the first message are used by an item of the second'
  )


@insert_mutator('request.many_items', 1)
def _m_many_items(rng, b, _):
  index, item = b.items()[0]
  for _ in range(rng.choice([50, 300])):
    copy = b.messages[index].items.add()
    copy.CopyFrom(item)
    copy.key = rng.getrandbits(64)
  return f'{len(b.messages[index].items)} items in one message (valid)'


@insert_mutator('request.huge_keep_list', 1)
def _m_huge_keep(rng, b, _):
  b.messages[-1].keep_chunk_keys.extend(
    rng.getrandbits(64) for _ in range(100000)
  )
  return 'keep_chunk_keys of 100000 unknown chunks'


@insert_mutator('request.many_chunk_only_messages', 1)
def _m_many_messages(rng, b, _):
  chunks = [c for m in b.messages for c in m.chunks]
  items = [i for m in b.messages for i in m.items]
  b.messages[:] = [rs.InsertStreamRequest(chunks=chunks)] * 40 + [
    rs.InsertStreamRequest(items=items)
  ]
  return (
    '40 chunk-only messages re-sending the same chunks, then the items (valid)'
  )


# --------------------------------------------------------------------------
# Byte-level mutations (any method)


def byte_mutation(
  rng: random.Random, data: bytes, strings: Sequence[str] = ()
) -> Tuple[str, str, bytes]:
  """A byte-level mutation of a serialized message: (kind, detail, bytes)."""
  ops = [
    'truncate',
    'bitflip',
    'garbage',
    'splice',
    'length_past_end',
    'unterminated_group',
    'field_number_zero',
    'overlong_varint',
    'unknown_fields',
    'empty',
    'two_messages_merged',
  ]
  present = [s for s in strings if s and s.encode() in data]
  if present:
    ops += ['invalid_utf8'] * 2
  op = rng.choice(ops)
  if op == 'truncate' and len(data) >= 2:
    cut = rng.randrange(1, len(data))
    return (
      'bytes.truncated',
      f'{len(data)}-byte message cut to {cut}',
      data[:cut],
    )
  if op == 'bitflip' and data:
    flips = rng.choice([1, 1, 3, 16])
    return (
      'bytes.bitflip',
      f'{flips} bit flips in {len(data)} bytes',
      _flip_bits(rng, data, flips),
    )
  if op == 'splice':
    at = rng.randrange(len(data) + 1)
    junk = rng.randbytes(rng.randint(1, 16))
    return (
      'bytes.spliced',
      f'{len(junk)} random bytes at {at}',
      data[:at] + junk + data[at:],
    )
  if op == 'length_past_end':
    return (
      'bytes.length_past_end',
      'field 1 (length-delimited) claims 1000 bytes, 3 follow',
      data + b'\x0a' + varint(1000) + b'abc',
    )
  if op == 'unterminated_group':
    return (
      'bytes.unterminated_group',
      'a START_GROUP tag of field 1 never ended',
      data + b'\x0b',
    )
  if op == 'field_number_zero':
    return (
      'bytes.field_number_zero',
      'a tag with field number 0',
      data + b'\x00\x01',
    )
  if op == 'overlong_varint':
    return (
      'bytes.overlong_varint',
      'field 2 varint of 11 bytes',
      data + b'\x10' + b'\xff' * 10 + b'\x01',
    )
  if op == 'unknown_fields':
    return (
      'bytes.unknown_fields',
      'unknown fields 127 (varint) and 4 (varint) appended',
      data + b'\xf8\x07\x01' + b'\x20\x05',
    )
  if op == 'empty':
    return 'bytes.empty_message', 'zero-length message', b''
  if op == 'two_messages_merged':
    return (
      'bytes.two_messages_merged',
      'the message concatenated with itself',
      data + data,
    )
  if op == 'invalid_utf8':
    name = rng.choice(present)
    broken = name.encode()[:-1] + b'\xff'
    return (
      'bytes.invalid_utf8',
      f'string {name!r} with its last byte replaced by 0xff',
      data.replace(name.encode(), broken, 1),
    )
  junk = rng.randbytes(rng.choice([1, 3, 17, 200, 4096]))
  return 'bytes.garbage', f'{len(junk)} random bytes', junk
