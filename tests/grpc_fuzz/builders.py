"""Chunk and item builders of the gRPC fuzz.

The DataType numbers and element sizes of the wire; ``ColumnData`` (a chunk
tensor before encoding) and its encoders (``encode_column``, ``make_chunk``,
``add_column``: both chunk layouts, Snappy and zstd, strings and delta
encoding); the fuzzed server's table layout (``server_config``); and
``InsertBuilder`` / ``good_insert``, valid InsertStream calls which the
mutators then break (docs/architecture/wire-protocol.md).
"""

import base64
import dataclasses
import math
import random
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc
from tf_reverb.proto import tensor_pb2 as tp

from .compression import SNAPPY, ZSTD, codecs, varint

# DataType numbers (proto/tensor.proto).
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = (
  1,
  2,
  3,
  4,
  5,
  6,
  7,
)
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_UINT16, DT_HALF = (
  8,
  9,
  10,
  14,
  17,
  19,
)
DT_RESOURCE, DT_VARIANT, DT_UINT32, DT_UINT64 = 20, 21, 22, 23

# Bytes per element of every numeric DataType (quantized and bfloat16 too:
# the server need not decode them, TF clients can).
ITEMSIZE = {
  1: 4,
  2: 8,
  3: 4,
  4: 1,
  5: 2,
  6: 1,
  8: 8,
  9: 8,
  10: 1,
  11: 1,
  12: 1,
  13: 4,
  14: 2,
  15: 2,
  16: 2,
  17: 2,
  18: 16,
  19: 2,
  22: 4,
  23: 8,
}
# Integer dtypes that delta encoding applies to, with their unsigned type.
DELTA_UNSIGNED = {
  3: '<u4',
  4: 'u1',
  5: '<u2',
  6: 'u1',
  9: '<u8',
  17: '<u2',
  22: '<u4',
  23: '<u8',
}
NUMPY_DTYPE = {
  1: '<f4',
  2: '<f8',
  3: '<i4',
  4: 'u1',
  5: '<i2',
  6: 'i1',
  8: '<c8',
  9: '<i8',
  10: '?',
  17: '<u2',
  19: '<f2',
  22: '<u4',
  23: '<u8',
}


@dataclasses.dataclass
class ColumnData:
  """One chunk tensor before encoding: [rows, *row_shape]."""

  dtype: int
  shape: Tuple[int, ...]
  raw: bytes = b''  # little-endian C-order bytes of numeric tensors
  strings: List[bytes] = dataclasses.field(default_factory=list)  # DT_STRING

  @property
  def rows(self) -> int:
    """Size of the leading dimension."""
    return self.shape[0]

  @property
  def row_shape(self) -> Tuple[int, ...]:
    """Shape of one row."""
    return self.shape[1:]


def random_column(
  rng: random.Random, dtype: int, row_shape: Tuple[int, ...], rows: int
) -> ColumnData:
  """A column of `rows` random rows (bools 0/1, strings of 0-12 bytes)."""
  count = rows * math.prod(row_shape)
  shape = (rows, *row_shape)
  if dtype == DT_STRING:
    return ColumnData(
      dtype,
      shape,
      strings=[rng.randbytes(rng.randint(0, 12)) for _ in range(count)],
    )
  if dtype == DT_BOOL:
    return ColumnData(
      dtype, shape, raw=bytes(rng.getrandbits(1) for _ in range(count))
    )
  return ColumnData(dtype, shape, raw=rng.randbytes(count * ITEMSIZE[dtype]))


def string_content(strings: Sequence[bytes]) -> bytes:
  """TensorFlow's tensor_content of a string tensor: all varints, then bytes."""
  return b''.join(varint(len(s)) for s in strings) + b''.join(strings)


def delta_encode(column: ColumnData) -> bytes:
  """Row i > 0 as row[i] - row[i-1] (wrap-around) for integer rank >= 2."""
  if (
    column.dtype not in DELTA_UNSIGNED
    or len(column.shape) < 2
    or column.rows < 2
  ):
    return column.raw
  rows = np.frombuffer(column.raw, DELTA_UNSIGNED[column.dtype]).reshape(
    column.rows, -1
  )
  out = rows.copy()
  out[1:] = rows[1:] - rows[:-1]
  return out.tobytes()


def set_shape(tensor: tp.TensorProto, dims: Sequence[int]) -> None:
  """Replaces the tensor's shape by `dims`."""
  tensor.tensor_shape.ClearField('dim')
  for d in dims:
    tensor.tensor_shape.dim.add(size=d)


def encode_column(
  column: ColumnData, compression: int, delta: bool
) -> tp.TensorProto:
  """The chunk TensorProto of `column` with `compression` (docs/architecture/wire-protocol.md)."""
  tensor = tp.TensorProto(dtype=column.dtype)
  set_shape(tensor, column.shape)
  if column.dtype == DT_STRING:
    tensor.tensor_content = string_content(column.strings)
    return tensor
  raw = delta_encode(column) if delta else column.raw
  if compression == ZSTD:
    tensor.tensor_content = codecs().zstd_compress(raw)
  else:
    tensor.tensor_content = codecs().snappy_compress(raw)
  return tensor


def column_bytes(column: ColumnData) -> int:
  """Raw bytes of a column as data_uncompressed_size counts them."""
  if column.dtype == DT_STRING:
    return sum(len(s) for s in column.strings)
  return len(column.raw)


def make_chunk(
  key: int,
  columns: Sequence[ColumnData],
  compression: int = SNAPPY,
  delta: bool = False,
  episode_id: int = 1,
  start: int = 0,
) -> sc.ChunkData:
  """A valid ChunkData holding `columns` (all of the same rows)."""
  chunk = sc.ChunkData(
    chunk_key=key,
    delta_encoded=delta,
    data_tensors_len=len(columns),
    data_uncompressed_size=sum(column_bytes(c) for c in columns),
    compression=compression,
  )
  chunk.sequence_range.episode_id = episode_id
  chunk.sequence_range.start = start
  chunk.sequence_range.end = start + columns[0].rows - 1
  for column in columns:
    chunk.data.tensors.append(encode_column(column, compression, delta))
  return chunk


def add_column(
  item: sc.PrioritizedItem,
  slices: Sequence[Tuple[int, int, int, int]],
  squeeze: bool = False,
) -> None:
  """Appends a column of (chunk_key, offset, length, index) slices."""
  column = item.flat_trajectory.columns.add(squeeze=squeeze)
  for key, offset, length, index in slices:
    column.chunk_slices.add(
      chunk_key=key, offset=offset, length=length, index=index
    )


@dataclasses.dataclass
class ChunkMeta:
  """What a builder put into a chunk, for mutators and content checks."""

  key: int
  columns: List[ColumnData]
  compression: int
  delta: bool


# Table layout of the fuzzed server. 'prioritized' has a signature of
# trajectories: {'action': int32 [?], 'obs': float32 [?, 3]} (columns in that
# order; never squeezed), which the server enforces (--check_item_signatures;
# without it tables accept any item, as Reverb's do).
SIGNATURE_COLUMNS = [(DT_INT32, ()), (DT_FLOAT, (3,))]
MIN_SIZE = {
  'samples_per_insert': 1,
  'min_size_to_sample': 1,
  'min_diff': -1.7976931348623157e308,
  'max_diff': 1.7976931348623157e308,
}
TABLE_NAMES = ('uniform', 'fifo', 'prioritized', 'heap')
PROBE_TABLE = 'probe'
ALL_TABLES = TABLE_NAMES + (PROBE_TABLE,)

# Row layouts of random (unsigned) columns.
COLUMN_KINDS = [
  (DT_FLOAT, (3,)),
  (DT_INT32, ()),
  (DT_UINT8, (2, 2)),
  (DT_INT64, (2,)),
  (DT_STRING, ()),
  (DT_DOUBLE, ()),
  (DT_BOOL, (4,)),
  (DT_HALF, (2,)),
  (DT_COMPLEX64, ()),
  (DT_UINT64, ()),
  (DT_STRING, (2,)),
  (DT_INT16, (3,)),
]


def server_config(port: int = 0) -> Dict[str, Any]:
  """The JSON ReverbServerConfig of the fuzzed server (docs/reference/config-format.md)."""
  from tf_reverb import reverb_types  # pylint: disable=g-import-not-at-top
  from tf_reverb import tensor_spec  # pylint: disable=g-import-not-at-top

  signature = reverb_types.encode_signature(
    {
      'action': tensor_spec.TensorSpec([None], 'int32'),
      'obs': tensor_spec.TensorSpec([None, 3], 'float32'),
    }
  )
  ratio = lambda spi: {
    'samples_per_insert': spi,
    'min_size_to_sample': 1,
    'min_diff': -1e7,
    'max_diff': 1e7,
  }
  return {
    'port': port,
    'tables': [
      {
        'table_name': 'uniform',
        'sampler': {'uniform': True},
        'remover': {'fifo': True},
        'max_size': 5000,
        'rate_limiter': MIN_SIZE,
      },
      {
        'table_name': 'fifo',
        'sampler': {'fifo': True},
        'remover': {'fifo': True},
        'max_size': 50,
        'rate_limiter': ratio(2.0),
      },
      {
        'table_name': 'prioritized',
        'sampler': {'prioritized': {'priority_exponent': 0.8}},
        'remover': {'fifo': True},
        'max_size': 5000,
        'rate_limiter': ratio(1.0),
        'signature': base64.b64encode(signature).decode(),
      },
      {
        'table_name': 'heap',
        'sampler': {'heap': {'min_heap': False}},
        'remover': {'lifo': True},
        'max_size': 40,
        'rate_limiter': MIN_SIZE,
      },
      {
        'table_name': PROBE_TABLE,
        'sampler': {'lifo': True},
        'remover': {'fifo': True},
        'max_size': 1000,
        'rate_limiter': MIN_SIZE,
      },
    ],
  }


class InsertBuilder:
  """A valid InsertStream call under construction (messages and what is in them)."""

  def __init__(self):
    self.messages: List[rs.InsertStreamRequest] = []
    self.chunks: Dict[int, ChunkMeta] = {}

  def chunk_protos(self) -> List[Tuple[int, sc.ChunkData]]:
    """(message index, chunk) of every chunk sent."""
    return [(m, c) for m, msg in enumerate(self.messages) for c in msg.chunks]

  def items(self) -> List[Tuple[int, sc.PrioritizedItem]]:
    """(message index, item) of every item sent."""
    return [(m, i) for m, msg in enumerate(self.messages) for i in msg.items]

  def serialized(self) -> List[bytes]:
    """The messages as bytes."""
    return [m.SerializeToString() for m in self.messages]


def good_insert(
  rng: random.Random, table: str, items: int = 0
) -> InsertBuilder:
  """A valid InsertStream call of 1-2 items into `table` (docs/architecture/wire-protocol.md).

  Chunk layout, codec, delta encoding, multi-slice and squeezed columns and
  the split over messages (chunks first / keep_chunk_keys reuse) are random.
  """
  b = InsertBuilder()
  kinds = (
    SIGNATURE_COLUMNS
    if table == 'prioritized'
    else [rng.choice(COLUMN_KINDS) for _ in range(rng.randint(1, 3))]
  )
  rows = rng.randint(1, 6)
  legacy = rng.random() < 0.35
  chunks: List[sc.ChunkData] = []
  # Per output column: candidate (key, index, rows) sources of equal layout.
  sources: List[List[Tuple[int, int, int]]] = [[] for _ in kinds]
  if legacy:
    key = rng.getrandbits(64)
    columns = [random_column(rng, d, s, rows) for d, s in kinds]
    compression = rng.choice([SNAPPY, ZSTD])
    delta = rng.random() < 0.4
    chunks.append(
      make_chunk(key, columns, compression, delta, start=rng.randint(0, 99))
    )
    b.chunks[key] = ChunkMeta(key, columns, compression, delta)
    for c in range(len(kinds)):
      sources[c].append((key, c, rows))
  else:
    for c, (dtype, row_shape) in enumerate(kinds):
      for _ in range(rng.choice([1, 1, 2])):
        key = rng.getrandbits(64)
        n = rng.randint(1, 6)
        column = random_column(rng, dtype, row_shape, n)
        compression = rng.choice([SNAPPY, ZSTD])
        chunks.append(
          make_chunk(key, [column], compression, start=rng.randint(0, 99))
        )
        b.chunks[key] = ChunkMeta(key, [column], compression, False)
        sources[c].append((key, 0, n))
  made: List[sc.PrioritizedItem] = []
  for _ in range(items or rng.choice([1, 1, 2])):
    item = sc.PrioritizedItem(
      key=rng.getrandbits(64),
      table=table,
      priority=rng.choice([1.0, 0.5, 2.0, 0.0, 1e-3, 7.0]),
    )
    if legacy:
      key, _, n = sources[0][0]
      offset = rng.randrange(n)
      length = rng.randint(1, n - offset)
      for c in range(len(kinds)):
        add_column(item, [(key, offset, length, c)])
    else:
      for c in range(len(kinds)):
        slices = []
        for key, index, n in sources[c]:
          if slices and rng.random() < 0.3:
            continue
          offset = rng.randrange(n)
          slices.append((key, offset, rng.randint(1, n - offset), index))
        total = sum(s[2] for s in slices)
        add_column(
          item,
          slices,
          squeeze=(
            total == 1 and table != 'prioritized' and rng.random() < 0.5
          ),
        )
    made.append(item)
  split = rng.random()
  if split < 0.2:  # chunks alone first, then the items
    b.messages.append(rs.InsertStreamRequest(chunks=chunks))
    b.messages.append(rs.InsertStreamRequest(items=made))
  elif split < 0.35 and len(made) == 2:  # keep the chunks for the second item
    b.messages.append(
      rs.InsertStreamRequest(
        chunks=chunks,
        items=made[:1],
        keep_chunk_keys=[c.chunk_key for c in chunks],
      )
    )
    b.messages.append(rs.InsertStreamRequest(items=made[1:]))
  else:
    b.messages.append(rs.InsertStreamRequest(chunks=chunks, items=made))
  return b
