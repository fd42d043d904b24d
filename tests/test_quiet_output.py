"""Our processes print our progress and errors, not TensorFlow's start-up noise.

The main job (examples/dqn_cartpole.py, with its spawned actors and learner)
and the reverb_server binary must not show TF's and absl's once-per-process
notices or Keras warnings we cause, and must still show real errors. Every
run here is bounded by steps or episodes, never by wall-clock time.
"""

import os
import re
import signal
import subprocess
import sys
from typing import List

from conftest import ROOT
from conftest import SERVER_BINARY

EXAMPLE = os.path.join(ROOT, 'examples', 'dqn_cartpole.py')

# What TensorFlow 2.16+, its bundled absl and Keras print once per process
# (or per fit) that is noise to the user of our commands.
NOISE = (
  'cpu_feature_guard',
  'absl::InitializeLog',
  'oneDNN custom operations',
  'rebuild TensorFlow with the appropriate compiler flags',
  '`shuffle=True` was passed',
  'Your input ran out of data',
)
# absl / TF INFO lines ("I0000 00:00:1796174852.658097 5816 port.cc:153] ...").
INFO_LINE = re.compile(r'^I\d{4} ')

# Hang guard of a whole main-job run; the run itself is bounded by steps.
RUN_TIMEOUT_S = 1800


def noise_lines(stderr: str) -> List[str]:
  """The lines of `stderr` that are start-up noise."""
  return [
    line
    for line in stderr.splitlines()
    if INFO_LINE.match(line) or any(n in line for n in NOISE)
  ]


def default_environment() -> dict:
  """os.environ without the variables the entry points default themselves."""
  return {
    k: v
    for k, v in os.environ.items()
    if k not in ('TF_CPP_MIN_LOG_LEVEL', 'TF_ENABLE_ONEDNN_OPTS')
  }


def run_main_job(run_dir, *flags) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, EXAMPLE, '--quick', f'--run_dir={run_dir}', *flags],
    capture_output=True,
    text=True,
    timeout=RUN_TIMEOUT_S,
    env=default_environment(),
  )


def test_main_job_shows_errors_but_no_noise(tmp_path):
  # Two real errors: the learner cannot load its saved weights (a Python
  # exception in a spawned TF process), and the server cannot write its
  # checkpoint (checkpoints/ is a file): a reverb_server error line.
  (tmp_path / 'learner.weights.h5').write_bytes(b'not an HDF5 file')
  (tmp_path / 'checkpoints').write_bytes(b'')
  result = run_main_job(tmp_path, '--resume')
  stderr = result.stderr
  print(result.stdout[-3000:], stderr[-6000:])  # shown on failure
  assert result.returncode == 1
  assert 'Traceback' in stderr and 'load_weights' in stderr
  assert 'learner stopped unexpectedly' in stderr
  assert re.search(r'reverb_server: .*event=checkpoint_failed', stderr)
  assert not noise_lines(stderr), noise_lines(stderr)


def test_main_job_keeps_a_users_tf_log_settings(tmp_path):
  # A user's own TF_CPP_MIN_LOG_LEVEL wins: with 0, TF's INFO lines are back.
  env = dict(
    default_environment(), TF_CPP_MIN_LOG_LEVEL='0', TF_ENABLE_ONEDNN_OPTS='1'
  )
  code = (
    f'import runpy, sys; sys.argv = [{EXAMPLE!r}]; '
    f'runpy.run_path({EXAMPLE!r}, run_name="not_main"); '
    'import tensorflow as tf; tf.constant(1.0) + 1'
  )
  result = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    timeout=300,
    env=env,
  )
  assert result.returncode == 0, result.stderr
  assert 'oneDNN custom operations are on' in result.stderr


def _binary_output(*args, stop=True) -> subprocess.CompletedProcess:
  """Runs a server command; with `stop`, SIGTERMs it once it has started."""
  process = subprocess.Popen(
    list(args),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=default_environment(),
  )
  lines = []
  for line in process.stderr:  # read line by line: no time-based wait
    lines.append(line)
    if stop and 'event=started' in line:
      process.send_signal(signal.SIGTERM)
  process.wait(timeout=120)
  return subprocess.CompletedProcess(
    args, process.returncode, process.stdout.read(), ''.join(lines)
  )


def test_server_binary_prints_events_and_errors_only():
  for command in (
    [SERVER_BINARY],
    [sys.executable, '-m', 'tf_reverb.server_executable.server_main'],
  ):
    result = _binary_output(*command, '--port=0')
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any('event=started' in l for l in lines)
    assert any('event=stopped' in l for l in lines)
    # Every line is one of the server's own structured events.
    assert all(l.startswith('ts=') and ' component=' in l for l in lines), lines
    assert not noise_lines(result.stderr)

    result = _binary_output(
      *command, '--port=0', '--config=tables { bogus: 1 }', stop=False
    )
    assert result.returncode != 0
    assert 'event=error' in result.stderr and 'bogus' in result.stderr
    assert not noise_lines(result.stderr)
