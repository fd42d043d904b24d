"""Test helper: inserts multi-step items over raw gRPC (InsertStream).

Independent of the writers: each column is its own chunk, encoded as spec
§1.3 says (TensorProto whose tensor_content is a raw Snappy block; this
encoder emits literal-only blocks, which every Snappy decoder accepts).
"""

import random
from typing import Dict, Sequence

import grpc
import numpy as np

from tf_reverb import _dtypes
from tf_reverb.proto import reverb_service_pb2
from tf_reverb.proto import reverb_service_pb2_grpc
from tf_reverb.proto import schema_pb2


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    byte = n & 0x7F
    n >>= 7
    out.append(byte | (0x80 if n else 0))
    if not n:
      return bytes(out)


def snappy_literal_block(data: bytes) -> bytes:
  """A valid raw Snappy block holding `data` as literals."""
  out = bytearray(_varint(len(data)))
  for start in range(0, len(data), 65536):
    piece = data[start : start + 65536]
    out.append(61 << 2)  # literal, 2-byte length follows
    out += (len(piece) - 1).to_bytes(2, 'little')
    out += piece
  return bytes(out)


def _chunk(key: int, column: np.ndarray) -> schema_pb2.ChunkData:
  column = np.ascontiguousarray(column)
  chunk = schema_pb2.ChunkData(
    chunk_key=key, data_tensors_len=1, data_uncompressed_size=column.nbytes
  )
  chunk.sequence_range.episode_id = key
  chunk.sequence_range.start = 0
  chunk.sequence_range.end = len(column) - 1
  tensor = chunk.data.tensors.add()
  tensor.dtype = _dtypes._NUMPY_TO_TF[column.dtype]  # pylint: disable=protected-access
  for dim in column.shape:
    tensor.tensor_shape.dim.add(size=dim)
  tensor.tensor_content = snappy_literal_block(column.tobytes())
  return chunk


def insert_trajectory(
  address: str,
  table: str,
  columns: Sequence[np.ndarray],
  priority: float = 1.0,
  squeeze: Sequence[bool] = (),
) -> int:
  """Inserts one item whose column i is all rows of `columns[i]`.

  Args:
    address: "host:port" of the server.
    table: target table.
    columns: one array per column, leading dim = rows (may differ).
    priority: the item's priority.
    squeeze: per column, whether the item squeezes it (needs one row).

  Returns:
    The item's key.
  """
  request = reverb_service_pb2.InsertStreamRequest()
  item = request.items.add(
    key=random.getrandbits(63), table=table, priority=priority
  )
  for i, column in enumerate(columns):
    key = random.getrandbits(63)
    request.chunks.append(_chunk(key, column))
    out = item.flat_trajectory.columns.add(
      squeeze=bool(squeeze[i]) if i < len(squeeze) else False
    )
    out.chunk_slices.add(chunk_key=key, offset=0, length=len(column), index=0)
  with grpc.insecure_channel(address) as channel:
    stub = reverb_service_pb2_grpc.ReverbServiceStub(channel)
    responses = stub.InsertStream(
      iter([request]), wait_for_ready=True, timeout=60
    )
    for response in responses:
      if item.key in response.keys:
        break
  return item.key


def columns_of(step_values: Dict[str, np.ndarray]) -> list:
  """The values of `step_values` in dm-tree (sorted key) order."""
  return [step_values[k] for k in sorted(step_values)]


# Rows per item written by fill().
T = 3


def fill(address: str, n: int = 4) -> None:
  """n items of T rows into 'my_table': obs [T, 2] float32 = i, step [T]
  int64 = 0..T-1, priority i + 1."""
  for i in range(n):
    insert_trajectory(
      address,
      'my_table',
      [
        np.full([T, 2], i, np.float32),
        np.arange(T, dtype=np.int64),
      ],
      priority=float(i + 1),
    )
