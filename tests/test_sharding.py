"""A sharded address over real reverb_server processes on loopback, no Ray.

Two or three ``reverb_server`` binaries behind one ``ipv4:`` target (or a
list of addresses): writers spread over them, datasets sample all of them,
admin calls reach every one, and a SIGKILLed shard costs no confirmed item.
Each shard is also inspected on its own through a plain (unsharded) client.
"""

import concurrent.futures
import os
import signal
import threading
from typing import Dict, List

import numpy as np
import pytest

import tf_reverb as reverb
from tf_reverb import shard_target
from shard_processes import ShardProcess, ipv4_target


@pytest.fixture
def start_shards():
  """start_shards(n, **kwargs) -> n ShardProcess; killed by pid at teardown."""
  started: List[ShardProcess] = []

  def start(n: int, **kwargs) -> List[ShardProcess]:
    shards = [ShardProcess(**kwargs) for _ in range(n)]
    started.extend(shards)
    return shards

  yield start
  for shard in started:
    try:
      shard.signal(signal.SIGCONT)
    except ProcessLookupError:
      pass
    shard.kill()


def _size(shard: ShardProcess, table: str) -> int:
  return (
    reverb.Client(shard.address).server_info(timeout=60)[table].current_size
  )


def _drain_queue(shard: ShardProcess) -> List[int]:
  """Every item id in `shard`'s queue table, each sampled (and removed) once."""
  client = reverb.Client(shard.address)
  n = _size(shard, 'queue')
  if not n:
    return []
  return [
    int(np.asarray(sample.data[0]).reshape(-1)[0])  # squeezed or not
    for sample in client.sample('queue', n, emit_timesteps=False, timeout=60)
  ]


def _write(writer, item_id: int, table: str = 'queue') -> None:
  writer.append([np.int64(item_id)])
  writer.create_item(table, 1.0, [writer.history[0][-1:]])


def test_address_forms():
  assert shard_target.to_target('127.0.0.1:1') == '127.0.0.1:1'
  assert shard_target.to_target(['127.0.0.1:1']) == '127.0.0.1:1'
  assert shard_target.to_target(('localhost:1',)) == 'localhost:1'
  assert (
    shard_target.to_target(['127.0.0.1:1', 'localhost:2'])
    == 'ipv4:127.0.0.1:1,127.0.0.1:2'
  )
  assert (
    shard_target.to_target(['[::1]:1', '[::1]:2']) == 'ipv6:[::1]:1,[::1]:2'
  )
  assert shard_target.is_sharded('ipv4:127.0.0.1:1,127.0.0.1:2')
  assert shard_target.is_sharded('dns:///replay.svc:8000')
  assert not shard_target.is_sharded('ipv4:127.0.0.1:1')
  assert not shard_target.is_sharded('replay.svc:8000')
  with pytest.raises(ValueError, match='empty'):
    shard_target.to_target([])
  with pytest.raises(ValueError, match='twice'):
    shard_target.to_target(['127.0.0.1:1', 'localhost:1'])
  with pytest.raises(ValueError, match='host:port'):
    shard_target.to_target(['127.0.0.1:1', '127.0.0.1'])
  with pytest.raises(ValueError, match='does not resolve'):
    shard_target.to_target(['127.0.0.1:1', 'no-such-host.invalid:2'])
  with pytest.raises(ValueError, match='mix IPv4-only and IPv6-only'):
    shard_target.to_target(['127.0.0.1:1', '[::1]:2'])
  with pytest.raises(ValueError, match="Invalid address 'localhost:2'"):
    reverb.Client('ipv4:127.0.0.1:1,localhost:2')
  with pytest.raises(ValueError, match='NAME:PORT'):
    reverb.Client('dns:///replay')
  with pytest.raises(TypeError, match='int'):
    reverb.Client(['127.0.0.1:1', 2])


def test_single_address_is_the_unsharded_client(start_shards):
  (shard,) = start_shards(1)
  for address in (shard.address, [shard.address], f'ipv4:{shard.address}'):
    client = reverb.Client(address)
    assert not client.sharded
    assert client.shard_addresses() == [client.server_address]
    client.insert(np.int64(7), {'queue': 1.0})
    assert client.server_info(timeout=60)['queue'].current_size == 1
    assert list(client.shard_server_info(timeout=60)) == [client.server_address]
    assert next(client.sample('queue', emit_timesteps=False)).data[0][0] == 7
  assert reverb.Client([shard.address]).server_address == shard.address


def test_grpc_health_is_served_by_binary_and_in_process_server(start_shards):
  import grpc  # pylint: disable=g-import-not-at-top

  (shard,) = start_shards(1)
  server = reverb.Server([reverb.Table.queue('q', 10)], port=0)
  try:
    for address in (shard.address, f'127.0.0.1:{server.port}'):
      with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary('/grpc.health.v1.Health/Check')
        # HealthCheckRequest{service: ""} is empty; the response's field 1
        # is the status, 1 = SERVING.
        assert check(b'', timeout=60) == b'\x08\x01'
  finally:
    server.stop()


def test_forty_writers_spread_over_both_shards(start_shards):
  shards = start_shards(2)
  client = reverb.Client(ipv4_target(shards))
  assert client.sharded
  assert client.shard_addresses() == [s.address for s in shards]
  client.server_info(timeout=60)
  writers = [client.trajectory_writer(1) for _ in range(40)]
  for i, writer in enumerate(writers):
    _write(writer, i)
  for writer in writers:
    writer.flush(timeout_ms=60_000)
  sizes = [_size(s, 'queue') for s in shards]
  assert sum(sizes) == 40
  # round_robin gives 20/20 once both connections are up; allow the first
  # streams to have been picked while only one was.
  assert min(sizes) >= 14, sizes
  # Summed and per-shard infos.
  assert client.server_info(timeout=60)['queue'].current_size == 40
  per_shard = client.shard_server_info(timeout=60)
  assert [per_shard[s.address]['queue'].current_size for s in shards] == sizes
  # Every item is on exactly one shard.
  ids = [_drain_queue(s) for s in shards]
  assert sorted(ids[0] + ids[1]) == list(range(40))
  for writer in writers:
    writer.close()


def test_client_insert_rotates_over_shards(start_shards):
  shards = start_shards(3)
  client = reverb.Client([s.address for s in shards])
  for i in range(30):
    client.insert(np.int64(i), {'queue': 1.0})
  assert [_size(s, 'queue') for s in shards] == [10, 10, 10]
  # A dead shard: its idle stream fails and is replaced on a live one.
  shards[0].kill()
  for i in range(30, 50):
    client.insert(np.int64(i), {'queue': 1.0})
  ids = _drain_queue(shards[1]) + _drain_queue(shards[2])
  assert len(ids) == len(set(ids)) == 40
  assert set(range(30, 50)) <= set(ids)


def test_dataset_samples_every_shard_and_survives_a_kill(start_shards):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import

  shards = start_shards(2)
  for s, shard in enumerate(shards):
    plain = reverb.Client(shard.address)
    for i in range(20):
      plain.insert(np.int64(1000 * s + i), {'replay': 1.0})
  dataset = reverb.TrajectoryDataset(
    [s.address for s in shards],
    'replay',
    dtypes=(tf.int64,),
    shapes=(tf.TensorShape([1]),),
    max_in_flight_samples_per_worker=2,
    rate_limiter_timeout_ms=120_000,
  )  # a hang guard: a stalled dataset ends
  iterator = iter(dataset)
  seen = {int(next(iterator).data[0][0]) // 1000 for _ in range(40)}
  assert seen == {0, 1}
  shards[0].kill()
  after = [int(next(iterator).data[0][0]) // 1000 for _ in range(60)]
  # A few samples fetched from shard 0 before the kill may still be queued.
  assert after[-40:] == [1] * 40
  # max_samples counts over all shards.
  counted = reverb.TrajectoryDataset(
    [s.address for s in shards],
    'replay',
    dtypes=(tf.int64,),
    shapes=(tf.TensorShape([1]),),
    max_in_flight_samples_per_worker=2,
    max_samples=7,
  )
  assert len(list(counted)) == 7


def test_max_samples_counts_over_all_shards(start_shards):
  shards = start_shards(2)
  for s, shard in enumerate(shards):
    plain = reverb.Client(shard.address)
    for i in range(10):
      plain.insert(np.int64(1000 * s + i), {'replay': 1.0})
  with reverb.NumpyIterator(
    ipv4_target(shards),
    'replay',
    batch_size=1,
    max_in_flight_samples_per_worker=1,
    max_samples=30,
  ) as iterator:
    batches = list(iterator)
  assert len(batches) == 30
  ids = {int(np.asarray(b.data[0]).reshape(-1)[0]) // 1000 for b in batches}
  assert ids == {0, 1}


def test_priorities_reach_the_right_shard(start_shards):
  shards = start_shards(3)
  plain = [reverb.Client(s.address) for s in shards]
  for s, client in enumerate(plain):
    for i in range(5):
      client.insert(np.int64(100 * s + i), {'heap': 1.0})
  keys = {}  # id -> key, read from the max-heap one item at a time
  for s, client in enumerate(plain):
    for sample in client.sample('heap', 1, emit_timesteps=False):
      keys[s] = (int(sample.info.key), int(sample.data[0][0]))
  sharded = reverb.Client([s.address for s in shards])
  # Raise the top item of shard 1 and delete that of shard 2; shard 0's keys
  # are unknown to the others, which ignore them.
  sharded.mutate_priorities(
    'heap', updates={keys[1][0]: 50.0, 12345: 3.0}, deletes=[keys[2][0]]
  )
  top = [next(c.sample('heap', emit_timesteps=False)) for c in plain]
  assert top[1].info.key == keys[1][0] and top[1].info.priority == 50.0
  assert top[0].info.priority == 1.0
  assert [_size(s, 'heap') for s in shards] == [5, 5, 4]
  assert sharded.server_info(timeout=60)['heap'].current_size == 14


def test_tf_client_updates_priorities_on_every_shard(start_shards):
  shards = start_shards(2)
  plain = [reverb.Client(s.address) for s in shards]
  for client in plain:
    client.insert(np.int64(1), {'heap': 1.0})
    client.insert(np.int64(2), {'heap': 1.0})
  keys = [
    int(next(c.sample('heap', emit_timesteps=False)).info.key) for c in plain
  ]
  tf_client = reverb.TFClient([s.address for s in shards])
  tf_client.update_priorities(
    'heap', np.array(keys, np.uint64), np.array([7.0, 9.0])
  )
  tops = [next(c.sample('heap', emit_timesteps=False)).info for c in plain]
  assert [t.key for t in tops] == keys
  assert [t.priority for t in tops] == [7.0, 9.0]


def test_reset_checkpoint_and_server_info_act_on_every_shard(
  start_shards, tmp_path
):
  shards = [
    start_shards(1, checkpoint_dir=str(tmp_path / f'shard{i}'))[0]
    for i in range(2)
  ]
  sharded = reverb.Client(ipv4_target(shards))
  for s, shard in enumerate(shards):
    plain = reverb.Client(shard.address)
    for i in range(3 + s):
      plain.insert(np.int64(i), {'replay': 1.0})
  info = sharded.server_info(timeout=60)['replay']
  assert info.current_size == 7
  assert info.max_size == 2 * 1000000
  assert info.rate_limiter_info.insert_stats.completed == 7
  per_shard = sharded.shard_server_info(timeout=60)
  assert [per_shard[s.address]['replay'].current_size for s in shards] == [3, 4]
  paths = sharded.checkpoint()
  assert isinstance(paths, list) and len(paths) == 2
  for path, shard in zip(paths, shards):
    assert path.startswith(shard.checkpoint_dir)
    assert os.path.exists(path)
  sharded.reset('replay')
  assert [_size(s, 'replay') for s in shards] == [0, 0]
  # A shard that is down: server_info sums the others and names it; reset
  # and checkpoint fail naming it after acting on the others.
  reverb.Client(shards[1].address).insert(np.int64(5), {'replay': 1.0})
  shards[0].kill()
  assert sharded.server_info(timeout=60)['replay'].current_size == 1
  per_shard = sharded.shard_server_info(timeout=60)
  assert isinstance(per_shard[shards[0].address], RuntimeError)
  assert per_shard[shards[1].address]['replay'].current_size == 1
  with pytest.raises(
    RuntimeError, match=f'Reset failed on 1 of 2 shards.*{shards[0].address}'
  ):
    sharded.reset('replay')
  assert _size(shards[1], 'replay') == 0
  with pytest.raises(RuntimeError, match=shards[0].address):
    sharded.checkpoint()
  # Priority updates skip the dead shard.
  sharded.mutate_priorities('replay', updates={1: 2.0})


def test_sigkilled_shard_loses_no_confirmed_item(start_shards):
  """Writers keep going on the live shard; unconfirmed items move there."""
  shards = start_shards(2)
  client = reverb.Client(ipv4_target(shards))
  client.server_info(timeout=60)
  num_writers, per_phase = 20, 5
  writers = [client.trajectory_writer(1) for _ in range(num_writers)]

  def item(w: int, phase: int, i: int) -> int:
    return 10_000 * w + 100 * phase + i

  # Phase 0, confirmed everywhere: tells which shard each writer's stream is
  # on (the queue is drained, so only later items remain).
  for w, writer in enumerate(writers):
    for i in range(per_phase):
      _write(writer, item(w, 0, i))
  for writer in writers:
    writer.flush(timeout_ms=60_000)
  placement: Dict[int, int] = {}
  for s, shard in enumerate(shards):
    for item_id in _drain_queue(shard):
      assert placement.setdefault(item_id // 10_000, s) == s
  assert sorted(placement) == list(range(num_writers))
  on_victim = [w for w, s in placement.items() if s == 0]
  assert on_victim and len(on_victim) < num_writers

  # Phase 1: shard 0 is stopped, so nothing it receives is confirmed; then
  # it is SIGKILLed. Phase 2: items written after the kill.
  shards[0].stop_and_wait()
  for w, writer in enumerate(writers):
    for i in range(per_phase):
      _write(writer, item(w, 1, i))
  shards[0].kill()
  for w, writer in enumerate(writers):
    for i in range(per_phase):
      _write(writer, item(w, 2, i))
  for writer in writers:
    writer.flush(timeout_ms=60_000)

  survivors = _drain_queue(shards[1])
  assert len(survivors) == len(set(survivors)), 'an item stored twice'
  expected = {
    item(w, p, i)
    for w in range(num_writers)
    for p in (1, 2)
    for i in range(per_phase)
  }
  assert set(survivors) == expected
  # New writers land on the live shard only.
  fresh = [client.trajectory_writer(1) for _ in range(6)]
  for i, writer in enumerate(fresh):
    _write(writer, 900_000 + i)
    writer.flush(timeout_ms=60_000)
  assert sorted(_drain_queue(shards[1])) == [900_000 + i for i in range(6)]
  for writer in writers + fresh:
    writer.close()


def _serve_fake_shard(serving: bool):
  """A grpcio server answering grpc.health.v1 (SERVING or NOT_SERVING) and
  counting the ReverbService streams it is offered (it never answers them).
  """
  import grpc  # pylint: disable=g-import-not-at-top

  counts = {'watch': 0, 'streams': 0}
  lock = threading.Condition()
  status = b'\x08\x01' if serving else b'\x08\x02'
  stop = threading.Event()

  def watch(request, context):
    del request
    with lock:
      counts['watch'] += 1
    yield status
    # Keep the watch open (the client reads updates from it).
    while not stop.is_set() and context.is_active():
      stop.wait(0.05)

  def check(request, context):
    del request, context
    return status

  def insert_stream(requests, context):
    with lock:
      counts['streams'] += 1
      lock.notify_all()
    for _ in requests:
      pass
    return iter(())

  identity = lambda x: x
  server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=64))
  server.add_generic_rpc_handlers(
    (
      grpc.method_handlers_generic_handler(
        'grpc.health.v1.Health',
        {
          'Watch': grpc.unary_stream_rpc_method_handler(
            watch, request_deserializer=identity, response_serializer=identity
          ),
          'Check': grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=identity, response_serializer=identity
          ),
        },
      ),
      grpc.method_handlers_generic_handler(
        'deepmind.reverb.ReverbService',
        {
          'InsertStream': grpc.stream_stream_rpc_method_handler(
            insert_stream,
            request_deserializer=identity,
            response_serializer=identity,
          ),
        },
      ),
    )
  )
  port = server.add_insecure_port('127.0.0.1:0')
  server.start()
  return server, port, counts, lock, stop


@pytest.mark.parametrize('serving', [False, True])
def test_unhealthy_shard_gets_no_new_streams(start_shards, serving):
  (shard,) = start_shards(1)
  fake, port, counts, lock, stop = _serve_fake_shard(serving)
  try:
    client = reverb.Client([shard.address, f'127.0.0.1:{port}'])
    client.shard_server_info(timeout=60)  # the real shard answers
    writers = [client.trajectory_writer(1) for _ in range(10)]
    for i, writer in enumerate(writers):
      _write(writer, i)
    if not serving:
      for writer in writers:
        writer.flush(timeout_ms=60_000)
      # Health checking was active (the fake was watched) and kept every
      # stream off the NOT_SERVING shard.
      assert counts['watch'] >= 1
      assert counts['streams'] == 0
      assert _size(shard, 'queue') == 10
    else:
      # The control: a SERVING fake is offered streams (that it never
      # confirms), so the assertion above can fail.
      with lock:
        assert lock.wait_for(lambda: counts['streams'] >= 1, timeout=60)
    for writer in writers:
      writer.close()
  finally:
    stop.set()
    fake.stop(0)


def test_dns_target_resolves_at_call_time(start_shards):
  (shard,) = start_shards(1)
  client = reverb.Client(f'dns:///127.0.0.1:{shard.port}')
  assert client.sharded
  assert client.shard_addresses() == [shard.address]
  client.insert(np.int64(3), {'queue': 1.0})
  assert client.server_info(timeout=60)['queue'].current_size == 1


def test_dual_stack_name_is_one_shard(start_shards):
  """localhost has an IPv4 and (usually) an IPv6 address: one server, so one
  shard, and its table is not counted twice."""
  (shard,) = start_shards(1)
  client = reverb.Client(f'dns:///localhost:{shard.port}')
  assert client.shard_addresses() == [f'127.0.0.1:{shard.port}']
  client.insert(np.int64(3), {'queue': 1.0})
  assert client.server_info(timeout=60)['queue'].current_size == 1


def test_sharded_server_info_timeout_is_deadline_exceeded():
  import portpicker  # pylint: disable=g-import-not-at-top

  ports = [portpicker.pick_unused_port() for _ in range(2)]
  client = reverb.Client([f'127.0.0.1:{port}' for port in ports])
  with pytest.raises(reverb.DeadlineExceededError):
    client.server_info(timeout=0.5)
  with pytest.raises(reverb.DeadlineExceededError):
    client.shard_server_info(timeout=0.5)


def test_sample_timeout_on_silent_shards_does_not_wait_for_the_warm_up():
  """Shards that accept TCP but never answer (hung): the sampler's wait for
  every shard's connection is cancelled with the sampler, so sample(timeout)
  raises before gRPC's handshake gives up on the connections."""
  import socket  # pylint: disable=g-import-not-at-top

  listeners = []
  for _ in range(2):
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(4)
    listeners.append(listener)
  try:
    client = reverb.Client(
      [f'127.0.0.1:{l.getsockname()[1]}' for l in listeners]
    )
    with pytest.raises(reverb.DeadlineExceededError):
      next(client.sample('queue', timeout=0.5))
    for listener in listeners:
      listener.settimeout(60)  # a hang guard: the client connected long ago
      connection, _ = listener.accept()
      with connection:
        connection.setblocking(False)
        try:
          data = connection.recv(1 << 16)  # the HTTP/2 preface, if any
          while data:
            data = connection.recv(1 << 16)
          pytest.fail(
            'the client gave up on a connection (handshake '
            'timeout) before sample() returned'
          )
        except BlockingIOError:
          pass  # still connected: the call ended without waiting for gRPC
  finally:
    for listener in listeners:
      listener.close()


def test_other_entry_points_take_a_list_of_addresses(start_shards):
  """Legacy Writer, StructuredWriter, TFStructuredWriter, TimestepDataset."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  structured = reverb.structured
  shards = start_shards(2)
  addresses = [s.address for s in shards]
  client = reverb.Client(addresses)
  for i in range(4):
    with client.writer(1) as writer:
      writer.append(np.int64(i))
      writer.create_item('queue', 1, 1.0)
  assert [_size(s, 'queue') for s in shards] == [2, 2]
  assert sorted(_drain_queue(shards[0]) + _drain_queue(shards[1])) == [
    0,
    1,
    2,
    3,
  ]

  config = structured.create_config(
    structured.pattern_from_transform(np.int64(0), lambda x: x[-1]), 'queue'
  )
  writers = [client.structured_writer([config]) for _ in range(2)]
  for i, writer in enumerate(writers):
    writer.append(np.int64(10 + i))
    writer.flush()
  tf_writers = [
    reverb.TFStructuredWriter(addresses, [config]) for _ in range(2)
  ]
  for i, writer in enumerate(tf_writers):
    writer.append(tf.constant(20 + i, tf.int64))
    writer.flush()
  queued = _drain_queue(shards[0]) + _drain_queue(shards[1])
  assert sorted(queued) == [10, 11, 20, 21]

  for s, shard in enumerate(shards):
    reverb.Client(shard.address).insert(np.int64(1000 * s), {'replay': 1.0})
  dataset = reverb.TimestepDataset(
    addresses,
    'replay',
    dtypes=tf.int64,
    shapes=tf.TensorShape([]),
    max_in_flight_samples_per_worker=1,
  )
  seen = {int(x.data) // 1000 for x in dataset.take(40)}
  assert seen == {0, 1}
