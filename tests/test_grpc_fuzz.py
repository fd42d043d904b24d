"""Structure-aware fuzz test of reverb_server's whole gRPC surface (issue #14).

``test_grpc_fuzz`` starts the server binary (five tables: uniform, fifo,
prioritized with a signature, max-heap, and a LIFO 'probe' table; MinSize and
SampleToInsertRatio limiters; a checkpoint directory), inserts valid data
(hand-built Snappy and zstd chunks of both layouts, tf_reverb's writers),
then sends TF_REVERB_FUZZ_REQUESTS (default 2000) requests over every RPC
built from seed TF_REVERB_FUZZ_SEED (default 14): field-level mutations of
valid requests, byte-level ones sent as raw bytes, and cancellations. It
fails with a table of failure classes (method, mutation kind, check, status)
and examples; TF_REVERB_FUZZ_REPORT=path also writes them as JSON. See
tests/grpc_fuzz/ (fuzzer.py) for the checks. Run alone:

  .venv/bin/python -m pytest tests/test_grpc_fuzz.py -q
  TF_REVERB_FUZZ_REQUESTS=20000 .venv/bin/python -m pytest -s \
      tests/test_grpc_fuzz.py::test_grpc_fuzz

TF_REVERB_FUZZ_SERVER=path fuzzes another reverb_server build,
TF_REVERB_FUZZ_DUMP=dir writes the messages of failing cases, and
`python tests/grpc_fuzz show|send SEED INDEX [HOST:PORT]` prints or sends
one case. 2000 requests take ~25 s on a loaded 2-core machine.

The other tests are golden cases: single requests with the outcome they
must have, named for what they check.
"""

import math
import os
import random
from typing import Iterator, List, Optional, Sequence

import grpc
import numpy as np
import pytest

import grpc_fuzz as fz
from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc

SEED = int(os.environ.get('TF_REVERB_FUZZ_SEED', '14'))
REQUESTS = int(os.environ.get('TF_REVERB_FUZZ_REQUESTS', '2000'))

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
OK = grpc.StatusCode.OK


def test_grpc_fuzz(tmp_path):
  """No crash, hang, UNKNOWN/INTERNAL or empty error message; unparsable
  requests are INVALID_ARGUMENT; every accepted item samples and decodes;
  good traffic and the checkpoint restore work afterwards."""
  report = fz.Fuzzer(str(tmp_path), SEED, REQUESTS).run()
  text = report.table()
  print(text)
  if os.environ.get('TF_REVERB_FUZZ_REPORT'):
    with open(os.environ['TF_REVERB_FUZZ_REPORT'], 'w') as f:
      f.write(report.to_json())
  assert not report.failures, '\n' + text


# --------------------------------------------------------------------------
# Golden cases


class Golden:
  """One server for the golden cases, restarted when a case killed it."""

  def __init__(self, workdir: str):
    """Starts the server under `workdir`."""
    self.workdir = workdir
    self.starts = 0
    self.server: Optional[fz.FuzzServer] = None
    self.client: Optional[fz.RawClient] = None
    self.start()

  def start(self) -> None:
    """(Re)starts the server with a fresh checkpoint directory."""
    self.close()
    self.starts += 1
    self.server = fz.FuzzServer(
      self.workdir,
      os.path.join(self.workdir, f'ckpt-{self.starts}'),
      name=f'golden-{self.starts}',
    )
    self.client = fz.RawClient(self.server.address)

  def close(self) -> None:
    """Stops the server (by pid)."""
    if self.client is not None:
      self.client.close()
    if self.server is not None:
      self.server.stop()

  def call(
    self,
    method: str,
    messages: Sequence[bytes],
    deadline: float = 20.0,
    **kwargs,
  ) -> fz.Outcome:
    """Sends one call; fails the test if the server died or did not answer."""
    if not self.server.alive():
      self.start()
    out = self.client.call(method, messages, deadline, **kwargs)
    if not self.server.alive():
      log = self.server.log(tail=10)
      self.start()
      pytest.fail(
        f'the server crashed ({out.code.name} {out.details!r}):\n{log}'
      )
    assert not out.client_deadline, f'no answer within {deadline}s'
    return out

  def insert(self, builder: fz.InsertBuilder) -> fz.Outcome:
    """Sends an InsertStream of the builder's messages."""
    return self.call('InsertStream', builder.serialized())

  def sample_newest_probe(self, zstd: bool) -> fz.Outcome:
    """One sample of the LIFO probe table (its newest item)."""
    return self.call(
      'SampleStream',
      [fz.sample_request(fz.PROBE_TABLE, 1, 5000)],
      metadata=fz.CODECS_METADATA if zstd else (),
    )


@pytest.fixture(scope='module')
def golden(tmp_path_factory) -> Iterator[Golden]:
  """The golden cases' server."""
  server = Golden(str(tmp_path_factory.mktemp('golden')))
  yield server
  server.close()


def assert_status(
  out: fz.Outcome,
  codes: Sequence[grpc.StatusCode],
  contains: Optional[str] = None,
) -> None:
  """The call ended with one of `codes` and, if an error, a message."""
  assert out.code in codes, (
    f'{out.code.name} {out.details!r}; want '
    f'{" or ".join(c.name for c in codes)}'
  )
  if out.code != OK:
    assert out.details.strip(), f'{out.code.name} with an empty message'
  if contains is not None:
    assert contains in out.details, f'{contains!r} not in {out.details!r}'


def confirmed(out: fz.Outcome) -> List[int]:
  """Keys an InsertStream confirmed."""
  return [
    k
    for raw in out.responses
    for k in rs.InsertStreamResponse.FromString(raw).keys
  ]


def simple_insert(
  table: str = fz.PROBE_TABLE,
  compression: int = fz.SNAPPY,
  rows: int = 4,
  seed: int = 0,
) -> fz.InsertBuilder:
  """One float32 [rows, 3] chunk and one item of its rows [0, 2) in `table`."""
  rng = random.Random(seed)
  b = fz.InsertBuilder()
  key = rng.getrandbits(64)
  column = fz.random_column(rng, fz.DT_FLOAT, (3,), rows)
  item = sc.PrioritizedItem(key=rng.getrandbits(64), table=table, priority=1.0)
  fz.add_column(item, [(key, 0, 2, 0)])
  b.messages.append(
    rs.InsertStreamRequest(
      chunks=[fz.make_chunk(key, [column], compression)], items=[item]
    )
  )
  b.chunks[key] = fz.ChunkMeta(key, [column], compression, False)
  return b


def tensor_of(b: fz.InsertBuilder) -> sc.ChunkData:
  """The chunk of a simple_insert."""
  return b.messages[0].chunks[0]


def assert_rejected(
  golden: Golden,
  b: fz.InsertBuilder,
  codes: Sequence[grpc.StatusCode] = (INVALID_ARGUMENT,),
  contains: Optional[str] = None,
) -> None:
  """The insert fails with `codes` and confirms nothing; if the server
  accepted the item anyway, says whether it can be sampled."""
  out = golden.insert(b)
  if out.code == OK:
    sample = golden.sample_newest_probe(zstd=False)
    items, _ = fz.assemble_samples(sample.responses)
    try:
      for item in items:
        fz.decode_item(item.info.item, item.chunks)
      outcome = 'it decodes' if items else 'no sample came back'
    except fz.DecodeError as e:
      outcome = f'it does not decode: {e}'
    golden.call(
      'MutatePriorities',
      [
        rs.MutatePrioritiesRequest(
          table=fz.PROBE_TABLE, delete_keys=confirmed(out)
        ).SerializeToString()
      ],
    )
    pytest.fail(
      f'accepted (keys {confirmed(out)}); sampled back: {sample.code.name} '
      f'{sample.details!r}, {outcome}'
    )
  assert_status(out, codes, contains)
  assert not confirmed(out)


# ---- unparsable messages


@pytest.mark.parametrize(
  'method', ['InsertStream', 'SampleStream', 'InitializeConnection']
)
def test_unparsable_stream_message_ends_the_stream_with_invalid_argument(
  golden, method
):
  out = golden.call(method, [b'\x0a\xff\xff\xff\x0f'])
  assert_status(out, [INVALID_ARGUMENT])


@pytest.mark.parametrize(
  'method', ['MutatePriorities', 'Reset', 'Checkpoint', 'ServerInfo']
)
def test_unparsable_unary_request_is_invalid_argument_with_a_message(
  golden, method
):
  out = golden.call(method, [b'\x0a\xff\xff\xff\x0f'])
  assert_status(out, [INVALID_ARGUMENT])


def test_unparsable_message_after_a_valid_one_still_confirms_the_first(golden):
  good = simple_insert(seed=1)
  out = golden.call('InsertStream', good.serialized() + [b'\x12\x05ab'])
  assert_status(out, [INVALID_ARGUMENT])
  assert confirmed(out) == [good.messages[0].items[0].key]


def test_invalid_utf8_table_name_is_invalid_argument(golden):
  data = (
    rs.ResetRequest(table='fifo')
    .SerializeToString()
    .replace(b'fifo', b'fif\xff')
  )
  assert_status(golden.call('Reset', [data]), [INVALID_ARGUMENT])


# ---- InsertStream: requests and items


def test_request_without_chunks_and_items_is_invalid_argument(golden):
  out = golden.call('InsertStream', [b''])
  assert_status(out, [INVALID_ARGUMENT], 'Request lacks both chunks and item')


def test_item_naming_a_chunk_never_sent_is_rejected_not_internal(golden):
  b = simple_insert(seed=2)
  b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices[
    0
  ].chunk_key = 12345
  assert_rejected(golden, b, [INVALID_ARGUMENT, FAILED_PRECONDITION], '12345')


def test_item_using_a_chunk_released_by_an_earlier_message_is_rejected_not_internal(
  golden,
):
  b = simple_insert(seed=3)
  again = sc.PrioritizedItem()
  again.CopyFrom(b.messages[0].items[0])
  again.key += 1
  b.messages.append(rs.InsertStreamRequest(items=[again]))
  out = golden.insert(b)
  assert_status(out, [INVALID_ARGUMENT, FAILED_PRECONDITION])
  assert confirmed(out) == [b.messages[0].items[0].key]


def test_keep_chunk_keys_naming_an_unknown_chunk_is_failed_precondition(golden):
  b = simple_insert(seed=4)
  b.messages[0].keep_chunk_keys.append(999)
  out = golden.insert(b)
  assert_status(out, [FAILED_PRECONDITION])


@pytest.mark.parametrize(
  'method, request_bytes',
  [
    ('SampleStream', fz.sample_request('nope', 1, 100)),
    (
      'MutatePriorities',
      rs.MutatePrioritiesRequest(table='nope').SerializeToString(),
    ),
    ('Reset', rs.ResetRequest(table='nope').SerializeToString()),
    (
      'InitializeConnection',
      rs.InitializeConnectionRequest(
        pid=1, table_name='nope'
      ).SerializeToString(),
    ),
  ],
)
def test_unknown_table_is_not_found(golden, method, request_bytes):
  assert_status(golden.call(method, [request_bytes]), [NOT_FOUND], 'nope')


def test_item_into_unknown_table_is_not_found(golden):
  b = simple_insert(seed=5)
  b.messages[0].items[0].table = 'nope'
  assert_rejected(golden, b, [NOT_FOUND], 'nope')


def test_nan_priority_into_prioritized_table_is_invalid_argument(golden):
  b = fz.good_insert(random.Random(6), 'prioritized', items=1)
  b.messages[-1].items[0].priority = math.nan
  assert_rejected(golden, b)


@pytest.mark.parametrize('priority', [math.nan, -1.0, math.inf])
def test_odd_priority_update_leaves_the_server_serving(golden, priority):
  request = rs.MutatePrioritiesRequest(table='prioritized')
  request.updates.add(key=1, priority=priority)
  out = golden.call('MutatePriorities', [request.SerializeToString()])
  assert_status(out, [OK, INVALID_ARGUMENT])
  assert_status(golden.call('ServerInfo', [b'']), [OK])


# ---- chunk contents


@pytest.mark.parametrize('codec', [fz.SNAPPY, fz.ZSTD], ids=['snappy', 'zstd'])
@pytest.mark.parametrize(
  'zstd_client', [False, True], ids=['plain_client', 'zstd_client']
)
def test_valid_chunk_samples_back_equal(golden, codec, zstd_client):
  b = simple_insert(compression=codec, seed=7)
  assert_status(golden.insert(b), [OK])
  out = golden.sample_newest_probe(zstd=zstd_client)
  assert_status(out, [OK])
  (item,), error = fz.assemble_samples(out.responses)
  assert error is None
  (column,) = fz.decode_item(item.info.item, item.chunks, b.chunks)
  sent = b.chunks[tensor_of(b).chunk_key].columns[0]
  assert column.shape == (2, 3) and column.raw == sent.raw[: 2 * 12]
  golden.call(
    'MutatePriorities',
    [
      rs.MutatePrioritiesRequest(
        table=fz.PROBE_TABLE, delete_keys=[item.info.item.key]
      ).SerializeToString()
    ],
  )


def _declaring(codec: int, declared: int) -> fz.InsertBuilder:
  b = simple_insert(compression=codec, seed=8)
  chunk = tensor_of(b)
  tensor = chunk.data.tensors[0]
  fz.set_shape(tensor, [declared // 12, 3])
  payload = bytes(range(48))
  if codec == fz.ZSTD:
    tensor.tensor_content = fz.zstd_frame(payload, declared // 12 * 12)
  else:
    tensor.tensor_content = fz.snappy_declaring(
      fz.codecs().snappy_compress(payload), declared // 12 * 12
    )
  chunk.data_uncompressed_size = declared // 12 * 12
  return b


def test_zstd_frame_declaring_2_pow_40_bytes_is_rejected_invalid_argument(
  golden,
):
  assert_rejected(golden, _declaring(fz.ZSTD, 2**40))


def test_zstd_frame_declaring_2_pow_62_bytes_is_rejected_invalid_argument(
  golden,
):
  assert_rejected(golden, _declaring(fz.ZSTD, 2**62))


def test_snappy_block_declaring_2_pow_40_bytes_is_rejected_invalid_argument(
  golden,
):
  assert_rejected(golden, _declaring(fz.SNAPPY, 2**40))


def test_snappy_block_declaring_2_pow_62_bytes_is_rejected_invalid_argument(
  golden,
):
  assert_rejected(golden, _declaring(fz.SNAPPY, 2**62))


def test_zstd_frame_holding_fewer_bytes_than_it_declares_is_rejected(golden):
  b = simple_insert(compression=fz.ZSTD, seed=9)
  tensor_of(b).data.tensors[0].tensor_content = fz.zstd_frame(bytes(40), 48)
  assert_rejected(golden, b)


@pytest.mark.parametrize('codec', [fz.SNAPPY, fz.ZSTD], ids=['snappy', 'zstd'])
@pytest.mark.parametrize(
  'damage', ['truncated', 'garbage', 'trailing_garbage', 'empty']
)
def test_corrupt_compressed_content_is_rejected_invalid_argument(
  golden, codec, damage
):
  b = simple_insert(compression=codec, seed=10)
  tensor = tensor_of(b).data.tensors[0]
  content = tensor.tensor_content
  tensor.tensor_content = {
    'truncated': content[: len(content) // 2],
    'garbage': bytes(range(200, 255)) * 2,
    'trailing_garbage': content + b'\x01\x02\x03',
    'empty': b'',
  }[damage]
  assert_rejected(golden, b)


@pytest.mark.parametrize(
  'content',
  [
    b'\xff\xff\xff',
    b'\xff' * 10 + b'\x01ab',
    fz.varint(2**62) + b'\x01abc',
    b'\x01',
  ],
  ids=[
    'unterminated_varint',
    'varint_of_11_bytes',
    'length_past_end',
    'fewer_lengths_than_strings',
  ],
)
def test_string_tensor_with_bad_varints_is_rejected_invalid_argument(
  golden, content
):
  b = simple_insert(seed=11)
  tensor = tensor_of(b).data.tensors[0]
  tensor.dtype = fz.DT_STRING
  fz.set_shape(tensor, [2])
  tensor.tensor_content = content
  b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices[0].length = 1
  assert_rejected(golden, b)


@pytest.mark.parametrize('dtype', [0, fz.DT_RESOURCE, fz.DT_VARIANT, 100, -1])
def test_dtype_out_of_range_is_rejected_invalid_argument(golden, dtype):
  b = simple_insert(seed=12)
  tensor_of(b).data.tensors[0].dtype = dtype
  assert_rejected(golden, b)


@pytest.mark.parametrize('compression', [2, 1000, -1])
def test_compression_out_of_range_is_invalid_argument(golden, compression):
  b = simple_insert(seed=13)
  tensor_of(b).compression = compression
  assert_rejected(golden, b)


@pytest.mark.parametrize(
  'dims',
  [[-1, 3], [4, -3], [2**40, 3], [2**31, 2**31, 2**31], [3, 2**62]],
  ids=[
    'negative_rows',
    'negative_dim',
    'rows_past_the_content',
    'element_count_overflows',
    'bytes_overflow',
  ],
)
def test_shape_not_matching_the_content_is_rejected_invalid_argument(
  golden, dims
):
  b = simple_insert(seed=14)
  fz.set_shape(tensor_of(b).data.tensors[0], dims)
  assert_rejected(golden, b)


def test_unknown_rank_chunk_tensor_is_rejected_invalid_argument(golden):
  b = simple_insert(seed=15)
  tensor_of(b).data.tensors[0].tensor_shape.unknown_rank = True
  assert_rejected(golden, b)


# ---- slices and columns


@pytest.mark.parametrize(
  'offset, length, index',
  [
    (3, 2, 0),
    (4, 1, 0),
    (-1, 1, 0),
    (0, 0, 0),
    (0, -1, 0),
    (2**31 - 1, 2**31 - 1, 0),
    (0, 1, 1),
    (0, 1, -1),
  ],
  ids=[
    'past_rows',
    'at_end',
    'negative_offset',
    'zero_length',
    'negative_length',
    'int32_overflow',
    'missing_tensor',
    'negative_index',
  ],
)
def test_slice_outside_its_chunk_is_rejected_invalid_argument(
  golden, offset, length, index
):
  b = simple_insert(seed=16)
  s = b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices[0]
  s.offset, s.length, s.index = offset, length, index
  assert_rejected(golden, b)


def test_squeeze_on_a_multi_row_column_is_rejected_invalid_argument(golden):
  b = simple_insert(seed=17)
  b.messages[0].items[0].flat_trajectory.columns[0].squeeze = True
  assert_rejected(golden, b)


def test_column_joining_two_dtypes_is_rejected_invalid_argument(golden):
  b = simple_insert(seed=18)
  key = fz._new_chunk(b, random.Random(1018), fz.DT_DOUBLE, (3,), 2)  # pylint: disable=protected-access
  b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices.add(
    chunk_key=key, offset=0, length=1, index=0
  )
  assert_rejected(golden, b)


def test_column_joining_two_row_shapes_is_rejected_invalid_argument(golden):
  b = simple_insert(seed=19)
  key = fz._new_chunk(b, random.Random(1019), fz.DT_FLOAT, (4,), 2)  # pylint: disable=protected-access
  b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices.add(
    chunk_key=key, offset=0, length=1, index=0
  )
  assert_rejected(golden, b)


def test_column_without_slices_is_rejected_invalid_argument(golden):
  b = simple_insert(seed=20)
  b.messages[0].items[0].flat_trajectory.columns.add()
  assert_rejected(golden, b)


def test_item_breaking_the_table_signature_is_rejected_invalid_argument(golden):
  b = simple_insert(table='prioritized', seed=21)
  assert_rejected(golden, b)


# ---- SampleStream, cancellation, checkpoints


@pytest.mark.parametrize('num_samples', [0, -1, -(2**63)])
def test_num_samples_not_positive_is_invalid_argument(golden, num_samples):
  out = golden.call(
    'SampleStream', [fz.sample_request('uniform', num_samples, 100)]
  )
  assert_status(out, [INVALID_ARGUMENT])


def test_cancelled_blocked_sample_leaves_the_server_serving(golden):
  out = golden.call(
    'SampleStream', [fz.sample_request('heap', 1, None)], cancel='after_delay'
  )
  assert out.code in (grpc.StatusCode.CANCELLED, OK), out
  assert_status(golden.call('ServerInfo', [b'']), [OK])


def test_chunks_of_equal_keys_from_two_streams_survive_a_checkpoint_restore(
  tmp_path,
):
  # Chunk keys are the client's; two streams may use the same one for
  # different data (each stream has its own chunks), and a checkpoint must
  # still restore.
  server = Golden(str(tmp_path))
  try:
    for rows, seed in ((1, 22), (4, 23)):
      b = simple_insert(table='uniform', rows=rows, seed=seed)
      tensor_of(b).chunk_key = 7
      s = b.messages[0].items[0].flat_trajectory.columns[0].chunk_slices[0]
      s.chunk_key, s.offset, s.length = 7, rows - 1, 1
      assert_status(server.insert(b), [OK])
    assert_status(server.call('Checkpoint', [b''], deadline=60.0), [OK])
    try:
      restored = fz.FuzzServer(
        str(tmp_path), server.server.checkpoint_dir, name='restored'
      )
    except AssertionError as e:
      pytest.fail(f'the checkpoint does not restore: {str(e)[-600:]}')
    restored.stop()
  finally:
    server.close()


# --------------------------------------------------------------------------
# Python side: server statuses -> tf_reverb exceptions (the
# mapping of docs/reference/errors.md). A fake ReverbService ends one method
# with a chosen status; tf_reverb's Client and writers must raise the
# spec's exception with the server's message.

SPEC_EXCEPTION = {
  grpc.StatusCode.INVALID_ARGUMENT: ValueError,
  grpc.StatusCode.RESOURCE_EXHAUSTED: IndexError,
  grpc.StatusCode.UNIMPLEMENTED: NotImplementedError,
  grpc.StatusCode.NOT_FOUND: RuntimeError,
  grpc.StatusCode.FAILED_PRECONDITION: RuntimeError,
  grpc.StatusCode.OUT_OF_RANGE: RuntimeError,
  grpc.StatusCode.DEADLINE_EXCEEDED: RuntimeError,
  grpc.StatusCode.INTERNAL: RuntimeError,
  grpc.StatusCode.DATA_LOSS: RuntimeError,
  grpc.StatusCode.CANCELLED: RuntimeError,
  grpc.StatusCode.UNAVAILABLE: RuntimeError,
}
FAKE_MESSAGE = 'the fake server refuses: reason 42'


def _trajectory_writer_flush(client) -> None:
  with client.trajectory_writer(
    num_keep_alive_refs=2, validate_items=False
  ) as writer:
    writer.append({'x': np.float32(1)})
    writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
    writer.flush(timeout_ms=10000)


def _legacy_writer_close(client) -> None:
  with client.writer(max_sequence_length=1) as writer:
    writer.append(np.float32(1))
    writer.create_item('my_table', 1, 1.0)


# call name -> (the RPC it makes, the call)
CLIENT_CALLS = {
  'server_info': ('ServerInfo', lambda c: c.server_info()),
  'mutate_priorities': (
    'MutatePriorities',
    lambda c: c.mutate_priorities('my_table', {1: 1.0}),
  ),
  'reset': ('Reset', lambda c: c.reset('my_table')),
  'checkpoint': ('Checkpoint', lambda c: c.checkpoint()),
  'insert': (
    'InsertStream',
    lambda c: c.insert(np.float32(1), {'my_table': 1.0}),
  ),
  'sample': ('SampleStream', lambda c: next(c.sample('my_table', timeout=10))),
  'trajectory_writer_flush': ('InsertStream', _trajectory_writer_flush),
  'legacy_writer_close': ('InsertStream', _legacy_writer_close),
}
# Statuses the clients retry (docs/concepts/writers-and-patterns.md, docs/architecture/wire-protocol.md); see below.
RETRIED = (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
RETRYING_CALLS = ('sample', 'trajectory_writer_flush', 'legacy_writer_close')


@pytest.fixture(scope='module')
def fake_server() -> Iterator[fz.FakeReverbServer]:
  """A fake ReverbService."""
  server = fz.FakeReverbServer()
  yield server
  server.stop()


def _raised(
  fake: fz.FakeReverbServer, method: str, code: grpc.StatusCode, call
) -> Exception:
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

  fake.failing, fake.code, fake.message = method, code, FAKE_MESSAGE
  try:
    with pytest.raises(Exception) as info:
      call(reverb.Client(fake.address))
  finally:
    fake.failing = ''
  return info.value


# Statuses a call retries on are covered by
# test_retried_statuses_end_at_the_callers_timeout instead.
@pytest.mark.parametrize(
  'code,call',
  [
    pytest.param(code, call, id=f'{code.name}-{call}')
    for call in CLIENT_CALLS
    for code in SPEC_EXCEPTION
    if not (code in RETRIED and call in RETRYING_CALLS)
  ],
)
def test_server_status_raises_the_spec_exception_with_the_server_message(
  fake_server, code, call
):
  from tf_reverb import errors  # pylint: disable=g-import-not-at-top

  method, function = CLIENT_CALLS[call]
  error = _raised(fake_server, method, code, function)
  text = f'{error}\n{error.__cause__}'
  if code == grpc.StatusCode.DEADLINE_EXCEEDED:
    # By code, whatever the message says: Client.sample(timeout=...) reports
    # it as DeadlineExceededError (reverb#18), keeping the server's message;
    # every other call raises the RuntimeError subclass.
    expected = (
      errors.DeadlineExceededError
      if call == 'sample'
      else errors.DeadlineExceededRuntimeError
    )
    assert type(error) is expected, repr(error)  # pylint: disable=unidiomatic-typecheck
    assert isinstance(error, SPEC_EXCEPTION[code]) or call == 'sample'
  else:
    assert type(error) is SPEC_EXCEPTION[code], repr(error)  # pylint: disable=unidiomatic-typecheck
  assert FAKE_MESSAGE in text, repr(error)


@pytest.mark.parametrize('call', ['sample', 'server_info'])
def test_a_message_naming_a_deadline_is_no_deadline_without_its_code(
  fake_server, call
):
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  from tf_reverb import errors  # pylint: disable=g-import-not-at-top

  method = 'SampleStream' if call == 'sample' else 'ServerInfo'
  fake_server.failing, fake_server.code = method, grpc.StatusCode.INTERNAL
  fake_server.message = 'Deadline Exceeded (DEADLINE_EXCEEDED) in the backend'
  client = reverb.Client(fake_server.address)
  try:
    with pytest.raises(RuntimeError, match='in the backend') as info:
      if call == 'sample':
        next(client.sample('my_table', timeout=10))
      else:
        client.server_info(timeout=10)
  finally:
    fake_server.failing = ''
  assert type(info.value) is RuntimeError, repr(info.value)  # pylint: disable=unidiomatic-typecheck
  assert not isinstance(info.value, errors.ReverbError)


@pytest.mark.parametrize('call', ['sample', 'trajectory_writer_flush'])
@pytest.mark.parametrize('code', RETRIED, ids=lambda c: c.name)
def test_retried_statuses_end_at_the_callers_timeout(fake_server, code, call):
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  from tf_reverb import errors  # pylint: disable=g-import-not-at-top

  fake_server.failing, fake_server.code, fake_server.message = (
    'SampleStream' if (call == 'sample') else 'InsertStream',
    code,
    FAKE_MESSAGE,
  )
  client = reverb.Client(fake_server.address)
  try:
    with pytest.raises(errors.DeadlineExceededError):
      if call == 'sample':
        next(client.sample('my_table', timeout=1))
      else:
        with client.trajectory_writer(
          num_keep_alive_refs=2, validate_items=False
        ) as writer:
          writer.append({'x': np.float32(1)})
          writer.create_item('my_table', 1.0, {'x': writer.history['x'][-1:]})
          writer.flush(timeout_ms=1000)
  finally:
    fake_server.failing = ''


def test_writer_flush_timeout_is_deadline_exceeded_error(tmp_path):
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  from tf_reverb import errors  # pylint: disable=g-import-not-at-top

  with reverb.Server([reverb.Table.queue('q', 1)], port=None) as server:
    client = reverb.Client(f'localhost:{server.port}')
    client.insert(np.float32(1), {'q': 1.0})  # the queue is full now
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    writer.append({'x': np.float32(2)})
    writer.create_item('q', 1.0, {'x': writer.history['x'][-1:]})
    with pytest.raises(
      errors.DeadlineExceededError, match='Flush call did not complete'
    ):
      writer.flush(timeout_ms=300)
    with pytest.raises(
      errors.DeadlineExceededError, match='End episode call did not complete'
    ):
      writer.end_episode(timeout_ms=300)
    writer.close()


def test_server_info_timeout_against_a_silent_server_is_deadline_exceeded_error():
  import socket  # pylint: disable=g-import-not-at-top
  import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
  from tf_reverb import errors  # pylint: disable=g-import-not-at-top

  with socket.socket() as listener:  # accepts connections, never answers
    listener.bind(('127.0.0.1', 0))
    listener.listen()
    client = reverb.Client(f'127.0.0.1:{listener.getsockname()[1]}')
    with pytest.raises(
      errors.DeadlineExceededError, match='ServerInfo call did not complete'
    ):
      client.server_info(timeout=1)
