"""Client.sample on the C++ Sampler, in-process and via the server binary."""

import socket
import threading
import time

import numpy as np
import pytest

import tf_reverb as reverb
from tf_reverb import pybind
from conftest import uniform_table


@pytest.fixture(params=['in_process', 'grpc', 'binary'])
def address(request, binary_server):
  """A server with 'my_table' reached in-process, via gRPC, or in a binary."""
  if request.param == 'binary':
    yield binary_server('--port=0').address
    return
  with reverb.Server([uniform_table()]) as server:
    # 'ipv4:' addresses never take the in-process shortcut.
    host = 'localhost' if request.param == 'in_process' else 'ipv4:127.0.0.1'
    yield f'{host}:{server.port}'


def test_sample_round_trip_of_many_items(address):
  client = reverb.Client(address)
  for i in range(20):
    client.insert(
      {'x': np.full([3], i, np.int32), 'y': np.float64(i)}, {'my_table': 1.0}
    )
  samples = list(client.sample('my_table', 200, emit_timesteps=False))
  assert len(samples) == 200
  for sample in samples:
    x, y = sample.data
    i = int(y[0])
    np.testing.assert_array_equal(x, np.full([1, 3], i, np.int32))
    assert sample.info.table_size == 20
  info = client.server_info()['my_table']
  # Prefetching never takes more than num_samples from the table.
  assert info.rate_limiter_info.sample_stats.completed == 200


def test_sample_timeout_zero_is_immediate(address):
  client = reverb.Client(address)
  with pytest.raises(reverb.DeadlineExceededError):
    next(client.sample('my_table', timeout=0))


def test_sample_timeout_raises_deadline_exceeded(address):
  client = reverb.Client(address)
  start = time.monotonic()
  with pytest.raises(reverb.DeadlineExceededError):
    next(client.sample('my_table', timeout=0.3))
  assert time.monotonic() - start >= 0.25


def test_unknown_table_raises(address):
  with pytest.raises(RuntimeError, match='Priority table nope was not found'):
    next(reverb.Client(address).sample('nope', timeout=10))


def test_sample_on_an_unreachable_server_times_out():
  import portpicker  # pylint: disable=g-import-not-at-top

  client = reverb.Client(f'localhost:{portpicker.pick_unused_port()}')
  with pytest.raises(reverb.DeadlineExceededError):
    next(client.sample('my_table', timeout=0.5))


def test_sample_timeout_against_a_silent_server_does_not_wait_for_the_handshake():
  """A server that accepts TCP but never answers HTTP/2 (hung, or not gRPC).

  The sampler's close used to wait for the worker stuck opening its stream,
  i.e. for gRPC's connection handshake to time out (~20 s) and drop the
  connection. Now closing cancels the pending stream: when sample() has
  raised, the half-open connection is still there, untouched by gRPC.
  """
  listener = socket.socket()
  listener.bind(('127.0.0.1', 0))
  listener.listen(4)
  try:
    client = reverb.Client(f'127.0.0.1:{listener.getsockname()[1]}')
    with pytest.raises(reverb.DeadlineExceededError):
      next(client.sample('my_table', timeout=0.5))
    listener.settimeout(60)  # a hang guard: the client connected long ago
    connection, _ = listener.accept()
    with connection:
      connection.setblocking(False)
      try:
        data = connection.recv(1 << 16)  # the client's HTTP/2 preface, if any
        while data:
          data = connection.recv(1 << 16)
        pytest.fail(
          'the client gave up on the connection (handshake timeout) '
          'before sample() returned'
        )
      except BlockingIOError:
        pass  # still connected: the call ended without waiting for gRPC
  finally:
    listener.close()


def test_raw_sampler_options_are_validated(server):
  client = reverb.Client(f'localhost:{server.port}')
  core = client._client  # pylint: disable=protected-access
  for kwargs in [
    dict(max_samples=0),
    dict(max_in_flight_samples_per_worker=0),
    dict(num_workers=0),
    dict(max_samples_per_stream=0),
    dict(rate_limiter_timeout_ms=-2),
  ]:
    with pytest.raises(ValueError):
      pybind.new_sampler(core, 'my_table', **kwargs)


def test_raw_sampler_max_samples_then_out_of_range(address):
  client = reverb.Client(address)
  client.insert(np.int32(5), {'my_table': 1.0})
  sampler = pybind.new_sampler(
    client._client,
    'my_table',
    max_samples=5,  # pylint: disable=protected-access
    max_in_flight_samples_per_worker=2,
    num_workers=2,
    max_samples_per_stream=3,
  )
  for _ in range(5):
    _, columns = sampler.next(10_000)
    assert columns[0].tolist() == [5]
  with pytest.raises(RuntimeError, match='max_samples'):
    sampler.next(10_000)
  sampler.close()


def test_close_wakes_a_blocked_next(address):
  client = reverb.Client(address)
  sampler = pybind.new_sampler(client._client, 'my_table')  # pylint: disable=protected-access
  outcome = []

  def consume():
    try:
      sampler.next()
    except RuntimeError as e:
      outcome.append(str(e))

  thread = threading.Thread(target=consume)
  thread.start()
  time.sleep(0.2)
  assert thread.is_alive()
  sampler.close()
  thread.join(timeout=30)
  assert not thread.is_alive()
  assert outcome and 'closed' in outcome[0]


def test_in_process_server_stop_under_a_running_sampler():
  server = reverb.Server([uniform_table()])
  client = reverb.Client(f'localhost:{server.port}')
  client.insert(np.arange(4, dtype=np.int64), {'my_table': 1.0})
  sampler = pybind.new_sampler(
    client._client,
    'my_table',  # pylint: disable=protected-access
    max_in_flight_samples_per_worker=4,
    num_workers=2,
  )
  seen = []
  errors = []

  def consume():
    try:
      while True:
        seen.append(sampler.next(30_000)[1][0].tolist())
    except RuntimeError as e:
      errors.append(str(e))

  thread = threading.Thread(target=consume)
  thread.start()
  # Stops the server once the sampler is running (a fixed pause was not
  # always enough for a first sample on a busy machine).
  deadline = time.monotonic() + 120
  while not seen and not errors and time.monotonic() < deadline:
    time.sleep(0.01)
  server.stop()
  del server
  thread.join(timeout=30)
  assert not thread.is_alive()
  assert seen and all(s == [[0, 1, 2, 3]] for s in seen)
  assert errors and 'RateLimiter has been cancelled' in errors[0]


def test_grpc_sampler_survives_a_server_restart(binary_server):
  first = binary_server('--port=0')
  port = first.port
  client = reverb.Client(first.address)
  client.insert(np.int32(1), {'my_table': 1.0})
  assert next(client.sample('my_table', emit_timesteps=False, timeout=60)).data[
    0
  ].tolist() == [1]
  sampler = pybind.new_sampler(
    client._client,
    'my_table',  # pylint: disable=protected-access
    max_in_flight_samples_per_worker=1,
  )
  assert sampler.next(60_000)[1][0].tolist() == [1]
  assert first.terminate() == 0
  second = binary_server(f'--port={port}')
  # The first RPC on the old connection may fail ("Broken pipe"): retry it.
  deadline = time.monotonic() + 120
  while True:
    try:
      reverb.Client(second.address).insert(np.int32(2), {'my_table': 1.0})
      break
    except RuntimeError:
      if time.monotonic() > deadline:
        raise
      time.sleep(0.1)
  values = set()
  for _ in range(5):
    values.add(tuple(sampler.next(30_000)[1][0].tolist()))
  assert (2,) in values
  second.terminate()
