"""The set-up fails loudly: a broken native build stops scripts/setup.sh and
`pip install --no-build-isolation .` with the compiler's error in view, and
scripts/check_install.py refuses an installation missing a native part.

The broken build is real: TF_REVERB_BAZEL_FLAGS hands Bazel a per-file copt
that makes GCC include a header that does not exist, so one compile action
of //server/service:service fails exactly as a missing header on a new Debian
would. The next normal build compiles that one file again.
"""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MISSING_HEADER = '/nonexistent/tf_reverb_broken_build.h'
BROKEN_BUILD = dict(
  os.environ,
  TF_REVERB_BAZEL_FLAGS=(
    f'--per_file_copt=server/service/sample_response\\.cc@-include,{MISSING_HEADER}'
  ),
)


def _assert_names_the_failure(output):
  assert 'Compiling server/service/sample_response.cc failed' in output
  assert '//server/service:service' in output
  assert f'fatal error: {MISSING_HEADER}: No such file or directory' in output
  assert 'build/native_build.log' in output


def test_a_failed_native_build_fails_the_set_up_with_the_error():
  result = subprocess.run(
    ['bash', 'scripts/setup.sh'],
    cwd=ROOT,
    env=BROKEN_BUILD,
    capture_output=True,
    text=True,
    timeout=1800,
  )
  output = result.stdout + result.stderr
  assert result.returncode != 0, output
  _assert_names_the_failure(output)
  # The summary comes after Bazel's output, the last thing before set-up stops.
  summary = output.rindex("The Bazel build of tf_reverb's native parts failed")
  assert summary > output.rindex(
    'Compiling server/service/sample_response.cc failed: (Exit 1)'
  )
  assert '[setup] FAILED: the native build did not complete' in output
  assert '[setup] ready' not in output
  # Bazel's whole output was kept.
  with open(os.path.join(ROOT, 'build', 'native_build.log')) as f:
    assert MISSING_HEADER in f.read()


def test_a_failed_native_build_fails_pip_install(tmp_path):
  target = tmp_path / 'site'
  result = subprocess.run(
    [
      sys.executable,
      '-m',
      'pip',
      'install',
      '-q',
      '--no-build-isolation',
      '--no-deps',
      '--target',
      str(target),
      '.',
    ],
    cwd=ROOT,
    env=BROKEN_BUILD,
    capture_output=True,
    text=True,
    timeout=1800,
  )
  output = result.stdout + result.stderr
  assert result.returncode != 0, output
  _assert_names_the_failure(output)
  assert not (target / 'tf_reverb').exists()


def _package_copy(tmp_path):
  """A copy of the installed tf_reverb package (native parts included)."""
  import tf_reverb  # pylint: disable=g-import-not-at-top

  copy = tmp_path / 'site'
  shutil.copytree(
    os.path.dirname(tf_reverb.__file__),
    copy / 'tf_reverb',
    ignore=shutil.ignore_patterns('__pycache__'),
  )
  shutil.copy(os.path.join(ROOT, 'tf_reverb_as_reverb.py'), copy)
  return copy


def _check_install(package_dir):
  return subprocess.run(
    [
      sys.executable,
      os.path.join(ROOT, 'scripts', 'check_install.py'),
      '--package_dir',
      str(package_dir),
    ],
    capture_output=True,
    text=True,
    timeout=600,
  )


def test_check_install_passes_a_whole_installation(tmp_path):
  result = _check_install(_package_copy(tmp_path))
  assert result.returncode == 0, result.stdout + result.stderr
  for part in ('core extension', 'server binary', 'TensorFlow kernels'):
    assert f'{part}' in result.stdout
  # The copy was checked, not the checkout.
  assert str(tmp_path) in result.stdout


def test_check_install_names_a_missing_core_and_its_cause(tmp_path):
  copy = _package_copy(tmp_path)
  os.remove(copy / 'tf_reverb' / 'pybind.so')
  result = _check_install(copy)
  assert result.returncode == 1
  assert 'core extension (tf_reverb.pybind): FAILED' in result.stderr
  # The import error says what is missing, not "partially initialized module".
  assert 'pybind.so is missing' in result.stderr
  assert 'partially initialized' not in result.stderr
  assert 'tf_reverb is not usable' in result.stderr


def test_check_install_refuses_a_broken_server_binary(tmp_path):
  copy = _package_copy(tmp_path)
  binary = copy / 'tf_reverb' / 'bin' / 'reverb_server'
  binary.write_bytes(b'\x7fELF broken')
  result = _check_install(copy)
  assert result.returncode == 1
  assert 'server binary (reverb_server): FAILED' in result.stderr
  assert 'core extension (tf_reverb.pybind): ok' in result.stdout


def test_check_install_refuses_kernels_that_do_not_load(tmp_path):
  copy = _package_copy(tmp_path)
  for kernel in (copy / 'tf_reverb' / 'ops').glob('libtf_reverb_ops*.so'):
    kernel.write_bytes(b'not a library')
  result = _check_install(copy)
  assert result.returncode == 1
  assert 'TensorFlow kernels (tf_reverb.ops): FAILED' in result.stderr
