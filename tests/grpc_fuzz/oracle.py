"""The oracle decoder of sampled items.

``decode_item`` decodes the columns of a sampled item from its chunks,
strict where the encoding is: exact decompressed sizes, exact string varints,
slices inside their chunks, squeeze on one row; anything out of spec is a
``DecodeError``. ``assemble_samples`` reassembles raw SampleStreamResponses
into ``SampledItem``s.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from google.protobuf import message as pb_message

from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc
from tf_reverb.proto import tensor_pb2 as tp

from .builders import ChunkMeta, DELTA_UNSIGNED, DT_STRING, ITEMSIZE
from .compression import SNAPPY, ZSTD, codecs

# The oracle refuses to materialize more than this per tensor.
MAX_DECODED_BYTES = 64 << 20
MAX_RANK = 254  # TensorFlow's TensorShape limit


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
