"""Structure-aware fuzzing of the ReverbService gRPC surface (issue #14).

The pieces, used by tests/test_grpc_fuzz.py, one module each:

* ``compression``: ``Codecs``, raw Snappy blocks and zstd frames through the
  system libsnappy/libzstd (ctypes), plus hand-built frames whose declared
  sizes lie.
* ``builders``: chunk and item builders (``ColumnData``, ``InsertBuilder``)
  producing valid InsertStream requests of both chunk layouts, Snappy and
  zstd, strings and delta encoding, which the mutators then break.
* ``oracle``: the oracle decoder of sampled items (``decode_item``), strict
  where the encoding is: exact decompressed sizes, exact string varints,
  slices inside their chunks, squeeze on one row.
* ``fuzz_server``: ``FuzzServer``, the reverb_server binary on a free port
  with a checkpoint directory, cleaned up by pid; ``RawClient``, calls to it
  over raw bytes.
* ``mutators``: the field-level InsertStream mutators (``INSERT_MUTATORS``)
  and byte-level mutations of any message (``byte_mutation``).
* ``fuzzer``: ``Fuzzer`` generates ``Case``s (field-level and byte-level
  mutations and cancellations) for every RPC from a seeded RNG, runs each
  with a deadline over raw-bytes stubs, classifies the outcome and collects
  ``Failure``s in a ``Report``, then sweeps every table (all items must
  sample and decode), checks the server still serves good traffic and that
  its checkpoint restores.
* ``fake_server``: ``FakeReverbServer``, a Python ReverbService ending a
  chosen method with a chosen status (how tf_reverb maps statuses to
  exceptions).

Everything is deterministic for a seed except timing (which response a
cancellation lands after). The package re-exports the names of its modules
(``import grpc_fuzz as fz; fz.Fuzzer(...)``) with tests/ on sys.path.
`python tests/grpc_fuzz show|send SEED INDEX [HOST:PORT]` prints or sends one
case (``fuzzer.main``).
"""

from .builders import (
  ALL_TABLES,
  COLUMN_KINDS,
  ChunkMeta,
  ColumnData,
  DELTA_UNSIGNED,
  DT_BFLOAT16,
  DT_BOOL,
  DT_COMPLEX64,
  DT_DOUBLE,
  DT_FLOAT,
  DT_HALF,
  DT_INT16,
  DT_INT32,
  DT_INT64,
  DT_INT8,
  DT_RESOURCE,
  DT_STRING,
  DT_UINT16,
  DT_UINT32,
  DT_UINT64,
  DT_UINT8,
  DT_VARIANT,
  ITEMSIZE,
  InsertBuilder,
  MIN_SIZE,
  NUMPY_DTYPE,
  PROBE_TABLE,
  SIGNATURE_COLUMNS,
  TABLE_NAMES,
  add_column,
  column_bytes,
  delta_encode,
  encode_column,
  good_insert,
  make_chunk,
  random_column,
  server_config,
  set_shape,
  string_content,
)
from .compression import (
  CODECS_METADATA,
  Codecs,
  SNAPPY,
  ZSTD,
  codecs,
  snappy_declaring,
  varint,
  zstd_frame,
)
from .fake_server import (
  FakeReverbServer,
)
from .fuzz_server import (
  CLIENT_DEADLINE_MESSAGE,
  FuzzServer,
  Outcome,
  REQUEST_TYPES,
  ROOT,
  RawClient,
  SERVER_BINARY,
  SERVICE,
  STREAM_METHODS,
  UNARY_METHODS,
)
from .fuzzer import (
  AFTERWARDS,
  BAD_STATUS,
  BREAKS_SAMPLING,
  CRASH,
  Case,
  EMPTY_MESSAGE,
  Failure,
  Fuzzer,
  HANG,
  PROTOCOL,
  RATE_LIMITER_MESSAGE,
  RESTORE,
  Report,
  SWEEP,
  UNDECODABLE,
  UNPARSABLE,
  UNRESPONSIVE,
  VALID_FAILED,
  WRONG_CONFIRMATION,
  main,
  parsable,
  sample_request,
  wire_valid,
)
from .mutators import (
  INSERT_MUTATORS,
  InsertMutator,
  _new_chunk,
  byte_mutation,
  insert_mutator,
)
from .oracle import (
  DecodeError,
  Decoded,
  MAX_DECODED_BYTES,
  MAX_RANK,
  SampledItem,
  assemble_samples,
  decode_item,
  decode_tensor,
  parse_strings,
)

__all__ = [
  'ALL_TABLES',
  'COLUMN_KINDS',
  'ChunkMeta',
  'ColumnData',
  'DELTA_UNSIGNED',
  'DT_BFLOAT16',
  'DT_BOOL',
  'DT_COMPLEX64',
  'DT_DOUBLE',
  'DT_FLOAT',
  'DT_HALF',
  'DT_INT16',
  'DT_INT32',
  'DT_INT64',
  'DT_INT8',
  'DT_RESOURCE',
  'DT_STRING',
  'DT_UINT16',
  'DT_UINT32',
  'DT_UINT64',
  'DT_UINT8',
  'DT_VARIANT',
  'ITEMSIZE',
  'InsertBuilder',
  'MIN_SIZE',
  'NUMPY_DTYPE',
  'PROBE_TABLE',
  'SIGNATURE_COLUMNS',
  'TABLE_NAMES',
  'add_column',
  'column_bytes',
  'delta_encode',
  'encode_column',
  'good_insert',
  'make_chunk',
  'random_column',
  'server_config',
  'set_shape',
  'string_content',
  'CODECS_METADATA',
  'Codecs',
  'SNAPPY',
  'ZSTD',
  'codecs',
  'snappy_declaring',
  'varint',
  'zstd_frame',
  'FakeReverbServer',
  'CLIENT_DEADLINE_MESSAGE',
  'FuzzServer',
  'Outcome',
  'REQUEST_TYPES',
  'ROOT',
  'RawClient',
  'SERVER_BINARY',
  'SERVICE',
  'STREAM_METHODS',
  'UNARY_METHODS',
  'AFTERWARDS',
  'BAD_STATUS',
  'BREAKS_SAMPLING',
  'CRASH',
  'Case',
  'EMPTY_MESSAGE',
  'Failure',
  'Fuzzer',
  'HANG',
  'PROTOCOL',
  'RATE_LIMITER_MESSAGE',
  'RESTORE',
  'Report',
  'SWEEP',
  'UNDECODABLE',
  'UNPARSABLE',
  'UNRESPONSIVE',
  'VALID_FAILED',
  'WRONG_CONFIRMATION',
  'main',
  'parsable',
  'sample_request',
  'wire_valid',
  'INSERT_MUTATORS',
  'InsertMutator',
  '_new_chunk',
  'byte_mutation',
  'insert_mutator',
  'DecodeError',
  'Decoded',
  'MAX_DECODED_BYTES',
  'MAX_RANK',
  'SampledItem',
  'assemble_samples',
  'decode_item',
  'decode_tensor',
  'parse_strings',
]
