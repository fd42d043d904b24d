"""The server under test, and calls to it over raw bytes.

``FuzzServer`` runs the reverb_server binary (``SERVER_BINARY``;
TF_REVERB_FUZZ_SERVER names another build) with the fuzz tables on a free
port and a checkpoint directory, and stops it by its pid. ``RawClient`` calls
every ReverbService method with serialized messages and returns an
``Outcome``: the status, its details, the raw responses and the time taken.
"""

import dataclasses
import json
import os
import re
import subprocess
import threading
import time
from typing import Iterator, List, Optional, Sequence, Tuple

import grpc

from tf_reverb.proto import reverb_service_pb2 as rs

from .builders import server_config

# The repository root (this package is tests/grpc_fuzz/).
ROOT = os.path.dirname(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
# TF_REVERB_FUZZ_SERVER: another reverb_server build to fuzz.
SERVER_BINARY = os.environ.get('TF_REVERB_FUZZ_SERVER') or os.path.join(
  ROOT, 'tf_reverb', 'bin', 'reverb_server'
)
SERVICE = '/deepmind.reverb.ReverbService/'
CLIENT_DEADLINE_MESSAGE = 'Deadline Exceeded'


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
