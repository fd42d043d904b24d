"""The generated _pb2 modules load under every protobuf runtime that
TensorFlow 2.15-2.21 bring (TF 2.15 pins protobuf >=3.20.3,<5; TF 2.21 brings
6.x and 7.x).

Each runtime lives in its own venv under .wheel-build/proto-venvs/ (outside
git, kept between runs: created once with `--without-pip` and filled by this
interpreter's pip, reusing the pip cache; `rm -r .wheel-build/proto-venvs` to
refresh "newest"). tests/wheel/proto_check.py runs there on a copy of
tf_reverb/proto/, so tf_reverb's native core is never imported, and
round-trips an InsertStreamRequest with a ChunkData, a StructuredValue and a
text-format ReverbServerConfig, under each runtime's default implementation
and its pure-Python one.
"""

import fcntl
import functools
import glob
import json
import os
import shutil
import subprocess
import sys
from typing import Dict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO_DIR = os.path.join(ROOT, 'tf_reverb', 'proto')
CHECK_SCRIPT = os.path.join(ROOT, 'tests', 'wheel', 'proto_check.py')
VENVS_DIR = os.environ.get(
  'TF_REVERB_PROTO_VENVS', os.path.join(ROOT, '.wheel-build', 'proto-venvs')
)

# name -> pip requirement. 3.20.3 is TF 2.15's floor, 4.25 the last 4.x
# (TF 2.15/2.16), 5.x (TF 2.17-2.19), 6.x (TF 2.20/2.21), newest unpinned.
RUNTIMES: Dict[str, str] = {
  '3.20.3': 'protobuf==3.20.3',
  '4.25': 'protobuf==4.25.*',
  '5': 'protobuf==5.*',
  '6': 'protobuf==6.*',
  'newest': 'protobuf',
}
# The major version each venv must end up with ("newest": 7 or later).
EXPECTED_MAJOR = {'3.20.3': 3, '4.25': 4, '5': 5, '6': 6, 'newest': 7}


@functools.lru_cache(maxsize=None)
def runtime_python(name: str) -> str:
  """The interpreter of the venv holding protobuf runtime `name`.

  A fixed sequence of steps, each run once: reuse the venv if its stamp names
  the same requirement, else recreate it and install the requirement.
  """
  requirement = RUNTIMES[name]
  venv = os.path.join(VENVS_DIR, name)
  python = os.path.join(venv, 'bin', 'python')
  stamp = os.path.join(venv, '.tf_reverb_requirement')
  os.makedirs(VENVS_DIR, exist_ok=True)
  with open(os.path.join(VENVS_DIR, f'.{name}.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest may be filling it
    try:
      with open(stamp) as f:
        if f.read() == requirement and os.access(python, os.X_OK):
          return python
    except FileNotFoundError:
      pass
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run(
      [sys.executable, '-m', 'venv', '--without-pip', venv], check=True
    )
    subprocess.run(
      [
        sys.executable,
        '-m',
        'pip',
        '--python',
        python,
        'install',
        '-q',
        '--disable-pip-version-check',
        '--no-input',
        requirement,
      ],
      check=True,
    )
    with open(stamp, 'w') as f:
      f.write(requirement)
  return python


@pytest.fixture(scope='module')
def proto_package(tmp_path_factory) -> str:
  """A copy of tf_reverb/proto/ as a package that is not tf_reverb's."""
  package = tmp_path_factory.mktemp('protos') / 'tf_reverb_protos_copy'
  package.mkdir()
  modules = glob.glob(os.path.join(PROTO_DIR, '*.py'))
  assert any(m.endswith('_pb2.py') for m in modules), (
    'no generated modules; run setup.generate_protos()'
  )
  for module in modules:
    shutil.copy(module, package)
  return str(package)


@pytest.mark.parametrize('implementation', ['default', 'python'])
@pytest.mark.parametrize('runtime', sorted(RUNTIMES))
def test_pb2_modules_load_and_round_trip(
  runtime, implementation, proto_package, tmp_path
):
  python = runtime_python(runtime)
  env = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(('PYTHON', 'PROTOCOL_BUFFERS'))
  }
  if implementation == 'python':
    env['PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION'] = 'python'
  # From a directory outside the checkout: nothing of tf_reverb is on the path.
  result = subprocess.run(
    [python, '-s', CHECK_SCRIPT, proto_package],
    cwd=tmp_path,
    env=env,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, (
    f'protobuf {runtime} ({implementation}) refused the gencode:\n'
    f'{result.stdout}\n{result.stderr}'
  )
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert int(report['protobuf'].split('.')[0]) >= EXPECTED_MAJOR[runtime]
  if runtime != 'newest':
    assert int(report['protobuf'].split('.')[0]) == EXPECTED_MAJOR[runtime]
  if implementation == 'python':
    assert report['implementation'] == 'python'
  assert 'Protobuf gencode version' not in result.stderr  # no version warning


def test_gencode_has_no_runtime_version_checks():
  """Neither protobuf's nor grpcio's generated version gate is present."""
  for path in glob.glob(os.path.join(PROTO_DIR, '*_pb2*.py')):
    with open(path) as f:
      text = f.read()
    assert 'ValidateProtobufRuntimeVersion' not in text, path
    assert 'GRPC_GENERATED_VERSION' not in text, path
    assert 'runtime_version' not in text, path


def test_tf_reverb_does_not_import_grpc_stubs():
  """grpcio is no install requirement: only tests use the _pb2_grpc stubs."""
  for path in glob.glob(
    os.path.join(ROOT, 'tf_reverb', '**', '*.py'), recursive=True
  ):
    if os.path.dirname(path) == PROTO_DIR:
      continue
    with open(path) as f:
      text = f.read()
    assert '_pb2_grpc' not in text, path
    assert 'import grpc\n' not in text, path
