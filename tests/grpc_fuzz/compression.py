"""Codecs of the gRPC fuzz: Snappy and zstd as chunks carry them.

``Codecs`` makes and decodes raw Snappy blocks and zstd frames through the
system libsnappy/libzstd (ctypes; the server links the same libraries), and
``codecs()`` is the process's instance. ``varint``, ``snappy_declaring`` and
``zstd_frame`` hand-build blocks and frames, also ones whose declared sizes
lie. ``SNAPPY`` and ``ZSTD`` are ChunkData's compression values,
``CODECS_METADATA`` the call metadata that announces zstd.
"""

import ctypes
import ctypes.util
import struct
from typing import Optional

from tf_reverb.proto import schema_pb2 as sc

SNAPPY = sc.ChunkData.COMPRESSION_SNAPPY
ZSTD = sc.ChunkData.COMPRESSION_ZSTD
CODECS_METADATA = (('x-tf-reverb-codecs', 'zstd'),)


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
