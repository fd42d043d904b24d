"""Smoke test of an installed tf_reverb (the wheel), run from outside the checkout.

    python smoke.py [--no-tf] [--forbid-path DIR]

Checks, in order, each printed as `ok NAME` or `FAIL NAME: why`:

  import_without_tf      `import tf_reverb` imports no TensorFlow (and, with
                         --forbid-path, is not loaded from DIR, the checkout)
  server_binary          the venv's `reverb_server` console script on a free
                         port: Client insert, sample, server_info
  server_binary_checkpoint  reverb_server --checkpoint_dir: Client.checkpoint(),
                         a new reverb_server restores the items
  trajectory_writer      TrajectoryWriter items of 2 steps into an in-process
                         server, read back with NumpyIterator batches
  checkpoint_restore     Server with a DefaultCheckpointer, Client.checkpoint(),
                         a new Server restores the items
  install_as_reverb      in a fresh interpreter: install_as_reverb(),
                         `import reverb` is tf_reverb, still no TensorFlow
 with TensorFlow (default):
  tf_client_tf_function  TFClient.insert and TFClient.sample inside tf.function;
                         the kernel library mapped matches tf.__version__
  trajectory_dataset     a TrajectoryDataset batch
  tf_structured_writer   TFStructuredWriter appends inside tf.function
  import_after_tf        in a fresh interpreter: TensorFlow first, then
                         tf_reverb, a server/client round trip and TFClient
 with --no-tf:
  no_tensorflow          `import tensorflow` fails (the venv has none)

Bounded by steps and item counts, never by sleeps: sampling uses RPC
deadlines, the server binary's start is read line by line (at most
MAX_STARTUP_LINES), and every server started is stopped by its pid. The last
line is `smoke: N passed, M failed`; the exit status is non-zero on a failure.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import traceback
import urllib.request
from typing import Callable, Iterator, List, Optional, Tuple

import numpy as np

MAX_STARTUP_LINES = 200
RPC_TIMEOUT_S = 60.0  # a deadline on each blocking call, never waited out
TABLE = 't'
SERVER_CONFIG = (
  f'tables {{ table_name: "{TABLE}" sampler {{ uniform: true }} '
  'remover { fifo: true } max_size: 1000 max_times_sampled: 0 '
  'rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 '
  'min_diff: -1e300 max_diff: 1e300 } }'
)


def _reverb():
  """tf_reverb, imported on first use (import_without_tf runs first)."""
  import tf_reverb  # pylint: disable=g-import-not-at-top

  return tf_reverb


def _table(name: str = TABLE, max_size: int = 1000):
  reverb = _reverb()
  return reverb.Table(
    name,
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    max_size,
    reverb.rate_limiters.MinSize(1),
  )


def _run_fresh_python(code: str) -> str:
  """Runs `code` in a new interpreter of this venv; returns its stdout."""
  result = subprocess.run(
    [sys.executable, '-c', textwrap.dedent(code)],
    capture_output=True,
    text=True,
  )
  if result.returncode:
    raise AssertionError(
      f'exit {result.returncode}\n{result.stdout}\n{result.stderr}'
    )
  return result.stdout


# --- TF-free checks ----------------------------------------------------------


def check_import_without_tf(forbid_path: Optional[str]) -> str:
  reverb = _reverb()
  assert 'tensorflow' not in sys.modules, 'import tf_reverb imported TensorFlow'
  location = os.path.realpath(reverb.__file__)
  if forbid_path:
    forbidden = os.path.realpath(forbid_path) + os.sep
    assert not location.startswith(forbidden), (
      f'tf_reverb was imported from {location}, inside {forbid_path}'
    )
  assert 'grpc' not in sys.modules, 'import tf_reverb imported grpcio'
  return location


class ServerProcess:
  """The `reverb_server` console script as a child process, stopped by pid."""

  def __init__(self, executable: str, *args: str):
    self.process = subprocess.Popen(
      [executable, *args],
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    self.lines: List[str] = []
    self.port: Optional[int] = None
    for _ in range(MAX_STARTUP_LINES):
      line = self.process.stdout.readline()
      if not line:  # the process ended
        break
      self.lines.append(line)
      match = re.search(r'event=started port=(\d+)', line)
      if match:
        self.port = int(match.group(1))
        return
    self.stop()
    raise AssertionError(
      'reverb_server did not report its port:\n' + ''.join(self.lines)
    )

  def stop(self) -> int:
    """SIGTERM by pid, then SIGKILL if it is still there after its output."""
    if self.process.poll() is None:
      os.kill(self.process.pid, signal.SIGTERM)
    try:
      out, _ = self.process.communicate(timeout=RPC_TIMEOUT_S)
      self.lines.extend(out.splitlines(keepends=True))
    except subprocess.TimeoutExpired:
      os.kill(self.process.pid, signal.SIGKILL)
      self.process.communicate()
    return self.process.returncode


def _server_executable() -> str:
  """The venv's console script: beside this interpreter, else on PATH."""
  beside = os.path.join(os.path.dirname(sys.executable), 'reverb_server')
  path = beside if os.access(beside, os.X_OK) else shutil.which('reverb_server')
  assert path, 'no reverb_server console script in this environment'
  return path


def check_server_binary() -> str:
  reverb = _reverb()
  executable = _server_executable()
  server = ServerProcess(
    executable,
    f'--config={SERVER_CONFIG}',
    '--port=0',
    '--metrics_port=0',
    '--metrics_host=127.0.0.1',
  )
  try:
    client = reverb.Client(f'127.0.0.1:{server.port}')
    for i in range(3):
      client.insert([np.int64(i), np.full([2], i, np.float32)], {TABLE: 1.0})
    info = client.server_info(timeout=RPC_TIMEOUT_S)[TABLE]
    assert info.current_size == 3, info
    # The vendored prometheus-cpp serves the metrics.
    metrics_port = int(
      re.search(r'metrics_port=(\d+)', server.lines[-1]).group(1)
    )
    with urllib.request.urlopen(
      f'http://127.0.0.1:{metrics_port}/metrics', timeout=RPC_TIMEOUT_S
    ) as response:
      page = response.read().decode()
    assert f'tf_reverb_table_inserts_total{{table="{TABLE}"}} 3' in page, page
    samples = list(
      client.sample(
        TABLE, num_samples=5, emit_timesteps=False, timeout=RPC_TIMEOUT_S
      )
    )
    assert len(samples) == 5, samples
    for sample in samples:
      step, vector = sample.data
      assert vector.tolist() == [[float(step[0])] * 2], sample.data
  finally:
    code = server.stop()
  assert code == 0, f'reverb_server exited {code}:\n' + ''.join(server.lines)
  return f'{executable} port {server.port}'


def check_server_binary_checkpoint() -> str:
  reverb = _reverb()
  executable = _server_executable()
  directory = tempfile.mkdtemp(prefix='tf_reverb_smoke_binary_ckpt_')
  try:
    args = (
      f'--config={SERVER_CONFIG}',
      '--port=0',
      f'--checkpoint_dir={directory}',
      '--checkpoint_on_exit=false',
    )
    server = ServerProcess(executable, *args)
    try:
      client = reverb.Client(f'127.0.0.1:{server.port}')
      client.insert([np.int64(1)], {TABLE: 1.0})
      client.insert([np.int64(2)], {TABLE: 1.0})
      path = client.checkpoint()
    finally:
      server.stop()
    assert os.path.exists(os.path.join(path, 'DONE')), path
    server = ServerProcess(executable, *args)
    try:
      client = reverb.Client(f'127.0.0.1:{server.port}')
      size = client.server_info(timeout=RPC_TIMEOUT_S)[TABLE].current_size
    finally:
      server.stop()
    assert size == 2, f'restored {size} items, not 2:\n' + ''.join(server.lines)
  finally:
    shutil.rmtree(directory, ignore_errors=True)
  return '2 items restored by a new reverb_server'


def check_trajectory_writer() -> str:
  reverb = _reverb()
  with reverb.Server([_table()]) as server:
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for step in range(6):
        writer.append(
          {'obs': np.full([3], step, np.float32), 'step': np.int64(step)}
        )
        if step >= 1:
          writer.create_item(
            TABLE,
            1.0,
            {
              'obs': writer.history['obs'][-2:],
              'step': writer.history['step'][-2:],
            },
          )
      writer.flush()
    assert client.server_info()[TABLE].current_size == 5
    with reverb.NumpyIterator(
      address, TABLE, batch_size=4, max_samples=8, rate_limiter_timeout_ms=0
    ) as iterator:
      batches = list(iterator)
  assert [len(b.info.key) for b in batches] == [4, 4], batches
  for batch in batches:
    obs, step = batch.data  # dm-tree order: obs, step
    assert obs.shape == (4, 2, 3) and obs.dtype == np.float32, obs.shape
    assert step.shape == (4, 2) and step.dtype == np.int64, step.shape
    assert (step[:, 1] - step[:, 0] == 1).all(), step
    assert (obs[:, :, 0] == step).all()
  return '5 items, 2 batches of 4'


def check_checkpoint_restore() -> str:
  reverb = _reverb()
  directory = tempfile.mkdtemp(prefix='tf_reverb_smoke_ckpt_')
  try:
    checkpointer = reverb.checkpointers.DefaultCheckpointer(directory)
    with reverb.Server([_table()], checkpointer=checkpointer) as server:
      client = reverb.Client(f'localhost:{server.port}')
      for i in range(4):
        client.insert(np.full([2], i, np.int32), {TABLE: float(i + 1)})
      path = client.checkpoint()
    assert os.path.exists(os.path.join(path, 'DONE')), path
    checkpointer = reverb.checkpointers.DefaultCheckpointer(directory)
    with reverb.Server([_table()], checkpointer=checkpointer) as server:
      client = reverb.Client(f'localhost:{server.port}')
      assert client.server_info()[TABLE].current_size == 4
      head = next(
        client.sample(TABLE, emit_timesteps=False, timeout=RPC_TIMEOUT_S)
      )
      assert head.data[0].tolist() == [[0, 0]], head.data  # FIFO: the first
      assert head.info.priority == 1.0
  finally:
    shutil.rmtree(directory, ignore_errors=True)
  return '4 items restored'


def check_install_as_reverb() -> str:
  out = _run_fresh_python('''
      import sys
      import tf_reverb
      tf_reverb.install_as_reverb(child_processes=False)
      import reverb
      from reverb import structured_writer
      assert reverb is tf_reverb, reverb
      assert structured_writer is sys.modules['tf_reverb.structured_writer']
      server = reverb.Server([reverb.Table.queue('q', 10)])
      client = reverb.Client(f'localhost:{server.port}')
      client.insert([1], {'q': 1.0})
      assert client.server_info()['q'].current_size == 1
      server.stop()
      assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'
      print('alias', reverb.__name__)
  ''')
  assert 'alias tf_reverb' in out, out
  return 'import reverb is tf_reverb'


def check_no_tensorflow() -> str:
  try:
    import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return 'tensorflow is not installed'
  raise AssertionError('TensorFlow is importable in the --no-tf environment')


# --- TensorFlow checks -------------------------------------------------------


def check_tf_client_tf_function() -> str:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  reverb = _reverb()
  # A queue: each item is sampled once, in insertion order.
  with reverb.Server([reverb.Table.queue(TABLE, 10)]) as server:
    address = f'localhost:{server.port}'
    client = reverb.TFClient(address)

    @tf.function
    def act(step):
      client.insert(
        [step, tf.strings.as_string(step)],
        tf.constant([TABLE]),
        tf.constant([1.0], tf.float64),
      )
      return step

    for i in range(3):
      act(tf.constant(i, tf.int64))
    assert reverb.Client(address).server_info()[TABLE].current_size == 3

    @tf.function
    def learn():
      return client.sample(TABLE, [tf.int64, tf.string])

    values = []
    for _ in range(3):
      sample = learn()
      value = int(sample.data[0].numpy())
      assert sample.data[1].numpy() == str(value).encode(), sample
      values.append(value)
  assert values == [0, 1, 2], values
  kernel = _loaded_kernel_library()
  # A wheel's kernels are named per TF minor (libtf_reverb_ops_tf2_15.so).
  match = re.search(r'_tf(\d+)_(\d+)\.so$', kernel)
  if match:
    assert match.groups() == tuple(tf.__version__.split('.')[:2]), (
      f'TensorFlow {tf.__version__} runs kernel library {kernel}'
    )
  return f'TensorFlow {tf.__version__}, kernels {kernel}'


def _loaded_kernel_library() -> str:
  """Basename of the tf_reverb kernel library mapped into this process."""
  with open('/proc/self/maps') as f:
    names = {
      os.path.basename(line.split()[-1])
      for line in f
      if 'libtf_reverb_ops' in line
    }
  assert len(names) == 1, f'kernel libraries mapped: {sorted(names)}'
  return names.pop()


def check_trajectory_dataset() -> str:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  reverb = _reverb()
  with reverb.Server([_table()]) as server:
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=3) as writer:
      for step in range(5):
        writer.append({'obs': np.full([2], step, np.float32)})
        if step >= 2:
          writer.create_item(TABLE, 1.0, {'obs': writer.history['obs'][-3:]})
    dataset = reverb.TrajectoryDataset(
      address,
      TABLE,
      dtypes={'obs': tf.float32},
      shapes={'obs': tf.TensorShape([3, 2])},
      max_in_flight_samples_per_worker=2,
      max_samples=6,
    )
    batch = next(iter(dataset.batch(3)))
  obs = batch.data['obs'].numpy()
  assert obs.shape == (3, 3, 2), obs.shape
  assert (np.diff(obs[:, :, 0], axis=1) == 1).all(), obs
  assert batch.info.key.shape == (3,)
  return 'batch of 3 x [3, 2]'


def check_tf_structured_writer() -> str:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  reverb = _reverb()
  structured = reverb.structured
  step_spec = {'obs': np.zeros(2, np.float32), 'a': np.int32(0)}
  pattern = structured.pattern_from_transform(
    step_spec, lambda s: {'obs': s['obs'][-2:], 'a': s['a'][-1]}
  )
  with reverb.Server([_table()]) as server:
    address = f'localhost:{server.port}'
    writer = reverb.TFStructuredWriter(
      address, [structured.create_config(pattern, TABLE)]
    )

    @tf.function
    def actor(num_steps):
      for i in tf.range(num_steps):
        writer.append({'obs': tf.stack([tf.cast(i, tf.float32), 0.0]), 'a': i})
      writer.flush()

    actor(tf.constant(4))
    client = reverb.Client(address)
    assert client.server_info()[TABLE].current_size == 3
    first = next(
      client.sample(TABLE, emit_timesteps=False, timeout=RPC_TIMEOUT_S)
    )
  a, obs = first.data  # dm-tree order: a, obs
  assert int(a) == 1 and obs[:, 0].tolist() == [0.0, 1.0], first.data
  return '3 items from 4 steps'


def check_import_after_tf() -> str:
  out = _run_fresh_python('''
      import numpy as np
      import tensorflow as tf
      import tf_reverb as reverb
      server = reverb.Server([reverb.Table.queue('q', 10)])
      address = f'localhost:{server.port}'
      reverb.Client(address).insert([np.int64(5)], {'q': 1.0})
      sample = reverb.TFClient(address).sample('q', [tf.int64])
      assert int(sample.data[0].numpy()) == 5, sample
      server.stop()
      print('after-tf ok', tf.__version__)
  ''')
  assert 'after-tf ok' in out, out
  return out.strip().splitlines()[-1]


def checks(
  no_tf: bool, forbid_path: Optional[str]
) -> Iterator[Tuple[str, Callable[[], str]]]:
  yield 'import_without_tf', lambda: check_import_without_tf(forbid_path)
  yield 'server_binary', check_server_binary
  yield 'server_binary_checkpoint', check_server_binary_checkpoint
  yield 'trajectory_writer', check_trajectory_writer
  yield 'checkpoint_restore', check_checkpoint_restore
  yield 'install_as_reverb', check_install_as_reverb
  if no_tf:
    yield 'no_tensorflow', check_no_tensorflow
    return
  yield 'tf_client_tf_function', check_tf_client_tf_function
  yield 'trajectory_dataset', check_trajectory_dataset
  yield 'tf_structured_writer', check_tf_structured_writer
  yield 'import_after_tf', check_import_after_tf


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    '--no-tf',
    action='store_true',
    help='the environment has no TensorFlow: TF-free checks',
  )
  parser.add_argument(
    '--forbid-path', help='fail if tf_reverb is imported from under this path'
  )
  args = parser.parse_args(argv)
  passed, failed = 0, 0
  for name, check in checks(args.no_tf, args.forbid_path):
    try:
      detail = check()
    except Exception as e:  # pylint: disable=broad-except
      failed += 1
      print(f'FAIL {name}: {type(e).__name__}: {e}', flush=True)
      traceback.print_exc()
      if name == 'import_without_tf':
        break  # nothing else can run
    else:
      passed += 1
      print(f'ok {name}: {detail}', flush=True)
  print(f'smoke: {passed} passed, {failed} failed', flush=True)
  return 1 if failed else 0


if __name__ == '__main__':
  sys.exit(main())
