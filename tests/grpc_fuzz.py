"""Structure-aware fuzzing of the ReverbService gRPC surface (issue #14).

The pieces, used by tests/test_grpc_fuzz.py:

* ``Codecs``: raw Snappy blocks and zstd frames through the system
  libsnappy/libzstd (ctypes), plus hand-built frames whose declared sizes lie.
* chunk and item builders (``ColumnData``, ``InsertBuilder``) producing valid
  InsertStream requests of both chunk layouts, Snappy and zstd, strings and
  delta encoding, which the mutators then break.
* an oracle decoder of sampled items (``decode_item``), strict where the
  encoding is: exact decompressed sizes, exact string varints, slices inside
  their chunks, squeeze on one row.
* ``FuzzServer``: the reverb_server binary on a free port with a checkpoint
  directory, cleaned up by pid.
* ``Fuzzer``: generates ``Case``s (field-level and byte-level mutations and
  cancellations) for every RPC from a seeded RNG, runs each with a deadline
  over raw-bytes stubs, classifies the outcome and collects ``Failure``s in a
  ``Report``, then sweeps every table (all items must sample and decode),
  checks the server still serves good traffic and that its checkpoint
  restores.

Everything is deterministic for a seed except timing (which response a
cancellation lands after).
"""

import base64
import ctypes
import ctypes.util
import dataclasses
import json
import math
import os
import random
import re
import struct
import subprocess
import threading
import time
from typing import (
  Any,
  Callable,
  Dict,
  Iterator,
  List,
  Optional,
  Sequence,
  Set,
  Tuple,
)

import grpc
import numpy as np
from google.protobuf import message as pb_message

from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc
from tf_reverb.proto import tensor_pb2 as tp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TF_REVERB_FUZZ_SERVER: another reverb_server build to fuzz.
SERVER_BINARY = os.environ.get('TF_REVERB_FUZZ_SERVER') or os.path.join(
  ROOT, 'tf_reverb', 'bin', 'reverb_server'
)
SERVICE = '/deepmind.reverb.ReverbService/'

SNAPPY = sc.ChunkData.COMPRESSION_SNAPPY
ZSTD = sc.ChunkData.COMPRESSION_ZSTD
CODECS_METADATA = (('x-tf-reverb-codecs', 'zstd'),)
RATE_LIMITER_MESSAGE = 'Rate Limiter: Timeout exceeded'
CLIENT_DEADLINE_MESSAGE = 'Deadline Exceeded'

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
# The oracle refuses to materialize more than this per tensor.
MAX_DECODED_BYTES = 64 << 20
MAX_RANK = 254  # TensorFlow's TensorShape limit


# --------------------------------------------------------------------------
# Codecs


class Codecs:
  """Snappy raw blocks and zstd frames through the system libraries."""

  _ZSTD_CONTENTSIZE_UNKNOWN = (1 << 64) - 1
  _ZSTD_CONTENTSIZE_ERROR = (1 << 64) - 2

  def __init__(self):
    """Loads libsnappy and libzstd (the server links the same libraries)."""
    self._snappy = ctypes.CDLL(
      ctypes.util.find_library('snappy') or 'libsnappy.so.1'
    )
    self._zstd = ctypes.CDLL(ctypes.util.find_library('zstd') or 'libzstd.so.1')
    size_t, size_p = ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)
    s = self._snappy
    s.snappy_max_compressed_length.argtypes = [size_t]
    s.snappy_max_compressed_length.restype = size_t
    s.snappy_compress.argtypes = [
      ctypes.c_char_p,
      size_t,
      ctypes.c_char_p,
      size_p,
    ]
    s.snappy_compress.restype = ctypes.c_int
    s.snappy_uncompress.argtypes = [
      ctypes.c_char_p,
      size_t,
      ctypes.c_char_p,
      size_p,
    ]
    s.snappy_uncompress.restype = ctypes.c_int
    s.snappy_uncompressed_length.argtypes = [ctypes.c_char_p, size_t, size_p]
    s.snappy_uncompressed_length.restype = ctypes.c_int
    z = self._zstd
    z.ZSTD_compressBound.argtypes = [size_t]
    z.ZSTD_compressBound.restype = size_t
    z.ZSTD_compress.argtypes = [
      ctypes.c_char_p,
      size_t,
      ctypes.c_char_p,
      size_t,
      ctypes.c_int,
    ]
    z.ZSTD_compress.restype = size_t
    z.ZSTD_decompress.argtypes = [
      ctypes.c_char_p,
      size_t,
      ctypes.c_char_p,
      size_t,
    ]
    z.ZSTD_decompress.restype = size_t
    z.ZSTD_isError.argtypes = [size_t]
    z.ZSTD_isError.restype = ctypes.c_uint
    z.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, size_t]
    z.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong

  def snappy_compress(self, data: bytes) -> bytes:
    """A raw Snappy block of `data`."""
    n = ctypes.c_size_t(self._snappy.snappy_max_compressed_length(len(data)))
    out = ctypes.create_string_buffer(max(n.value, 1))
    assert (
      self._snappy.snappy_compress(data, len(data), out, ctypes.byref(n)) == 0
    )
    return out.raw[: n.value]

  def snappy_uncompressed_length(self, data: bytes) -> Optional[int]:
    """The length a Snappy block declares, None if its preamble is bad."""
    n = ctypes.c_size_t(0)
    if (
      self._snappy.snappy_uncompressed_length(data, len(data), ctypes.byref(n))
      != 0
    ):
      return None
    return n.value

  def snappy_uncompress(self, data: bytes, expected: int) -> Optional[bytes]:
    """`data` decoded, None unless it is a valid block of `expected` bytes."""
    if self.snappy_uncompressed_length(data) != expected:
      return None
    out = ctypes.create_string_buffer(max(expected, 1))
    n = ctypes.c_size_t(expected)
    if (
      self._snappy.snappy_uncompress(data, len(data), out, ctypes.byref(n)) != 0
    ):
      return None
    return out.raw[: n.value] if n.value == expected else None

  def zstd_compress(self, data: bytes, level: int = 3) -> bytes:
    """One zstd frame of `data` with its content size."""
    bound = self._zstd.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(bound)
    n = self._zstd.ZSTD_compress(out, bound, data, len(data), level)
    assert not self._zstd.ZSTD_isError(n)
    return out.raw[:n]

  def zstd_content_size(self, data: bytes) -> Optional[int]:
    """The content size the first frame declares; None if absent or bad."""
    n = self._zstd.ZSTD_getFrameContentSize(data, len(data))
    if n in (self._ZSTD_CONTENTSIZE_UNKNOWN, self._ZSTD_CONTENTSIZE_ERROR):
      return None
    return n

  def zstd_decompress(self, data: bytes, expected: int) -> Optional[bytes]:
    """`data` decoded, None unless it is valid zstd of exactly `expected` bytes."""
    out = ctypes.create_string_buffer(max(expected, 1))
    n = self._zstd.ZSTD_decompress(out, expected, data, len(data))
    if self._zstd.ZSTD_isError(n) or n != expected:
      return None
    return out.raw[:n]


_CODECS: Optional[Codecs] = None


def codecs() -> Codecs:
  """The process's Codecs (loaded once)."""
  global _CODECS
  if _CODECS is None:
    _CODECS = Codecs()
  return _CODECS


def varint(value: int) -> bytes:
  """`value` (>= 0) as a protobuf/Snappy base-128 varint."""
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


def snappy_declaring(block: bytes, declared: int) -> bytes:
  """Snappy `block` with its length preamble replaced by `declared`."""
  i = 0
  while block[i] & 0x80:
    i += 1
  return varint(declared) + block[i + 1 :]


def zstd_frame(
  content: bytes,
  declared: Optional[int],
  window_log: int = 17,
  rle: bool = False,
) -> bytes:
  """A hand-made zstd frame holding `content` in raw (or one RLE) block(s).

  Args:
    content: the bytes the blocks really hold (for `rle`, content[0] repeated
      len(content) times).
    declared: the Frame_Content_Size written in the header (8 bytes), or None
      for a frame without one. It need not be len(content).
    window_log: the Window_Descriptor's exponent + 10 (the frame is never
      single-segment, so a lying content size cannot size the window).
    rle: one RLE block instead of raw blocks.
  """
  descriptor = (3 << 6) if declared is not None else 0
  header = struct.pack('<I', 0xFD2FB528) + bytes(
    [descriptor, (window_log - 10) << 3]
  )
  if declared is not None:
    header += struct.pack('<Q', declared)
  block_max = min(1 << window_log, 128 << 10)
  blocks = b''
  if rle:
    assert 0 < len(content) <= block_max
    blocks = (
      struct.pack('<I', (len(content) << 3) | (1 << 1) | 1)[:3] + content[:1]
    )
    return header + blocks
  pieces = [
    content[i : i + block_max] for i in range(0, len(content), block_max)
  ] or [b'']
  for i, piece in enumerate(pieces):
    last = 1 if i == len(pieces) - 1 else 0
    blocks += struct.pack('<I', (len(piece) << 3) | last)[:3] + piece
  return header + blocks


# --------------------------------------------------------------------------
# Chunks and items


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


# --------------------------------------------------------------------------
# The oracle decoder


class DecodeError(Exception):
  """A sampled item that cannot be decoded as docs/architecture/wire-protocol.md defines."""


@dataclasses.dataclass
class Decoded:
  """A decoded chunk tensor or item column."""

  dtype: int
  shape: Tuple[int, ...]
  raw: bytes = b''
  strings: List[bytes] = dataclasses.field(default_factory=list)


def parse_strings(content: bytes, count: int) -> List[bytes]:
  """TF string tensor_content of `count` strings; exact, else DecodeError."""
  lengths, pos = [], 0
  for _ in range(count):
    value, shift = 0, 0
    while True:
      if pos >= len(content):
        raise DecodeError('string tensor: truncated varint')
      byte = content[pos]
      pos += 1
      value |= (byte & 0x7F) << shift
      shift += 7
      if not byte & 0x80:
        break
      if shift >= 64:
        raise DecodeError('string tensor: varint longer than 10 bytes')
    lengths.append(value)
  if sum(lengths) != len(content) - pos:
    raise DecodeError(
      f'string tensor: lengths add up to {sum(lengths)}, '
      f'{len(content) - pos} bytes follow'
    )
  out = []
  for n in lengths:
    out.append(content[pos : pos + n])
    pos += n
  return out


def decode_tensor(
  tensor: tp.TensorProto, compression: int, delta: bool
) -> Decoded:
  """Decodes one chunk tensor; DecodeError for anything out of spec."""
  if tensor.tensor_shape.unknown_rank:
    raise DecodeError('tensor of unknown rank')
  dims = tuple(d.size for d in tensor.tensor_shape.dim)
  if len(dims) > MAX_RANK:
    raise DecodeError(f'rank {len(dims)} > {MAX_RANK}')
  if any(d < 0 for d in dims):
    raise DecodeError(f'negative dimension in {list(dims)}')
  count = math.prod(dims)
  content = tensor.tensor_content
  if tensor.dtype == DT_STRING:
    if count > MAX_DECODED_BYTES:
      raise DecodeError(f'{count} strings')
    return Decoded(DT_STRING, dims, strings=parse_strings(content, count))
  if tensor.dtype not in ITEMSIZE:
    raise DecodeError(f'unsupported dtype {tensor.dtype}')
  nbytes = count * ITEMSIZE[tensor.dtype]
  if nbytes > MAX_DECODED_BYTES:
    raise DecodeError(f'tensor of {nbytes} bytes (shape {list(dims)})')
  if nbytes == 0 and not content:
    raw = b''
  elif compression == SNAPPY:
    raw = codecs().snappy_uncompress(content, nbytes)
  elif compression == ZSTD:
    raw = codecs().zstd_decompress(content, nbytes)
  else:
    raise DecodeError(f'unknown compression {compression}')
  if raw is None:
    raise DecodeError(
      f'{"zstd" if compression == ZSTD else "snappy"} content does not '
      f'decode to the {nbytes} bytes of shape {list(dims)}'
    )
  if (
    delta and tensor.dtype in DELTA_UNSIGNED and len(dims) >= 2 and dims[0] > 1
  ):
    rows = np.frombuffer(raw, DELTA_UNSIGNED[tensor.dtype]).reshape(dims[0], -1)
    raw = np.cumsum(rows, axis=0, dtype=rows.dtype).tobytes()
  return Decoded(tensor.dtype, dims, raw=raw)


def decode_item(
  item: sc.PrioritizedItem,
  chunks: Dict[int, sc.ChunkData],
  expected: Optional[Dict[int, ChunkMeta]] = None,
) -> List[Decoded]:
  """The columns of a sampled item; DecodeError for anything out of spec.

  With `expected` (chunk key -> what a good builder put in it), decoded
  chunk tensors must also equal what was sent.
  """
  columns = item.flat_trajectory.columns
  if not columns:
    raise DecodeError('item without columns')
  cache: Dict[Tuple[int, int], Decoded] = {}
  out = []
  for c, column in enumerate(columns):
    if not column.chunk_slices:
      raise DecodeError(f'column {c} has no slices')
    parts: List[Decoded] = []
    for s in column.chunk_slices:
      chunk = chunks.get(s.chunk_key)
      if chunk is None:
        raise DecodeError(f'column {c}: chunk {s.chunk_key} not in the sample')
      if not 0 <= s.index < len(chunk.data.tensors):
        raise DecodeError(
          f'column {c}: tensor {s.index} of a chunk of '
          f'{len(chunk.data.tensors)}'
        )
      if (s.chunk_key, s.index) not in cache:
        cache[(s.chunk_key, s.index)] = decoded = decode_tensor(
          chunk.data.tensors[s.index], chunk.compression, chunk.delta_encoded
        )
        meta = (expected or {}).get(s.chunk_key)
        if meta is not None and s.index < len(meta.columns):
          sent = meta.columns[s.index]
          if (decoded.dtype, decoded.shape, decoded.raw, decoded.strings) != (
            sent.dtype,
            sent.shape,
            sent.raw,
            sent.strings,
          ):
            raise DecodeError(
              f'chunk {s.chunk_key} tensor {s.index} decodes to other '
              'data than was inserted'
            )
      tensor = cache[(s.chunk_key, s.index)]
      if not tensor.shape:
        raise DecodeError(f'column {c}: chunk tensor is a scalar (no rows)')
      if s.offset < 0 or s.length < 0 or s.offset + s.length > tensor.shape[0]:
        raise DecodeError(
          f'column {c}: slice [{s.offset}, {s.offset + s.length}) of '
          f'{tensor.shape[0]} rows'
        )
      if parts and (parts[0].dtype, parts[0].shape[1:]) != (
        tensor.dtype,
        tensor.shape[1:],
      ):
        raise DecodeError(f'column {c}: slices of different dtype or row shape')
      row = math.prod(tensor.shape[1:])
      if tensor.dtype == DT_STRING:
        parts.append(
          Decoded(
            DT_STRING,
            (s.length, *tensor.shape[1:]),
            strings=tensor.strings[
              s.offset * row : (s.offset + s.length) * row
            ],
          )
        )
      else:
        size = row * ITEMSIZE[tensor.dtype]
        parts.append(
          Decoded(
            tensor.dtype,
            (s.length, *tensor.shape[1:]),
            raw=tensor.raw[s.offset * size : (s.offset + s.length) * size],
          )
        )
    rows = sum(p.shape[0] for p in parts)
    shape = (rows, *parts[0].shape[1:])
    if column.squeeze:
      if rows != 1:
        raise DecodeError(f'column {c} is squeezed but has {rows} rows')
      shape = shape[1:]
    out.append(
      Decoded(
        parts[0].dtype,
        shape,
        raw=b''.join(p.raw for p in parts),
        strings=[x for p in parts for x in p.strings],
      )
    )
  return out


@dataclasses.dataclass
class SampledItem:
  """One item of a SampleStream, reassembled from its entries."""

  info: sc.SampleInfo
  chunks: Dict[int, sc.ChunkData]


def assemble_samples(
  responses: Sequence[bytes],
) -> Tuple[List[SampledItem], Optional[str]]:
  """Items of raw SampleStreamResponses, and a protocol error if any."""
  items: List[SampledItem] = []
  current: Optional[SampledItem] = None
  for raw in responses:
    try:
      response = rs.SampleStreamResponse.FromString(raw)
    except pb_message.DecodeError as e:
      return items, f'unparsable SampleStreamResponse: {e}'
    for entry in response.entries:
      if current is None:
        if not entry.HasField('info'):
          return items, 'an item\'s first SampleEntry has no info'
        current = SampledItem(entry.info, {})
      for chunk in entry.data:
        current.chunks[chunk.chunk_key] = chunk
      if entry.end_of_sequence:
        items.append(current)
        current = None
  if current is not None:
    return items, 'the last item has no end_of_sequence entry'
  return items, None


# --------------------------------------------------------------------------
# The server under test


class FuzzServer:
  """The reverb_server binary with the fuzz tables and a checkpoint directory.

  Its output goes to a log file (a pipe nobody reads would fill and block
  the server). Stopped by its own pid only.
  """

  def __init__(self, workdir: str, checkpoint_dir: str, name: str = 'server'):
    """Starts the binary; AssertionError if it does not report its port in 60 s."""
    self.checkpoint_dir = checkpoint_dir
    self.log_path = os.path.join(workdir, f'{name}.log')
    os.makedirs(checkpoint_dir, exist_ok=True)
    self._log = open(self.log_path, 'w')  # pylint: disable=consider-using-with
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
      [
        SERVER_BINARY,
        '--config=' + json.dumps(server_config()),
        '--port=0',
        f'--checkpoint_dir={checkpoint_dir}',
        '--checkpoint_on_exit=false',
        '--check_item_signatures',
      ],
      stdout=self._log,
      stderr=subprocess.STDOUT,
    )
    self.port = 0
    deadline = time.time() + 60
    while time.time() < deadline and self.process.poll() is None:
      match = re.search(r'event=started port=(\d+)', self.log())
      if match:
        self.port = int(match.group(1))
        return
      time.sleep(0.05)
    self.stop()
    raise AssertionError('reverb_server did not start:\n' + self.log())

  @property
  def address(self) -> str:
    """host:port of the server."""
    return f'127.0.0.1:{self.port}'

  @property
  def pid(self) -> int:
    """The server's process id."""
    return self.process.pid

  def alive(self) -> bool:
    """Whether the process still runs."""
    return self.process.poll() is None

  def log(self, tail: int = 0) -> str:
    """The server's output so far (its last `tail` lines if > 0)."""
    with open(self.log_path, errors='replace') as f:
      text = f.read()
    return '\n'.join(text.splitlines()[-tail:]) if tail else text

  def stop(self) -> None:
    """Kills the process (by its pid) and waits for it."""
    if self.process.poll() is None:
      self.process.kill()
    try:
      self.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
      pass
    self._log.close()


# --------------------------------------------------------------------------
# Calls over raw bytes


@dataclasses.dataclass
class Outcome:
  """How one call ended."""

  code: grpc.StatusCode
  details: str
  responses: List[bytes]
  elapsed: float
  cancelled_by_us: bool = False

  @property
  def client_deadline(self) -> bool:
    """Whether our own deadline (not the server) ended the call."""
    return (
      self.code == grpc.StatusCode.DEADLINE_EXCEEDED
      and self.details == CLIENT_DEADLINE_MESSAGE
    )


STREAM_METHODS = ('InsertStream', 'SampleStream', 'InitializeConnection')
UNARY_METHODS = ('MutatePriorities', 'Reset', 'Checkpoint', 'ServerInfo')
REQUEST_TYPES = {
  'InsertStream': rs.InsertStreamRequest,
  'SampleStream': rs.SampleStreamRequest,
  'InitializeConnection': rs.InitializeConnectionRequest,
  'MutatePriorities': rs.MutatePrioritiesRequest,
  'Reset': rs.ResetRequest,
  'Checkpoint': rs.CheckpointRequest,
  'ServerInfo': rs.ServerInfoRequest,
}


class RawClient:
  """Every ReverbService method over a channel, taking and returning bytes."""

  def __init__(self, address: str):
    """Opens an insecure channel to `address` (no message size limits)."""
    self.channel = grpc.insecure_channel(
      address,
      options=[
        ('grpc.max_receive_message_length', -1),
        ('grpc.max_send_message_length', -1),
      ],
    )
    ident = lambda b: b
    self._streams = {
      m: self.channel.stream_stream(
        SERVICE + m, request_serializer=ident, response_deserializer=ident
      )
      for m in STREAM_METHODS
    }
    self._unary = {
      m: self.channel.unary_unary(
        SERVICE + m, request_serializer=ident, response_deserializer=ident
      )
      for m in UNARY_METHODS
    }

  def close(self) -> None:
    """Closes the channel."""
    self.channel.close()

  def call(
    self,
    method: str,
    messages: Sequence[bytes],
    deadline: float,
    metadata: Sequence[Tuple[str, str]] = (),
    cancel: Optional[str] = None,
    half_close: bool = True,
  ) -> Outcome:
    """Sends `messages` and collects the responses and the final status.

    Args:
      method: a ReverbService method name.
      messages: serialized requests (exactly one for unary methods).
      deadline: seconds.
      metadata: request metadata.
      cancel: None; 'after_first_response' (cancel once a response came);
        or 'after_delay' (cancel 50 ms after sending). Streams that cancel
        are not half-closed.
      half_close: for streams without `cancel`: half-close after the
        messages (False: keep the stream open until the deadline).
    """
    start = time.monotonic()
    if method in UNARY_METHODS:
      try:
        response = self._unary[method](
          messages[0], timeout=deadline, metadata=metadata
        )
        return Outcome(
          grpc.StatusCode.OK, '', [response], time.monotonic() - start
        )
      except grpc.RpcError as e:
        return Outcome(
          e.code(), e.details() or '', [], time.monotonic() - start
        )
    release = threading.Event()

    def requests() -> Iterator[bytes]:
      yield from messages
      if cancel or not half_close:
        release.wait(deadline + 5)

    call = self._streams[method](
      requests(), timeout=deadline, metadata=metadata
    )
    responses: List[bytes] = []
    cancelled = False
    timer = None
    if cancel == 'after_delay':
      timer = threading.Timer(0.05, call.cancel)
      timer.start()
    try:
      for response in call:
        responses.append(response)
        if cancel == 'after_first_response':
          cancelled = True
          call.cancel()
    except grpc.RpcError:
      pass
    finally:
      release.set()
      if timer is not None:
        timer.cancel()
        cancelled = True
    code = call.code()
    return Outcome(
      code,
      call.details() or '',
      responses,
      time.monotonic() - start,
      cancelled_by_us=cancelled and code == grpc.StatusCode.CANCELLED,
    )


def wire_valid(data: bytes) -> bool:
  """Whether the top level of `data` is well-formed protobuf wire format:
  field numbers >= 1, known wire types, varints of at most 10 bytes,
  lengths inside the data, groups closed (Python's parser accepts a tag of
  field number 0 where C++'s does not)."""
  pos, groups = 0, []

  def read_varint() -> Optional[int]:
    nonlocal pos
    value = 0
    for shift in range(0, 70, 7):
      if pos >= len(data) or shift == 70:
        return None
      byte = data[pos]
      pos += 1
      value |= (byte & 0x7F) << shift
      if not byte & 0x80:
        return value
    return None

  while pos < len(data):
    tag = read_varint()
    if tag is None or tag >> 3 == 0:
      return False
    wire = tag & 7
    if wire == 0:
      if read_varint() is None:
        return False
    elif wire == 1:
      pos += 8
    elif wire == 2:
      length = read_varint()
      if length is None:
        return False
      pos += length
    elif wire == 3:
      groups.append(tag >> 3)
    elif wire == 4:
      if not groups or groups.pop() != tag >> 3:
        return False
    elif wire == 5:
      pos += 4
    else:
      return False
    if pos > len(data):
      return False
  return not groups


def parsable(method: str, data: bytes) -> bool:
  """Whether `data` parses as the request message of `method`."""
  if not wire_valid(data):
    return False
  try:
    REQUEST_TYPES[method].FromString(data)
    return True
  except pb_message.DecodeError:
    return False


# --------------------------------------------------------------------------
# Cases


@dataclasses.dataclass
class Case:
  """One fuzz request: an RPC with its messages and how to send them."""

  index: int
  method: str
  kind: str  # the mutation family, e.g. 'tensor.zstd_declares_2^40_bytes'
  detail: str  # what exactly was done, for a reproducer
  messages: List[bytes]
  deadline: float = 10.0
  may_block: bool = False  # ending at our deadline is legitimate
  cancel: Optional[str] = None
  half_close: bool = True
  metadata: Tuple[Tuple[str, str], ...] = ()
  good: bool = False  # unmutated and valid: must succeed
  chunks: Dict[int, ChunkMeta] = dataclasses.field(default_factory=dict)

  @property
  def unparsable(self) -> bool:
    """Whether some message does not parse as the method's request."""
    return any(not parsable(self.method, m) for m in self.messages)

  def describe(self) -> str:
    """Method, kind and detail, and the messages' sizes and first bytes."""
    sizes = ', '.join(str(len(m)) for m in self.messages[:8])
    more = '...' if len(self.messages) > 8 else ''
    head = ''
    for m in self.messages:
      if not parsable(self.method, m) or self.kind.startswith('bytes.'):
        head = f'; mutated message bytes[:96]={m[:96].hex()}'
        break
    extra = f' cancel={self.cancel}' if self.cancel else ''
    return (
      f'#{self.index} {self.method} [{self.kind}] {self.detail} '
      f'(messages of {sizes}{more} bytes{extra}){head}'
    )


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


# --------------------------------------------------------------------------
# Failures and the report


# Checks, as they appear in the report.
CRASH = 'server crashed'
UNRESPONSIVE = 'server unresponsive afterwards'
HANG = 'no answer within the deadline'
BAD_STATUS = 'status UNKNOWN/INTERNAL'
EMPTY_MESSAGE = 'error with an empty message'
UNPARSABLE = 'unparsable request not INVALID_ARGUMENT'
VALID_FAILED = 'valid request failed'
BREAKS_SAMPLING = 'accepted item, then sampling it failed'
UNDECODABLE = 'accepted item that does not decode'
PROTOCOL = 'malformed response stream'
WRONG_CONFIRMATION = 'confirmed a key that was not sent'
SWEEP = 'final sweep'
AFTERWARDS = 'good traffic after the fuzz'
RESTORE = 'checkpoint restore'


@dataclasses.dataclass
class Failure:
  """One failed check."""

  check: str
  method: str
  kind: str
  code: str
  message: str
  reproducer: str

  @property
  def cls(self) -> Tuple[str, str, str, str]:
    """The failure class: method, mutation kind, check, status."""
    return (self.method, self.kind, self.check, self.code)


class Report:
  """Failures grouped by class, and counts of what was run."""

  def __init__(self):
    self.failures: List[Failure] = []
    self.cases_by_method: Dict[str, int] = {}
    self.codes: Dict[Tuple[str, str], int] = {}
    self.notes: List[str] = []
    self.elapsed = 0.0

  def add(self, failure: Failure) -> None:
    """Records a failure (once per class and request)."""
    if any(
      f.cls == failure.cls and f.reproducer == failure.reproducer
      for f in self.failures[-20:]
    ):
      return
    self.failures.append(failure)

  def classes(self) -> Dict[Tuple[str, str, str, str], List[Failure]]:
    """Failures by class, in order of first occurrence."""
    out: Dict[Tuple[str, str, str, str], List[Failure]] = {}
    for f in self.failures:
      out.setdefault(f.cls, []).append(f)
    return out

  def summary(self) -> List[str]:
    """The classes folded by check and status: which methods and kinds."""
    folded: Dict[Tuple[str, str], Dict[str, int]] = {}
    for f in self.failures:
      kinds = folded.setdefault((f.check, f.code), {})
      name = f'{f.method}/{f.kind}'
      kinds[name] = kinds.get(name, 0) + 1
    lines = []
    for (check, code), kinds in folded.items():
      lines.append(
        f'* {check} [{code}]: {sum(kinds.values())} in '
        + ', '.join(f'{k} ({n})' for k, n in sorted(kinds.items()))
      )
    return lines

  def table(self, examples: int = 2) -> str:
    """A readable table of the failure classes with a few examples each."""
    lines = [
      f'grpc fuzz: {sum(self.cases_by_method.values())} requests '
      f'({", ".join(f"{m} {n}" for m, n in sorted(self.cases_by_method.items()))}) '
      f'in {self.elapsed:.1f}s'
    ]
    lines.append(
      'status codes seen: '
      + ', '.join(f'{m}:{c}={n}' for (m, c), n in sorted(self.codes.items()))
    )
    lines.extend(self.notes)
    classes = self.classes()
    if not classes:
      lines.append('no failures')
      return '\n'.join(lines)
    lines.append(
      f'{len(classes)} failure classes, {len(self.failures)} failures.'
    )
    lines.append('by check and status:')
    lines.extend(self.summary())
    lines.append('')
    header = (
      f'{"count":>5}  {"method":<20} {"mutation kind":<40} {"status":<19} check'
    )
    lines.append(header)
    lines.append('-' * len(header))
    for (method, kind, check, code), fs in sorted(classes.items()):
      lines.append(f'{len(fs):>5}  {method:<20} {kind:<40} {code:<19} {check}')
    lines.append('')
    lines.append('examples:')
    for (method, kind, check, code), fs in sorted(classes.items()):
      lines.append(f'* {method} | {kind} | {check} | {code}')
      for f in fs[:examples]:
        lines.append(f'    message: {f.message[:300]!r}')
        lines.append(f'    request: {f.reproducer[:700]}')
    return '\n'.join(lines)

  def to_json(self) -> str:
    """The failures as JSON (class -> count and examples)."""
    return json.dumps(
      [
        {
          'method': k[0],
          'kind': k[1],
          'check': k[2],
          'code': k[3],
          'count': len(v),
          'examples': [dataclasses.asdict(f) for f in v[:3]],
        }
        for k, v in self.classes().items()
      ],
      indent=1,
    )


# --------------------------------------------------------------------------
# The fuzzer


def sample_request(
  table: str, num_samples: int, timeout_ms: Optional[int]
) -> bytes:
  """A serialized SampleStreamRequest (timeout None: field absent)."""
  request = rs.SampleStreamRequest(table=table, num_samples=num_samples)
  if timeout_ms is not None:
    request.rate_limiter_timeout.milliseconds = timeout_ms
  return request.SerializeToString()


class Fuzzer:
  """Runs the fuzz against a fresh server and fills a Report.

  Per case: send, check the outcome (no crash, no hang, no UNKNOWN/INTERNAL,
  messages on every error, unparsable -> INVALID_ARGUMENT, valid requests
  succeed), verify sampled items with the oracle, and probe every accepted
  mutated item: its copy in the LIFO table 'probe' is sampled at once (with
  and without zstd announced, alternately) and must sample and decode; items
  that fail are deleted again so they do not hide later failures.
  """

  def __init__(
    self,
    workdir: str,
    seed: int,
    requests: int,
    log: Callable[[str], None] = print,
  ):
    """`requests` fuzz cases from `seed`, server files under `workdir`."""
    self.workdir = workdir
    self.seed = seed
    self.requests = requests
    self.log = log
    self.report = Report()
    self.server: Optional[FuzzServer] = None
    self.client: Optional[RawClient] = None
    self.incarnation = 0
    # key -> (table, case) of items confirmed by the current server.
    self.origins: Dict[int, List[Tuple[str, Case]]] = {}
    self.keys_by_table: Dict[str, List[int]] = {t: [] for t in ALL_TABLES}
    self.expected_chunks: Dict[int, ChunkMeta] = {}
    self.case: Optional[Case] = None

  # ---- server lifecycle

  def start_server(self) -> None:
    """Starts a server (a fresh checkpoint directory per incarnation)."""
    self.incarnation += 1
    ckpt = os.path.join(self.workdir, f'checkpoints-{self.incarnation}')
    self.server = FuzzServer(
      self.workdir, ckpt, name=f'server-{self.incarnation}'
    )
    self.client = RawClient(self.server.address)
    self.origins.clear()
    self.expected_chunks.clear()
    for keys in self.keys_by_table.values():
      keys.clear()

  def stop_server(self) -> None:
    """Stops the current server (by pid)."""
    if self.client is not None:
      self.client.close()
    if self.server is not None:
      self.server.stop()

  def restart(self, why: str) -> None:
    """Replaces a dead or stuck server and refills it."""
    self.report.notes.append(
      f'server restarted after case #{self.case.index if self.case else -1}'
      f': {why}'
    )
    self.stop_server()
    self.start_server()
    self.baseline(quick=True)

  def known_keys(self, table: str) -> List[int]:
    """Keys of items confirmed into `table` (some may be gone)."""
    return self.keys_by_table.get(table, [])

  # ---- bookkeeping

  def fail(
    self,
    check: str,
    code: Any,
    message: str,
    case: Optional[Case] = None,
    method: Optional[str] = None,
    kind: Optional[str] = None,
    reproducer: Optional[str] = None,
  ) -> None:
    """Records a failure of `case` (or of a named phase); with
    TF_REVERB_FUZZ_DUMP=dir, also writes the case's messages there
    (case-<index>-<n>.bin)."""
    case = case or self.case
    dump = os.environ.get('TF_REVERB_FUZZ_DUMP')
    if dump and case is not None and case.index >= 0:
      os.makedirs(dump, exist_ok=True)
      for n, m in enumerate(case.messages):
        with open(os.path.join(dump, f'case-{case.index}-{n}.bin'), 'wb') as f:
          f.write(m)
    code_name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    self.report.add(
      Failure(
        check,
        method or (case.method if case else '-'),
        kind or (case.kind if case else '-'),
        code_name,
        message,
        reproducer or (case.describe() if case else ''),
      )
    )

  def origin_of(self, key: int, table: str) -> Optional[Case]:
    """The case that inserted item `key` into `table`, if known."""
    for t, case in self.origins.get(key, []):
      if t == table:
        return case
    return None

  def confirm(
    self, case: Case, keys: Sequence[int], tables: Dict[int, List[str]]
  ) -> None:
    """Registers keys an InsertStream confirmed."""
    for key in keys:
      if key not in tables:
        self.fail(WRONG_CONFIRMATION, 'OK', f'key {key} confirmed', case)
        continue
      for table in tables[key]:
        self.origins.setdefault(key, []).append((table, case))
        if table in self.keys_by_table:
          self.keys_by_table[table].append(key)

  # ---- running one case

  def run_case(self, case: Case) -> Outcome:
    """Sends `case`, checks its outcome and follows up (probe, sample checks)."""
    self.case = case
    if case.index >= 0:
      self.report.cases_by_method[case.method] = (
        self.report.cases_by_method.get(case.method, 0) + 1
      )
    out = self.client.call(
      case.method,
      case.messages,
      case.deadline,
      case.metadata,
      case.cancel,
      case.half_close,
    )
    code_key = (case.method, out.code.name)
    self.report.codes[code_key] = self.report.codes.get(code_key, 0) + 1
    self.check_outcome(case, out)
    if not self.server.alive():
      self.fail(
        CRASH,
        out.code,
        f'exit code {self.server.process.returncode}; last log '
        f'lines: {self.server.log(tail=8)}',
        case,
      )
      self.restart('crash')
      return out
    if case.method == 'InsertStream':
      self.after_insert(case, out)
    elif case.method == 'SampleStream':
      self.verify_samples(case, out)
    if (
      out.client_deadline
      or out.code == grpc.StatusCode.UNAVAILABLE
      or case.index % 100 == 0
    ):
      self.health_check()
    return out

  def check_outcome(self, case: Case, out: Outcome) -> None:
    """The per-call assertions (one failure naming every check that failed)."""
    code = out.code
    checks = []
    if (
      case.unparsable
      and not out.cancelled_by_us
      and code != grpc.StatusCode.INVALID_ARGUMENT
    ):
      checks.append(UNPARSABLE)
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
      checks.append(BAD_STATUS)
    if code != grpc.StatusCode.OK and not out.details.strip():
      checks.append(EMPTY_MESSAGE)
    if out.client_deadline and not case.may_block:
      checks.append(HANG)
    if case.good and not out.cancelled_by_us and not out.client_deadline:
      allowed = {grpc.StatusCode.OK}
      if case.method == 'SampleStream' and RATE_LIMITER_MESSAGE in out.details:
        allowed.add(grpc.StatusCode.DEADLINE_EXCEEDED)  # an empty table
      if code not in allowed:
        checks.append(VALID_FAILED)
    if checks:
      message = (
        out.details
        if not out.client_deadline
        else (f'{out.details} after {out.elapsed:.1f}s')
      )
      self.fail(' + '.join(checks), code, message, case)

  def health_check(self) -> None:
    """ServerInfo must answer; restarts the server otherwise."""
    out = self.client.call('ServerInfo', [b''], 20.0)
    if out.code != grpc.StatusCode.OK:
      if self.server.alive():
        self.fail(UNRESPONSIVE, out.code, out.details)
        self.restart('unresponsive')
      else:
        self.fail(
          CRASH,
          out.code,
          f'found dead; last log lines: {self.server.log(tail=8)}',
        )
        self.restart('crash')

  @staticmethod
  def sent_items(case: Case) -> Dict[int, List[str]]:
    """key -> tables of every item in the parsable messages of an InsertStream."""
    out: Dict[int, List[str]] = {}
    for m in case.messages:
      try:
        request = rs.InsertStreamRequest.FromString(m)
      except pb_message.DecodeError:
        continue
      for item in request.items:
        out.setdefault(item.key, []).append(item.table)
    return out

  def after_insert(self, case: Case, out: Outcome) -> None:
    """Registers confirmations and probes the accepted items of a mutated call."""
    sent = self.sent_items(case)
    keys: List[int] = []
    for raw in out.responses:
      try:
        keys.extend(rs.InsertStreamResponse.FromString(raw).keys)
      except pb_message.DecodeError as e:
        self.fail(
          PROTOCOL, out.code, f'unparsable InsertStreamResponse: {e}', case
        )
    self.confirm(case, keys, sent)
    if case.good:
      self.expected_chunks.update(case.chunks)
      missing = [k for k in sent if k not in keys]
      if missing and out.code == grpc.StatusCode.OK and not out.cancelled_by_us:
        self.fail(
          VALID_FAILED,
          out.code,
          f'{len(missing)} of {len(sent)} items not confirmed',
          case,
        )
      return
    probes = {k for k in keys if PROBE_TABLE in sent.get(k, [])}
    if probes and not self.probe(case, probes):
      sent_probes = {k for k, tables in sent.items() if PROBE_TABLE in tables}
      for key in (
        set(keys) | sent_probes
      ):  # quarantine: delete the items everywhere
        for table in sent.get(key, []):
          if table in ALL_TABLES:
            self.delete(table, [key])

  def delete(self, table: str, keys: Sequence[int]) -> None:
    """Deletes items (MutatePriorities); failures are reported."""
    request = rs.MutatePrioritiesRequest(
      table=table, delete_keys=keys
    ).SerializeToString()
    out = self.client.call('MutatePriorities', [request], 20.0)
    if out.code != grpc.StatusCode.OK:
      self.fail(
        VALID_FAILED,
        out.code,
        out.details,
        method='MutatePriorities',
        kind='harness.delete',
        reproducer=f'delete {len(keys)} keys of {table}',
      )

  def probe(self, case: Case, keys: Set[int]) -> bool:
    """Samples (newest first) and deletes the probe items until every one of
    `keys` was seen; False if one failed to sample or decode. Probe items
    the server inserted without confirming them (the stream failed first)
    are sampled on the way."""
    pending = set(keys)
    for _ in range(len(keys) + 8):
      if not pending:
        return True
      # The newest item twice: as clients without zstd get it (the server
      # transcodes zstd chunks to Snappy), then as zstd clients do.
      for metadata in ((), CODECS_METADATA):
        how = 'announcing zstd' if metadata else 'without zstd'
        out = self.client.call(
          'SampleStream', [sample_request(PROBE_TABLE, 1, 5000)], 20.0, metadata
        )
        items, error = assemble_samples(out.responses)
        if out.code != grpc.StatusCode.OK:
          self.fail(
            BREAKS_SAMPLING,
            out.code,
            f'SampleStream ({how}): {out.details}',
            case,
          )
          return False
        if error or not items:
          self.fail(
            PROTOCOL, out.code, error or f'no sample returned ({how})', case
          )
          return False
        for item in items:
          try:
            decode_item(item.info.item, item.chunks)
          except DecodeError as e:
            self.fail(UNDECODABLE, 'OK', f'sampled {how}: {e}', case)
            return False
      for item in items:
        pending.discard(item.info.item.key)
        self.delete(PROBE_TABLE, [item.info.item.key])
    self.report.notes.append(
      f'probe of case #{case.index}: {len(pending)} of its probe items '
      'were not sampled'
    )
    return True

  def verify_samples(
    self, case: Case, out: Outcome, label: Optional[str] = None
  ) -> List[SampledItem]:
    """Checks the items of a SampleStream outcome decode (with content checks)."""
    items, error = assemble_samples(out.responses)
    if error and out.code == grpc.StatusCode.OK:
      self.fail(PROTOCOL, out.code, error, case)
    for item in items:
      key, table = item.info.item.key, item.info.item.table
      try:
        decode_item(item.info.item, item.chunks, self.expected_chunks)
      except DecodeError as e:
        origin = self.origin_of(key, table)
        where = (
          f'{label or "sampled"} by #{case.index} {case.method} [{case.kind}]'
        )
        if origin is not None:  # blame the insert, and delete the item
          self.fail(UNDECODABLE, 'OK', f'{where}: {e}', origin)
          self.delete(table, [key])
        else:
          self.fail(
            UNDECODABLE,
            out.code,
            f'{where}: item {key} of {table} (origin unknown): {e}',
            case,
          )
    return items

  # ---- case generation

  METHOD_WEIGHTS = (
    ('InsertStream', 46),
    ('SampleStream', 20),
    ('MutatePriorities', 10),
    ('InitializeConnection', 7),
    ('ServerInfo', 6),
    ('Reset', 5),
    ('Checkpoint', 3),
  )

  def make_case(self, index: int) -> Case:
    """Case `index` (its own RNG: seed and index)."""
    rng = random.Random(f'{self.seed}/{index}')
    methods, weights = zip(*self.METHOD_WEIGHTS)
    method = rng.choices(methods, weights)[0]
    return getattr(self, f'case_{method}')(rng, index)

  @staticmethod
  def add_probe(rng: random.Random, b: InsertBuilder) -> None:
    """Adds a copy into the probe table of each item (the first three and
    the last), right after it in its message."""
    items = b.items()
    chosen = items[:3] + items[3:][-1:]
    for m, item in reversed(chosen):
      copy = sc.PrioritizedItem()
      copy.CopyFrom(item)
      copy.key = rng.getrandbits(64)
      copy.table = PROBE_TABLE
      copy.priority = 1.0
      position = list(b.messages[m].items).index(item) + 1
      b.messages[m].items.insert(position, copy)

  def case_InsertStream(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """A valid call, a field- or byte-mutated one, or a cancelled one."""
    table = rng.choice(TABLE_NAMES)
    b = good_insert(rng, table)
    r = rng.random()
    if r < 0.10:
      return Case(
        index,
        'InsertStream',
        'good',
        f'{len(b.items())} valid items into {table}',
        b.serialized(),
        good=True,
        chunks=b.chunks,
      )
    if r < 0.72:
      names = list(INSERT_MUTATORS)
      name = rng.choices(names, [INSERT_MUTATORS[n][0] for n in names])[0]
      detail = INSERT_MUTATORS[name][1](rng, b, self)
      self.add_probe(rng, b)
      return Case(
        index,
        'InsertStream',
        name,
        f'{detail} (items into {table})',
        b.serialized(),
      )
    if r < 0.92:
      self.add_probe(rng, b)
      messages = b.serialized()
      i = rng.randrange(len(messages))
      kind, detail, messages[i] = byte_mutation(
        rng, messages[i], [table, PROBE_TABLE]
      )
      prefix = (
        good_insert(rng, rng.choice(TABLE_NAMES)).serialized()
        if rng.random() < 0.3
        else []
      )
      return Case(
        index,
        'InsertStream',
        kind,
        f'message {len(prefix) + i} of {len(prefix) + len(messages)}: {detail}',
        prefix + messages,
      )
    choice = rng.randrange(3)
    if choice == 0:
      return Case(
        index,
        'InsertStream',
        'cancel.after_first_confirmation',
        'valid messages, cancelled after the first response',
        b.serialized(),
        cancel='after_first_response',
      )
    if choice == 1:
      chunks = [c for m in b.messages for c in m.chunks]
      return Case(
        index,
        'InsertStream',
        'cancel.with_chunks_pending',
        'chunk-only message, stream cancelled 50 ms later',
        [rs.InsertStreamRequest(chunks=chunks).SerializeToString()],
        cancel='after_delay',
      )
    return Case(
      index,
      'InsertStream',
      'cancel.idle_stream',
      'no message, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  def case_SampleStream(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid, field- or byte-mutated, multi-request and cancelled SampleStreams."""
    table = rng.choice(TABLE_NAMES)
    metadata = CODECS_METADATA if rng.random() < 0.5 else ()
    n = rng.choice([1, 2, 5, 16, 64])
    good = sample_request(table, n, rng.choice([200, 1000]))
    r = rng.random()
    if r < 0.3:
      return Case(
        index,
        'SampleStream',
        'good',
        f'{n} samples of {table}',
        [good],
        deadline=20.0,
        metadata=metadata,
        good=True,
      )
    if r < 0.62:
      choice = rng.randrange(9)
      if choice == 0:
        name = rng.choice(['nope', '', 'x' * 5000, 'uniform\x00', 'Uniform'])
        return Case(
          index,
          'SampleStream',
          'sample.unknown_table',
          f'table {name[:20]!r}',
          [sample_request(name, n, 200)],
          metadata=metadata,
        )
      if choice == 1:
        bad = rng.choice([0, -1, -(2**63)])
        return Case(
          index,
          'SampleStream',
          'sample.num_samples_not_positive',
          f'num_samples={bad} of {table}',
          [sample_request(table, bad, 200)],
        )
      if choice == 2:
        timeout = rng.choice([0, -1, -(2**63), None])
        return Case(
          index,
          'SampleStream',
          'sample.timeout_not_positive',
          f'rate_limiter_timeout={timeout} (infinite) for {n} of {table}',
          [sample_request(table, n, timeout)],
          deadline=3.0,
          may_block=True,
          metadata=metadata,
        )
      if choice == 3:
        timeout = rng.choice([2**62, 2**63 - 1])
        return Case(
          index,
          'SampleStream',
          'sample.timeout_huge',
          f'rate_limiter_timeout={timeout} ms for {n} of {table}',
          [sample_request(table, n, timeout)],
          deadline=3.0,
          may_block=True,
        )
      if choice == 4:
        return Case(
          index,
          'SampleStream',
          'sample.empty_table_times_out',
          'the (empty) probe table with a 100 ms timeout',
          [sample_request(PROBE_TABLE, 1, 100)],
          good=True,
        )
      if choice == 5:
        second = rng.choice(
          [good, sample_request(table, 0, 200), sample_request('nope', 1, 200)]
        )
        return Case(
          index,
          'SampleStream',
          'sample.several_requests',
          'two requests on one stream (the second valid, num_samples 0 or an unknown '
          'table)',
          [good, second],
          deadline=20.0,
          metadata=metadata,
        )
      if choice == 6:
        return Case(
          index,
          'SampleStream',
          'sample.no_request',
          'half-closed without a request',
          [],
          good=True,
        )
      if choice == 7:
        return Case(
          index,
          'SampleStream',
          'sample.reserved_field_4',
          'a valid request with the reserved field 4 set',
          [good + b'\x20\x01'],
          deadline=20.0,
          good=True,
        )
      return Case(
        index,
        'SampleStream',
        'sample.huge_num_samples',
        f'num_samples=2^62 of {table}, cancelled after the first response',
        [sample_request(table, 2**62, 1000)],
        deadline=20.0,
        cancel='after_first_response',
        metadata=metadata,
      )
    if r < 0.87:
      kind, detail, data = byte_mutation(rng, good, [table])
      return Case(
        index,
        'SampleStream',
        kind,
        f'{detail} (of {n} samples of {table})',
        [data],
        deadline=20.0,
      )
    if rng.random() < 0.5:
      return Case(
        index,
        'SampleStream',
        'cancel.blocked_sample',
        'the empty probe table without a timeout, cancelled 50 ms in',
        [sample_request(PROBE_TABLE, 1, None)],
        cancel='after_delay',
      )
    return Case(
      index,
      'SampleStream',
      'cancel.idle_stream',
      'no request, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  def case_MutatePriorities(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and mutated MutatePriorities calls."""
    table = rng.choice(ALL_TABLES)
    known = self.known_keys(table)
    pick = lambda k: [
      rng.choice(known) if known else rng.getrandbits(64) for _ in range(k)
    ]
    request = rs.MutatePrioritiesRequest(table=table)
    r = rng.random()
    if r < 0.3:
      for key in pick(rng.randint(1, 5)):
        request.updates.add(key=key, priority=rng.choice([0.5, 1.0, 2.0, 0.0]))
      request.delete_keys.extend(rng.getrandbits(64) for _ in range(2))
      return Case(
        index,
        'MutatePriorities',
        'good',
        f'updates of {table}',
        [request.SerializeToString()],
        good=True,
      )
    if r < 0.75:
      choice = rng.randrange(8)
      if choice == 0:
        request.table = rng.choice(['nope', '', 'y' * 5000, 'heap '])
        request.updates.add(key=1, priority=1.0)
        kind, detail = 'mutate.unknown_table', f'table {request.table[:20]!r}'
      elif choice == 1:
        priority = rng.choice(
          [math.nan, -1.0, math.inf, -math.inf, -0.0, 1e308, -5e-324]
        )
        for key in pick(2):
          request.updates.add(key=key, priority=priority)
        kind, detail = (
          'mutate.priority_special',
          f'priority {priority!r} for items of {table}',
        )
      elif choice == 2:
        request.updates.add(key=rng.getrandbits(64), priority=1.0)
        request.delete_keys.extend([rng.getrandbits(64), 0, 2**64 - 1])
        kind, detail = 'mutate.unknown_keys', f'keys absent from {table}'
      elif choice == 3:
        key = pick(1)[0]
        for p in (1.0, 2.0, 3.0):
          request.updates.add(key=key, priority=p)
        kind, detail = (
          'mutate.duplicate_keys',
          f'one key of {table} updated three times',
        )
      elif choice == 4:
        key = pick(1)[0]
        request.updates.add(key=key, priority=1.0)
        request.delete_keys.append(key)
        kind, detail = (
          'mutate.update_and_delete_same_key',
          f'one key of {table}',
        )
      elif choice == 5:
        for _ in range(20000):
          request.updates.add(key=rng.getrandbits(64), priority=1.0)
        request.delete_keys.extend(rng.getrandbits(64) for _ in range(20000))
        kind, detail = (
          'mutate.many_keys',
          f'20000 updates and deletes of absent keys ({table})',
        )
      elif choice == 6:
        request.delete_keys.extend(pick(rng.randint(1, 3)))
        kind, detail = (
          'mutate.delete_items',
          f'deletes of items of {table} (valid)',
        )
      else:
        kind, detail = (
          'mutate.empty_request',
          f'no updates, no deletes ({table}, valid)',
        )
      return Case(
        index,
        'MutatePriorities',
        kind,
        detail,
        [request.SerializeToString()],
        deadline=20.0,
      )
    request.updates.add(key=pick(1)[0], priority=1.5)
    kind, detail, data = byte_mutation(
      rng, request.SerializeToString(), [table]
    )
    return Case(
      index, 'MutatePriorities', kind, f'{detail} (update of {table})', [data]
    )

  def case_Reset(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid (rarely), unknown-table and byte-mutated Resets."""
    r = rng.random()
    if r < 0.2:
      table = rng.choice(
        ['heap', 'fifo', PROBE_TABLE, 'heap', 'fifo', 'uniform']
      )
      return Case(
        index,
        'Reset',
        'good',
        f'Reset {table}',
        [rs.ResetRequest(table=table).SerializeToString()],
        good=True,
        deadline=20.0,
      )
    if r < 0.5:
      name = rng.choice(['nope', '', 'z' * 5000, 'fifo\x00'])
      return Case(
        index,
        'Reset',
        'reset.unknown_table',
        f'table {name[:20]!r}',
        [rs.ResetRequest(table=name).SerializeToString()],
      )
    table = rng.choice(['nope', 'heap', 'fifo'])
    kind, detail, data = byte_mutation(
      rng, rs.ResetRequest(table=table).SerializeToString(), [table]
    )
    return Case(
      index, 'Reset', kind, f'{detail} (Reset {table})', [data], deadline=20.0
    )

  def case_Checkpoint(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and byte-mutated Checkpoint requests."""
    if rng.random() < 0.35:
      return Case(
        index,
        'Checkpoint',
        'good',
        'Checkpoint',
        [b''],
        deadline=60.0,
        good=True,
      )
    kind, detail, data = byte_mutation(rng, b'')
    return Case(index, 'Checkpoint', kind, detail, [data], deadline=60.0)

  def case_ServerInfo(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and byte-mutated ServerInfo requests."""
    if rng.random() < 0.3:
      return Case(index, 'ServerInfo', 'good', 'ServerInfo', [b''], good=True)
    kind, detail, data = byte_mutation(rng, b'')
    return Case(index, 'ServerInfo', kind, detail, [data])

  def case_InitializeConnection(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid, mutated and cancelled InitializeConnection streams."""
    table = rng.choice(TABLE_NAMES)
    pid = self.server.pid if rng.random() < 0.5 else rng.randint(1, 2**31)
    good = rs.InitializeConnectionRequest(
      pid=pid, table_name=table
    ).SerializeToString()
    r = rng.random()
    if r < 0.3:
      return Case(
        index,
        'InitializeConnection',
        'good',
        f'pid {pid}, table {table}',
        [good],
        good=True,
      )
    if r < 0.65:
      choice = rng.randrange(5)
      if choice == 0:
        name = rng.choice(['nope', '', 'w' * 5000])
        request = rs.InitializeConnectionRequest(pid=pid, table_name=name)
        return Case(
          index,
          'InitializeConnection',
          'init.unknown_table',
          f'table {name[:20]!r}',
          [request.SerializeToString()],
        )
      if choice == 1:
        odd = rng.choice([-1, 0, 2**63 - 1, -(2**63)])
        request = rs.InitializeConnectionRequest(pid=odd, table_name=table)
        return Case(
          index,
          'InitializeConnection',
          'init.odd_pid',
          f'pid {odd}',
          [request.SerializeToString()],
          good=True,
        )
      if choice == 2:
        request = rs.InitializeConnectionRequest(
          pid=pid, table_name=table, ownership_transferred=True
        )
        return Case(
          index,
          'InitializeConnection',
          'init.ownership_first',
          'ownership_transferred=true in the first message',
          [request.SerializeToString()],
        )
      if choice == 3:
        return Case(
          index,
          'InitializeConnection',
          'init.several_messages',
          'three requests on one stream',
          [good, good, good],
        )
      return Case(
        index,
        'InitializeConnection',
        'init.no_message',
        'half-closed at once',
        [],
        good=True,
      )
    if r < 0.85:
      kind, detail, data = byte_mutation(rng, good, [table])
      return Case(index, 'InitializeConnection', kind, detail, [data])
    if rng.random() < 0.5:
      return Case(
        index,
        'InitializeConnection',
        'cancel.after_first_response',
        'valid request, stream left open, cancelled after the response',
        [good],
        cancel='after_first_response',
      )
    return Case(
      index,
      'InitializeConnection',
      'cancel.idle_stream',
      'no message, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  # ---- phases

  def baseline(self, quick: bool = False) -> None:
    """Valid items into every table: hand-built (both codecs, both chunk
    layouts, strings, delta encoding) and written by tf_reverb's writers."""
    rng = random.Random(f'{self.seed}/baseline/{self.incarnation}')
    for table in TABLE_NAMES:
      for _ in range(3 if quick else 8):
        b = good_insert(rng, table)
        self.run_case(
          Case(
            -1,
            'InsertStream',
            'baseline',
            f'valid items into {table}',
            b.serialized(),
            good=True,
            chunks=b.chunks,
          )
        )
    if not quick:
      self.writer_traffic('baseline', priority=1.0)

  def writer_traffic(self, kind: str, priority: float) -> None:
    """Inserts with tf_reverb's TrajectoryWriter (zstd for every chunk) and
    Client.insert into 'heap' and, when `priority` is highest, samples them
    back with Client.sample."""
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

    client = reverb.Client(self.server.address)
    steps = [
      {'action': np.int32(t), 'obs': np.arange(3, dtype=np.float32) + t}
      for t in range(6)
    ]
    old = os.environ.get('TF_REVERB_ZSTD')
    os.environ['TF_REVERB_ZSTD'] = 'always'
    try:
      with client.trajectory_writer(num_keep_alive_refs=4) as writer:
        for step in steps:
          writer.append(step)
          if writer.episode_steps >= 3:
            writer.create_item(
              'prioritized',
              1.0,
              {
                'action': writer.history['action'][-3:],
                'obs': writer.history['obs'][-3:],
              },
            )
        writer.create_item(
          'heap', priority, {'obs': writer.history['obs'][-4:]}
        )
        writer.flush(timeout_ms=30000)
      if priority > 1e8:
        sample = next(client.sample('heap', emit_timesteps=False, timeout=30))
        want = np.stack([s['obs'] for s in steps[-4:]])
        if not np.array_equal(
          sample.data['obs']
          if isinstance(sample.data, dict)
          else sample.data[0],
          want,
        ):
          self.fail(
            AFTERWARDS,
            'OK',
            f'TrajectoryWriter item sampled back as {sample.data!r}',
            method='tf_reverb',
            kind=f'{kind}.trajectory_writer',
            reproducer='',
          )
      data = [
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.array([b'ab', b'c'], dtype=object),
      ]
      client.insert(data, {'uniform': 1.0, 'heap': priority * 2})
      if priority > 1e8:
        sample = next(client.sample('heap', emit_timesteps=False, timeout=30))
        got = sample.data
        if not (
          np.array_equal(got[0], data[0][None])
          and list(got[1][0]) == [b'ab', b'c']
        ):
          self.fail(
            AFTERWARDS,
            'OK',
            f'Client.insert item sampled back as {got!r}',
            method='tf_reverb',
            kind=f'{kind}.client_insert',
            reproducer='',
          )
    except Exception as e:  # pylint: disable=broad-except
      self.fail(
        AFTERWARDS if kind != 'baseline' else VALID_FAILED,
        type(e).__name__,
        str(e),
        method='tf_reverb',
        kind=f'{kind}.writers',
        reproducer=repr(e),
      )
    finally:
      if old is None:
        os.environ.pop('TF_REVERB_ZSTD', None)
      else:
        os.environ['TF_REVERB_ZSTD'] = old

  def table_sizes(self, client: RawClient) -> Optional[Dict[str, int]]:
    """current_size of every table, None if ServerInfo fails."""
    out = client.call('ServerInfo', [b''], 20.0)
    if out.code != grpc.StatusCode.OK:
      return None
    info = rs.ServerInfoResponse.FromString(out.responses[0])
    return {t.name: t.current_size for t in info.table_info}

  def sweep(self, client: RawClient, label: str) -> None:
    """Samples (and then deletes) every item of every table; all must decode."""
    for table in ('prioritized', 'heap'):  # every item gets a chance
      keys = list(dict.fromkeys(self.keys_by_table[table]))
      for i in range(0, len(keys), 5000):
        request = rs.MutatePrioritiesRequest(table=table)
        for key in keys[i : i + 5000]:
          request.updates.add(key=key, priority=1.0)
        out = client.call(
          'MutatePriorities', [request.SerializeToString()], 60.0
        )
        if out.code != grpc.StatusCode.OK:
          self.fail(
            SWEEP,
            out.code,
            f'{label}: resetting priorities: {out.details}',
            method='MutatePriorities',
            kind=f'sweep.{table}',
            reproducer='',
          )
    total = 0
    for table in ALL_TABLES:
      deterministic = table in ('fifo', 'heap', PROBE_TABLE)
      swept: Set[int] = set()
      for _ in range(1500):
        sizes = self.table_sizes(client)
        if sizes is None:
          self.fail(
            SWEEP,
            'ServerInfo failed',
            label,
            method='ServerInfo',
            kind=f'sweep.{table}',
            reproducer='',
          )
          return
        if sizes.get(table, 0) == 0:
          break
        n = 1 if deterministic else min(64, sizes[table])
        out = client.call(
          'SampleStream', [sample_request(table, n, 5000)], 60.0
        )
        case = Case(
          -3,
          'SampleStream',
          f'sweep.{table}',
          f'{label}: {n} samples of {table}',
          [sample_request(table, n, 5000)],
        )
        items = self.verify_samples(case, out, label=f'sweep.{table}')
        if out.code != grpc.StatusCode.OK or not items:
          left = [
            k
            for k in dict.fromkeys(self.keys_by_table[table])
            if k not in swept
          ]
          kinds = sorted(
            {
              o.kind
              for k in left
              for t, o in self.origins.get(k, [])
              if t == table
            }
          )
          self.fail(
            SWEEP,
            out.code,
            f'{label}: sampling {table} with {sizes[table]} items '
            f'left failed: {out.details!r}; the items left were inserted by '
            f'mutations {kinds[:12]}',
            case,
          )
          break
        keys = list(dict.fromkeys(i.info.item.key for i in items))
        swept.update(keys)
        total += len(keys)
        request = rs.MutatePrioritiesRequest(table=table, delete_keys=keys)
        client.call('MutatePriorities', [request.SerializeToString()], 60.0)
      else:
        self.fail(
          SWEEP,
          'OK',
          f'{label}: {table} not empty after 1500 rounds',
          method='SampleStream',
          kind=f'sweep.{table}',
          reproducer='',
        )
    self.report.notes.append(
      f'{label}: swept {total} items, all tables emptied'
    )

  def final(self) -> None:
    """Checkpoint, sweep, good traffic, and the restored checkpoint's sweep."""
    self.case = None
    out = self.client.call('Checkpoint', [b''], 120.0)
    sizes = self.table_sizes(self.client)
    checkpointed = out.code == grpc.StatusCode.OK
    if not checkpointed:
      self.fail(
        RESTORE,
        out.code,
        f'final Checkpoint: {out.details}',
        method='Checkpoint',
        kind='final.checkpoint',
        reproducer='',
      )
    self.sweep(self.client, 'fuzzed server')
    rng = random.Random(f'{self.seed}/after')
    for table in TABLE_NAMES:
      b = good_insert(rng, table, items=1)
      key = b.items()[0][1].key
      self.run_case(
        Case(
          -2,
          'InsertStream',
          'after.good_insert',
          f'a valid item into {table}',
          b.serialized(),
          good=True,
          chunks=b.chunks,
        )
      )
      case = Case(
        -2,
        'SampleStream',
        'after.good_sample',
        f'1 sample of {table}',
        [sample_request(table, 1, 5000)],
        deadline=20.0,
        good=True,
      )
      out = self.client.call(case.method, case.messages, case.deadline)
      self.check_outcome(case, out)
      items = self.verify_samples(case, out)
      if [i.info.item.key for i in items] != [key]:
        self.fail(
          AFTERWARDS,
          out.code,
          f'sampled {[i.info.item.key for i in items]} from the '
          f'emptied {table}, not the new item {key}: {out.details}',
          case,
        )
    self.writer_traffic('after', priority=1e9)
    if not checkpointed:
      return
    try:
      restored = FuzzServer(
        self.workdir, self.server.checkpoint_dir, name='restored'
      )
    except AssertionError as e:
      self.fail(
        RESTORE,
        'no start',
        str(e)[-2000:],
        method='reverb_server',
        kind='final.restore',
        reproducer='--checkpoint_dir of the fuzzed server',
      )
      return
    client = RawClient(restored.address)
    try:
      got = self.table_sizes(client)
      if got != sizes:
        self.fail(
          RESTORE,
          'OK',
          f'restored table sizes {got}, checkpointed {sizes}',
          method='reverb_server',
          kind='final.restore',
          reproducer='',
        )
      self.sweep(client, 'restored server')
    finally:
      client.close()
      restored.stop()

  def run(self) -> Report:
    """The whole fuzz: baseline, the cases, the final checks."""
    start = time.monotonic()
    self.start_server()
    try:
      self.baseline()
      for index in range(self.requests):
        self.run_case(self.make_case(index))
        if index % 250 == 249:
          self.log(
            f'grpc fuzz: {index + 1}/{self.requests} requests, '
            f'{len(self.report.failures)} failures, {time.monotonic() - start:.0f}s'
          )
      self.final()
    finally:
      self.stop_server()
      self.report.elapsed = time.monotonic() - start
    return self.report


# --------------------------------------------------------------------------
# A fake ReverbService, for checking how tf_reverb maps statuses to exceptions


class FakeReverbServer:
  """A Python ReverbService whose `failing` method ends with a chosen status.

  The other methods behave just enough for tf_reverb's clients: ServerInfo
  reports one table 'my_table' (no signature), InsertStream confirms every
  item, the unary admin calls succeed, SampleStream and InitializeConnection
  end at once (OK). Set `failing`, `code` and `message` before a call.
  """

  def __init__(self):
    """Starts the gRPC server on a free localhost port."""
    from concurrent import futures  # pylint: disable=g-import-not-at-top

    self.failing = ''
    self.code = grpc.StatusCode.OK
    self.message = ''
    self.calls: Dict[str, int] = {}
    self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handlers = {}
    for method in UNARY_METHODS:
      handlers[method] = grpc.unary_unary_rpc_method_handler(
        self._unary(method),
        request_deserializer=REQUEST_TYPES[method].FromString,
        response_serializer=lambda m: m.SerializeToString(),
      )
    for method in STREAM_METHODS:
      handlers[method] = grpc.stream_stream_rpc_method_handler(
        self._stream(method),
        request_deserializer=REQUEST_TYPES[method].FromString,
        response_serializer=lambda m: m.SerializeToString(),
      )
    self._server.add_generic_rpc_handlers(
      [
        grpc.method_handlers_generic_handler(
          'deepmind.reverb.ReverbService', handlers
        )
      ]
    )
    self.port = self._server.add_insecure_port('127.0.0.1:0')
    self._server.start()

  @property
  def address(self) -> str:
    """host:port."""
    return f'127.0.0.1:{self.port}'

  def stop(self) -> None:
    """Stops the server."""
    self._server.stop(grace=None)

  def _count(self, method: str, context: grpc.ServicerContext) -> None:
    self.calls[method] = self.calls.get(method, 0) + 1
    if method == self.failing:
      context.abort(self.code, self.message)

  def _unary(self, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
    responses = {
      'MutatePriorities': rs.MutatePrioritiesResponse,
      'Reset': rs.ResetResponse,
      'Checkpoint': lambda: rs.CheckpointResponse(checkpoint_path='/fake'),
    }

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
      del request
      self._count(method, context)
      if method == 'ServerInfo':
        response = rs.ServerInfoResponse()
        info = response.table_info.add(name='my_table', max_size=10)
        info.sampler_options.uniform = True
        info.remover_options.fifo = True
        return response
      return responses[method]()

    return handle

  def _stream(
    self, method: str
  ) -> Callable[[Iterator[Any], grpc.ServicerContext], Iterator[Any]]:
    def handle(
      requests: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
      if method == 'InsertStream':
        for request in requests:
          self._count(method, context)
          if request.items:
            yield rs.InsertStreamResponse(keys=[i.key for i in request.items])
        return
      for _ in requests:
        self._count(method, context)
        return

    return handle


def main(argv: Sequence[str]) -> int:
  """`show SEED INDEX`: what fuzz case INDEX of SEED sends; `send SEED INDEX
  HOST:PORT`: sends it to a server and prints how the call ended. (Cases
  that name existing items or the server's pid use stand-ins here.)"""
  if len(argv) < 3 or argv[0] not in ('show', 'send'):
    print(main.__doc__)
    return 2
  fuzzer = Fuzzer('/tmp', int(argv[1]), 0)

  class _StandIn:
    pid = os.getpid()

  fuzzer.server = _StandIn()  # type: ignore[assignment]
  case = fuzzer.make_case(int(argv[2]))
  print(case.describe())
  for n, m in enumerate(case.messages):
    try:
      text = (
        str(REQUEST_TYPES[case.method].FromString(m))[:3000]
        if parsable(case.method, m)
        else ''
      )
    except pb_message.DecodeError:
      text = ''
    print(
      f'--- message {n}: {len(m)} bytes{"" if text else " (unparsable)"}\n{text or m[:512].hex()}'
    )
  if argv[0] == 'send':
    client = RawClient(argv[3])
    out = client.call(
      case.method,
      case.messages,
      case.deadline,
      case.metadata,
      case.cancel,
      case.half_close,
    )
    print(
      f'=> {out.code.name} {out.details!r} after {out.elapsed:.2f}s, '
      f'{len(out.responses)} responses'
    )
    client.close()
  return 0


if __name__ == '__main__':
  import sys  # pylint: disable=g-import-not-at-top

  sys.exit(main(sys.argv[1:]))
