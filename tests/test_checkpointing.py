"""Checkpoints: round trips, crash safety, retention, restore modes, binary."""

import os
import signal
import threading
import time

import grpc
import numpy as np
import pytest

import tf_reverb as reverb


def fifo_table(name='t', max_size=1000, rate_limiter=None):
  return reverb.Table(
    name,
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    max_size,
    rate_limiter or reverb.rate_limiters.MinSize(1),
  )


def test_round_trip_keeps_items_order_priorities_and_counters(tmp_path, capfd):
  checkpointer = reverb.checkpointers.DefaultCheckpointer(str(tmp_path))
  with reverb.Server([fifo_table()], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for i in range(5):
      client.insert(np.full(3, i), {'t': float(i + 1)})
    list(client.sample('t', 2))
    path = client.checkpoint()
  assert os.path.dirname(path) == str(tmp_path)
  assert os.path.exists(os.path.join(path, 'DONE'))

  table = fifo_table(max_size=7)
  with reverb.Server(
    [table],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
  ) as server:
    warning = capfd.readouterr().err
    assert 'event=config_differs table=t kept=checkpoint' in warning
    assert 'max_size: table has 7, checkpoint has 1000' in warning
    info = table.info
    assert info.current_size == 5
    assert info.max_size == 1000  # the checkpoint's configuration by default
    assert info.rate_limiter_info.insert_stats.completed == 5
    assert info.rate_limiter_info.sample_stats.completed == 2
    head = next(
      reverb.Client(f'localhost:{server.port}').sample(
        't', emit_timesteps=False
      )
    )
    assert head.data[0].tolist() == [[0, 0, 0]]
    assert head.info.times_sampled == 3
    assert head.info.priority == 1.0


def test_keep_table_config_applies_the_new_definition(tmp_path):
  with reverb.Server(
    [fifo_table()],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
  ) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for i in range(5):
      client.insert(i, {'t': 1.0})
    client.checkpoint()
  table = fifo_table(max_size=2, rate_limiter=reverb.rate_limiters.MinSize(3))
  checkpointer = reverb.checkpointers.DefaultCheckpointer(
    str(tmp_path), keep_table_config=True
  )
  with reverb.Server([table], checkpointer=checkpointer):
    info = table.info
    assert info.max_size == 2 and info.current_size == 2
    assert info.rate_limiter_info.min_size_to_sample == 3


def test_default_checkpointer_and_group_validation():
  with reverb.Server([fifo_table()]) as server:
    path = reverb.Client(f'localhost:{server.port}').checkpoint()
    assert os.path.exists(os.path.join(path, 'DONE'))
  with pytest.raises(ValueError, match='non-empty group'):
    reverb.checkpointers.DefaultCheckpointer('/tmp/x', group='g')


def test_checkpoint_with_an_unknown_table_fails_server_construction(tmp_path):
  with reverb.Server(
    [fifo_table('a')],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
  ) as server:
    reverb.Client(f'localhost:{server.port}').checkpoint()
  with pytest.raises(ValueError, match="Trying to load table 'a'"):
    reverb.Server(
      [fifo_table('b')],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
    )


def test_corrupt_checkpoint_names_the_file_and_can_fall_back(tmp_path):
  checkpointer = reverb.checkpointers.DefaultCheckpointer(
    str(tmp_path), keep_latest=3
  )
  with reverb.Server([fifo_table()], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    client.insert(1, {'t': 1.0})
    client.checkpoint()
    client.insert(2, {'t': 1.0})
    newest = client.checkpoint()
  chunks = os.path.join(newest, 'chunks.tfrecord')
  with open(chunks, 'r+b') as f:
    f.seek(20)
    f.write(b'\xff\xff')
  with pytest.raises(RuntimeError, match='chunks.tfrecord.*corrupt'):
    reverb.Server(
      [fifo_table()],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
    )
  table = fifo_table()
  with reverb.Server(
    [table],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(
      str(tmp_path), fall_back_to_older=True
    ),
  ):
    assert table.info.current_size == 1


def _insert_confirmed(address, values):
  client = reverb.Client(address)
  for value in values:
    client.insert(np.int64(value), {'my_table': float(value)})


def _priorities(address, n):
  client = reverb.Client(address)
  return {
    int(s.data[0][0]): s.info.priority
    for s in client.sample('my_table', n, emit_timesteps=False)
  }


def test_binary_survives_kill_9_after_a_checkpoint(binary_server, tmp_path):
  server = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
  _insert_confirmed(server.address, range(20))
  reverb.Client(server.address).checkpoint()
  server.process.kill()
  server.process.wait()
  restarted = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
  info = reverb.Client(restarted.address).server_info(timeout=60)['my_table']
  assert info.current_size == 20
  seen = _priorities(restarted.address, 400)
  assert set(seen) == set(range(20))
  assert all(seen[v] == float(v) for v in seen)


def test_binary_final_checkpoint_on_sigterm(binary_server, tmp_path):
  server = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
  _insert_confirmed(server.address, range(7))
  assert server.terminate() == 0
  assert any('event=checkpointed reason=exit' in line for line in server.lines)
  restarted = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
  info = reverb.Client(restarted.address).server_info(timeout=60)['my_table']
  assert info.current_size == 7


def test_binary_periodic_checkpoints(binary_server, tmp_path):
  server = binary_server(
    '--port=0',
    f'--checkpoint_dir={tmp_path}',
    '--checkpoint_interval_seconds=1',
  )
  _insert_confirmed(server.address, range(3))
  deadline = time.time() + 120
  while time.time() < deadline:
    done = [
      d
      for d in os.listdir(tmp_path)
      if os.path.exists(os.path.join(tmp_path, d, 'DONE'))
    ]
    if done:
      break
    time.sleep(0.2)
  assert done, 'no periodic checkpoint appeared'


def test_kill_9_while_checkpointing_leaves_the_previous_checkpoint(
  binary_server, tmp_path
):
  server = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
  client = reverb.Client(server.address)
  frame = np.random.default_rng(0).integers(0, 255, (64, 1024), np.uint8)

  def top_up(client, size, target):
    for i in range(size, target):
      client.insert({'v': np.int64(i), 'f': frame}, {'my_table': 1.0})

  top_up(client, 0, 10)
  client.checkpoint()
  restored_sizes = []
  last_complete = 10
  # Kill at several moments of a checkpoint of 800 items of 64 KiB (~50 MB).
  for delay in (0.0, 0.05, 0.15, 0.3, 0.6):
    top_up(client, client.server_info()['my_table'].current_size, 800)
    thread = threading.Thread(target=_try_checkpoint, args=(client,))
    thread.start()
    time.sleep(delay)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    thread.join(timeout=60)
    server = binary_server('--port=0', f'--checkpoint_dir={tmp_path}')
    client = reverb.Client(server.address)
    size = client.server_info(timeout=60)['my_table'].current_size
    # The last complete checkpoint or the new one, never a partial one.
    assert size in (last_complete, 800), (delay, size)
    restored_sizes.append(size)
    last_complete = size
  assert all(d.startswith(('2', '.tmp-')) for d in os.listdir(tmp_path))


def _try_checkpoint(client):
  try:
    client.checkpoint()
  except RuntimeError:
    pass  # the server was killed mid-checkpoint


def test_binary_answers_grpc_health_checks(binary_server):
  server = binary_server('--port=0')
  with grpc.insecure_channel(server.address) as channel:
    check = channel.unary_unary(
      '/grpc.health.v1.Health/Check',
      request_serializer=lambda _: b'',
      response_deserializer=lambda data: data,
    )
    assert check(None, timeout=60) == b'\x08\x01'  # status: SERVING


def _dir_bytes(path):
  return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def _frames(first, count):
  rng = np.random.default_rng(first)
  return [
    rng.integers(0, 255, size=(64, 64), dtype=np.uint8) for _ in range(count)
  ]


def test_incremental_checkpoints_write_what_changed_and_restore_everything(
  tmp_path,
):
  root = str(tmp_path)
  checkpointer = reverb.checkpointers.DefaultCheckpointer(root)
  with reverb.Server([fifo_table()], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for frame in _frames(0, 100):
      client.insert(frame, {'t': 1.0})
    first = client.checkpoint()
    client.insert(_frames(1, 1)[0], {'t': 1.0})
    second = client.checkpoint()
    expected = [
      s.data[0].tobytes()
      for s in client.sample('t', num_samples=101, emit_timesteps=False)
    ]
  # The second holds one new frame and references the first's chunk file,
  # which stays on disk (retired) while the second uses it.
  assert os.path.exists(os.path.join(second, 'chunk_sources.tfrecord'))
  assert _dir_bytes(second) * 10 < _dir_bytes(first)
  assert not os.path.exists(os.path.join(first, 'DONE'))
  assert os.path.exists(os.path.join(first, 'chunks.tfrecord'))
  with reverb.Server(
    [fifo_table()], checkpointer=reverb.checkpointers.DefaultCheckpointer(root)
  ) as server:
    client = reverb.Client(f'localhost:{server.port}')
    restored = [
      s.data[0].tobytes()
      for s in client.sample('t', num_samples=101, emit_timesteps=False)
    ]
  assert restored == expected


def test_full_checkpoint_on_request_stands_alone(tmp_path):
  root = tmp_path / 'root'
  checkpointer = reverb.checkpointers.DefaultCheckpointer(str(root))
  with reverb.Server([fifo_table()], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for frame in _frames(2, 5):
      client.insert(frame, {'t': 1.0})
    client.checkpoint()
    client.insert(_frames(3, 1)[0], {'t': 1.0})
    full = client.checkpoint(full=True)
  assert not os.path.exists(os.path.join(full, 'chunk_sources.tfrecord'))
  # Nothing else is needed: the checkpoint alone, moved elsewhere, restores.
  alone = tmp_path / 'alone'
  alone.mkdir()
  os.rename(full, alone / os.path.basename(full))
  table = fifo_table()
  with reverb.Server(
    [table], checkpointer=reverb.checkpointers.DefaultCheckpointer(str(alone))
  ):
    assert table.info.current_size == 6


def test_non_incremental_checkpointer_writes_every_checkpoint_whole(tmp_path):
  checkpointer = reverb.checkpointers.DefaultCheckpointer(
    str(tmp_path), incremental=False
  )
  with reverb.Server([fifo_table()], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    for frame in _frames(4, 20):
      client.insert(frame, {'t': 1.0})
    first = client.checkpoint()
    first_bytes = _dir_bytes(first)
    second = client.checkpoint()
  assert not os.path.exists(first)
  assert not os.path.exists(os.path.join(second, 'chunk_sources.tfrecord'))
  assert _dir_bytes(second) == first_bytes
