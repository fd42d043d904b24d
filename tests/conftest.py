"""Shared fixtures: real servers on real ports, and helpers for subprocesses."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

import tf_reverb as reverb
from tf_reverb import pybind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')

# The python of a venv with dm-reverb 0.14, for the wire-compatibility tests.
# scripts/run_tests.sh sets it up where dm-reverb can exist (Python 3.8-3.11)
# and otherwise says why not in TF_REVERB_DM_UNAVAILABLE.
DM_PYTHON = os.environ.get('TF_REVERB_DM_PYTHON') or None
requires_dm_reverb = pytest.mark.skipif(
  not DM_PYTHON,
  reason='needs dm-reverb 0.14: '
  + (
    os.environ.get('TF_REVERB_DM_UNAVAILABLE')
    or 'TF_REVERB_DM_PYTHON is not set (scripts/run_tests.sh sets it; or '
    'set it to the python of a venv with dm-reverb 0.14)'
  ),
)


def uniform_table(name='my_table', max_size=1000, **kwargs):
  """A uniform/FIFO table with MinSize(1)."""
  return reverb.Table(
    name,
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    max_size,
    reverb.rate_limiters.MinSize(1),
    **kwargs,
  )


@pytest.fixture(autouse=True)
def forget_registered_channel_security(monkeypatch):
  """Unregisters, after each test, the addresses a test's clients
  registered credentials or tokens for. The registry is per process and
  keyed by address string: a later test's server that the OS gives the
  same port would otherwise be dialled with an earlier test's TLS."""
  registered = set()
  register = pybind.register_channel_security

  def recording_register(*, address, **kwargs):
    register(address=address, **kwargs)
    registered.add(address)

  monkeypatch.setattr(pybind, 'register_channel_security', recording_register)
  yield
  for address in registered:
    reverb.credentials.unregister(address)


@pytest.fixture(params=['in_process', 'binary'])
def address(request, binary_server):
  """'my_table' of an in-process server, or of the server binary."""
  if request.param == 'binary':
    yield binary_server('--port=0').address
    return
  with reverb.Server([uniform_table()]) as s:
    yield f'localhost:{s.port}'


@pytest.fixture
def server():
  """An in-process server with one uniform table 'my_table'."""
  with reverb.Server([uniform_table()], port=None) as s:
    yield s


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
  """Runs `code` in a fresh interpreter; fails the test on a non-zero exit."""
  result = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert result.returncode == 0, (
    f'subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr}'
  )
  return result


# Code that makes `import tensorflow` fail in the interpreter that runs it,
# as where TensorFlow is not installed: prepend it to run_python's code, or
# use run_python_without_tensorflow.
BLOCK_TENSORFLOW = '''
import sys


class _BlockTensorFlow:
  """Makes `import tensorflow` fail, as where it is not installed."""

  def find_spec(self, name, path=None, target=None):
    if name == 'tensorflow' or name.startswith('tensorflow.'):
      raise ImportError(f'{name} is blocked in this test')
    return None


sys.meta_path.insert(0, _BlockTensorFlow())
'''


def run_python_without_tensorflow(
  code: str, timeout: float = 120
) -> subprocess.CompletedProcess:
  """run_python(code) in an interpreter where `import tensorflow` fails;
  the code's end also checks that nothing imported it."""
  return run_python(
    BLOCK_TENSORFLOW
    + code
    + "\nassert 'tensorflow' not in sys.modules, 'tensorflow imported'\n",
    timeout,
  )


class BinaryServer:
  """The reverb_server binary run as a subprocess."""

  def __init__(self, *args: str):
    self.process = subprocess.Popen(
      [SERVER_BINARY, *args],
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    self.lines = []
    self.port = None
    deadline = time.time() + 120  # only a hung start reaches it
    while time.time() < deadline:
      line = self.process.stdout.readline()
      if not line:
        break
      self.lines.append(line)
      match = re.search(r'event=started port=(\d+)', line)
      if match:
        self.port = int(match.group(1))
        return
    self.process.kill()
    raise AssertionError('server binary did not start:\n' + ''.join(self.lines))

  @property
  def address(self) -> str:
    return f'127.0.0.1:{self.port}'

  def terminate(self, sig=signal.SIGTERM, timeout=30) -> int:
    self.process.send_signal(sig)
    out, _ = self.process.communicate(timeout=timeout)
    self.lines.extend(out.splitlines(keepends=True))
    return self.process.returncode

  def kill(self):
    if self.process.poll() is None:
      self.process.kill()
      self.process.communicate()


@pytest.fixture
def binary_server():
  """Starts the server binary with the given arguments; killed at teardown."""
  started = []

  def start(*args):
    server = BinaryServer(*args)
    started.append(server)
    return server

  yield start
  for server in started:
    server.kill()
