"""Hundreds of concurrent streams on one reverb_server binary (issue 15).

Raw InsertStreams and SampleStreams (grpc.aio, the wire protocol of
docs/architecture/wire-protocol.md) from one asyncio loop, over several TCP
connections. Bounded by items and streams, not by time: every stream inserts
a fixed number of items, each sampler takes a fixed number of samples, and
the checks run at points the streams reach (every stream open with a request
in the server, every item confirmed), never after a pause. The one timeout
(HANG_GUARD_S) only turns a hang into a failure.

Checked: every item is confirmed on its own stream and every stream ends OK;
the table's counters (server_info) equal the confirmations and the samples
received; the server's threads (/proc/<pid>/task, polled throughout) stay
<= MAX_SERVER_THREADS; and insert calls blocked by the rate limiter (a full
Queue table) hold no thread: with STREAMS of them blocked at once the thread
count is still bounded, and all of them complete once samplers drain the
queue; and SIGTERM with hundreds of blocked streams stops the server
cleanly, ending every stream.
"""

import asyncio
import json
import os
import random
import struct
import threading

import grpc

import tf_reverb as reverb
from tf_reverb.proto import reverb_service_pb2
from tf_reverb.proto import reverb_service_pb2_grpc
from tf_reverb.proto import schema_pb2

STREAMS = 300
ITEMS_PER_STREAM = 4
CONNECTIONS = 10
SAMPLERS = 4
SAMPLE_BATCH = 25
QUEUE_SIZE = 10
MAX_SERVER_THREADS = 64
HANG_GUARD_S = 600  # a hang fails instead of blocking the suite forever
DT_FLOAT = 1


def _config(queue: bool) -> str:
  big = 1.7976931348623157e308
  if queue:  # reverb.rate_limiters.Queue(QUEUE_SIZE) with a FIFO queue table
    table = {
      'table_name': 'q',
      'sampler': {'fifo': True},
      'remover': {'fifo': True},
      'max_size': QUEUE_SIZE,
      'max_times_sampled': 1,
      'rate_limiter': {
        'samples_per_insert': 1,
        'min_size_to_sample': 1,
        'min_diff': 0,
        'max_diff': QUEUE_SIZE,
      },
    }
  else:  # uniform, FIFO remover, MinSize(1)
    table = {
      'table_name': 'q',
      'sampler': {'uniform': True},
      'remover': {'fifo': True},
      'max_size': 100_000,
      'rate_limiter': {
        'samples_per_insert': 1,
        'min_size_to_sample': 1,
        'min_diff': -big,
        'max_diff': big,
      },
    }
  # Nobody inserts into 'idle': its samplers wait.
  idle = {
    'table_name': 'idle',
    'sampler': {'uniform': True},
    'remover': {'fifo': True},
    'max_size': 10,
    'rate_limiter': {
      'samples_per_insert': 1,
      'min_size_to_sample': 1,
      'min_diff': -big,
      'max_diff': big,
    },
  }
  return json.dumps({'port': 0, 'tables': [table, idle]})


def _snappy_literal(data: bytes) -> bytes:
  """A raw Snappy block holding `data` as one literal (len(data) <= 60)."""
  assert 0 < len(data) <= 60
  return bytes([len(data)]) + bytes([(len(data) - 1) << 2]) + data


def _request(rng: random.Random, episode: int, step: int):
  """One chunk of one [1, 4] float32 step and a squeezed item over it."""
  chunk_key, item_key = rng.getrandbits(64), rng.getrandbits(64)
  values = struct.pack('<4f', step, step + 0.25, step + 0.5, step + 0.75)
  chunk = schema_pb2.ChunkData(
    chunk_key=chunk_key, data_tensors_len=1, data_uncompressed_size=len(values)
  )
  chunk.sequence_range.episode_id = episode
  chunk.sequence_range.start = chunk.sequence_range.end = step
  tensor = chunk.data.tensors.add(
    dtype=DT_FLOAT, tensor_content=_snappy_literal(values)
  )
  tensor.tensor_shape.dim.add(size=1)
  tensor.tensor_shape.dim.add(size=4)
  item = schema_pb2.PrioritizedItem(key=item_key, table='q', priority=1.0)
  column = item.flat_trajectory.columns.add(squeeze=True)
  column.chunk_slices.add(chunk_key=chunk_key, offset=0, length=1, index=0)
  return reverb_service_pb2.InsertStreamRequest(
    chunks=[chunk], items=[item]
  ), item_key


class ThreadMonitor:
  """Polls the server's thread count; keeps the highest seen."""

  def __init__(self, pid: int):
    self.pid = pid
    self.highest = 0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def now(self) -> int:
    count = len(os.listdir(f'/proc/{self.pid}/task'))
    self.highest = max(self.highest, count)
    return count

  def _run(self):
    while not self._stop.is_set():
      try:
        self.now()
      except OSError:
        return
      self._stop.wait(0.005)

  def stop(self):
    self._stop.set()
    self._thread.join()


def _channels(address: str):
  # Each its own subchannel pool: its own TCP connection.
  return [
    grpc.aio.insecure_channel(
      address, options=[('grpc.use_local_subchannel_pool', 1)]
    )
    for _ in range(CONNECTIONS)
  ]


async def _writer(
  stub, index: int, first_sent: asyncio.Event, counters: dict, go: asyncio.Event
):
  """Inserts ITEMS_PER_STREAM items, each confirmed before the next (as an
  actor's create_item + flush); returns (sent keys, confirmed keys, code)."""
  rng = random.Random(index)
  call = stub.InsertStream()
  sent, confirmed = [], []
  for step in range(ITEMS_PER_STREAM):
    request, key = _request(rng, index, step)
    await call.write(request)
    sent.append(key)
    if step == 0:
      counters['first_sent'] += 1
      if counters['first_sent'] == STREAMS:
        first_sent.set()
      await go.wait()  # every stream open with a request in flight first
    while key not in confirmed:
      response = await call.read()
      assert response is not grpc.aio.EOF, f'stream {index} ended early'
      confirmed.extend(response.keys)
  await call.done_writing()
  assert await call.read() is grpc.aio.EOF
  return sent, confirmed, await call.code()


async def _sampler(stub, total: int):
  """Takes exactly `total` samples in requests of SAMPLE_BATCH; returns the
  sampled keys and the call's code."""
  call = stub.SampleStream()
  keys = []
  while len(keys) < total:
    n = min(SAMPLE_BATCH, total - len(keys))
    await call.write(
      reverb_service_pb2.SampleStreamRequest(table='q', num_samples=n)
    )
    got = 0
    while got < n:
      response = await call.read()
      assert response is not grpc.aio.EOF, 'sample stream ended early'
      for entry in response.entries:
        if entry.HasField('info'):
          keys.append(entry.info.item.key)
        got += entry.end_of_sequence
  await call.done_writing()
  assert await call.read() is grpc.aio.EOF
  return keys, await call.code()


async def _run(address: str, monitor: ThreadMonitor, queue: bool):
  channels = _channels(address)
  stubs = [reverb_service_pb2_grpc.ReverbServiceStub(c) for c in channels]
  first_sent, go = asyncio.Event(), asyncio.Event()
  counters = {'first_sent': 0}
  total = STREAMS * ITEMS_PER_STREAM
  writers = [
    asyncio.ensure_future(
      _writer(stubs[i % CONNECTIONS], i, first_sent, counters, go)
    )
    for i in range(STREAMS)
  ]
  samplers = []
  if not queue:  # samplers run alongside (never blocked: MinSize(1))
    samplers = [
      asyncio.ensure_future(_sampler(stubs[i % CONNECTIONS], total // SAMPLERS))
      for i in range(SAMPLERS)
    ]
  await first_sent.wait()
  # Every connection answers a unary call sent after its streams' first
  # requests: the server has read those requests (HTTP/2 keeps a
  # connection's frames in order).
  for stub in stubs:
    await stub.ServerInfo(reverb_service_pb2.ServerInfoRequest())
  at_open = monitor.now()
  blocked_info = None
  if queue:
    # The queue holds QUEUE_SIZE items; every other stream's first insert
    # waits in the rate limiter.
    info = await stubs[0].ServerInfo(reverb_service_pb2.ServerInfoRequest())
    blocked_info = _table(info, 'q')
  go.set()
  if queue:  # now drain: the samplers release the blocked inserters
    samplers = [
      asyncio.ensure_future(_sampler(stubs[i % CONNECTIONS], total // SAMPLERS))
      for i in range(SAMPLERS)
    ]
  writer_results = await asyncio.gather(*writers)
  sampler_results = await asyncio.gather(*samplers)
  info = await stubs[0].ServerInfo(reverb_service_pb2.ServerInfoRequest())
  for channel in channels:
    await channel.close()
  return (
    at_open,
    blocked_info,
    writer_results,
    sampler_results,
    _table(info, 'q'),
  )


def _table(info, name: str):
  return next(t for t in info.table_info if t.name == name)


def _check(run_result, monitor: ThreadMonitor):
  at_open, _, writer_results, sampler_results, table = run_result
  total = STREAMS * ITEMS_PER_STREAM
  all_sent, all_confirmed = [], []
  for sent, confirmed, code in writer_results:
    assert code == grpc.StatusCode.OK
    assert sorted(confirmed) == sorted(sent)  # each key once, on its stream
    all_sent += sent
    all_confirmed += confirmed
  assert len(set(all_sent)) == total and sorted(all_confirmed) == sorted(
    all_sent
  )
  sampled = []
  for keys, code in sampler_results:
    assert code == grpc.StatusCode.OK
    sampled += keys
  assert len(sampled) == total and set(sampled) <= set(all_sent)
  limiter = table.rate_limiter_info
  assert limiter.insert_stats.completed == total  # nothing lost, nothing twice
  assert limiter.sample_stats.completed == total
  assert at_open <= MAX_SERVER_THREADS, (
    f'{at_open} threads with {STREAMS} streams open'
  )
  assert monitor.highest <= MAX_SERVER_THREADS, (
    f'{monitor.highest} server threads'
  )
  return sampled


def _serve(binary_server, queue: bool):
  server = binary_server(f'--config={_config(queue)}')
  reverb.Client(server.address).server_info(timeout=120)
  return server, ThreadMonitor(server.process.pid)


def test_many_insert_streams_with_samplers(binary_server):
  server, monitor = _serve(binary_server, queue=False)
  try:
    result = asyncio.run(
      asyncio.wait_for(_run(server.address, monitor, queue=False), HANG_GUARD_S)
    )
  finally:
    monitor.stop()
  _check(result, monitor)
  assert result[-1].current_size == STREAMS * ITEMS_PER_STREAM
  assert server.process.poll() is None


def test_inserters_blocked_by_the_rate_limiter_hold_no_threads(binary_server):
  server, monitor = _serve(binary_server, queue=True)
  try:
    result = asyncio.run(
      asyncio.wait_for(_run(server.address, monitor, queue=True), HANG_GUARD_S)
    )
  finally:
    monitor.stop()
  _, blocked, _, _, table = result
  # STREAMS streams each had an insert in the server; QUEUE_SIZE went in,
  # the rest waited for the samplers, without a thread each.
  assert blocked.current_size == QUEUE_SIZE
  assert blocked.rate_limiter_info.insert_stats.completed == QUEUE_SIZE
  sampled = _check(result, monitor)
  # A FIFO queue hands out every item exactly once, and is empty at the end.
  assert len(set(sampled)) == len(sampled)
  assert table.current_size == 0
  assert server.process.poll() is None


async def _outcome(call) -> grpc.StatusCode:
  """Reads `call` to its end; its status code."""
  try:
    while await call.read() is not grpc.aio.EOF:
      pass
  except grpc.aio.AioRpcError:
    pass
  return await call.code()


async def _sigterm_while_blocked(server, monitor: ThreadMonitor):
  channels = _channels(server.address)
  stubs = [reverb_service_pb2_grpc.ReverbServiceStub(c) for c in channels]
  inserts = []
  for i in range(STREAMS):
    call = stubs[i % CONNECTIONS].InsertStream()
    request, _ = _request(random.Random(i), i, 0)
    await call.write(request)
    inserts.append(call)
  samples = []
  for i in range(SAMPLERS):
    call = stubs[i % CONNECTIONS].SampleStream()
    await call.write(
      reverb_service_pb2.SampleStreamRequest(table='idle', num_samples=1)
    )
    samples.append(call)
  for stub in stubs:  # the server has read every request (see _run)
    info = await stub.ServerInfo(reverb_service_pb2.ServerInfoRequest())
  blocked = _table(info, 'q')
  at_blocked = monitor.now()
  loop = asyncio.get_running_loop()
  exit_code = loop.run_in_executor(
    None, lambda: server.terminate(timeout=HANG_GUARD_S)
  )
  codes = await asyncio.gather(*[_outcome(c) for c in inserts + samples])
  for channel in channels:
    await channel.close()
  return blocked, at_blocked, codes, await exit_code


def test_sigterm_with_blocked_streams_stops_cleanly(binary_server):
  server = binary_server(
    f'--config={_config(queue=True)}', '--drain_seconds=0.5'
  )
  reverb.Client(server.address).server_info(timeout=120)
  monitor = ThreadMonitor(server.process.pid)
  try:
    blocked, at_blocked, codes, exit_code = asyncio.run(
      asyncio.wait_for(_sigterm_while_blocked(server, monitor), HANG_GUARD_S)
    )
  finally:
    monitor.stop()
  assert blocked.current_size == QUEUE_SIZE  # the rest waited in the limiter
  assert at_blocked <= MAX_SERVER_THREADS, at_blocked
  assert exit_code == 0, ''.join(server.lines)
  assert any('event=stopped' in line for line in server.lines)
  # Every stream was ended by the server going away, none left hanging.
  unexpected = [
    c
    for c in codes
    if c not in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
  ]
  assert not unexpected, unexpected[:5]
  assert len(codes) == STREAMS + SAMPLERS
