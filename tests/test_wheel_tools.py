"""The wheel tools themselves (tests/wheel/check_libs.py, scripts/find_python.sh,
scripts/build_wheel.sh --plan and scripts/test_wheel.sh): the library check
catches Debian-linked builds, the interpreter of each Python is found, the
TF minors of each Python are the ones published for it, and the scripts'
arguments fail cleanly. The builds and smoke runs themselves are
`bash scripts/build_wheel.sh --all-pythons` and `bash scripts/test_wheel.sh
--all-pythons`."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tests', 'wheel'))
import check_libs  # pylint: disable=g-import-not-at-top,wrong-import-position

SCRIPT = os.path.join(ROOT, 'scripts', 'test_wheel.sh')


def test_check_libs_flags_the_system_grpc_protobuf_absl_snappy_zstd():
  # The source build links Debian's libraries: exactly what a wheel must not.
  failures, _ = check_libs.check(os.path.join(ROOT, 'tf_reverb', 'pybind.so'))
  text = '\n'.join(failures)
  for name in (
    'libgrpc',
    'libprotobuf',
    'libabsl_',
    'libsnappy',
    'libzstd',
    'libprometheus-cpp-core',
    'libprometheus-cpp-pull',
    'libcivetweb',
  ):
    assert f'{name}' in text, (name, text)
  assert 'libstdc++' not in text and 'libc.so' not in text  # manylinux base


@pytest.mark.parametrize(
  'line,expected',
  [
    (
      '\tlibgrpc++.so.1.51 => /lib/x86_64-linux-gnu/libgrpc++.so.1.51 (0x1)',
      ('libgrpc++.so.1.51', '/lib/x86_64-linux-gnu/libgrpc++.so.1.51'),
    ),
    (
      '\tlibtensorflow_framework.so.2 => not found',
      ('libtensorflow_framework.so.2', ''),
    ),
    (
      '\t/lib64/ld-linux-x86-64.so.2 (0x7f)',
      ('ld-linux-x86-64.so.2', '/lib64/ld-linux-x86-64.so.2'),
    ),
  ],
)
def test_check_libs_parses_ldd_lines(monkeypatch, line, expected):
  completed = subprocess.CompletedProcess([], 0, stdout=line + '\n', stderr='')
  monkeypatch.setattr(check_libs.subprocess, 'run', lambda *a, **k: completed)
  assert list(check_libs.ldd('/x.so').items()) == [expected]


def test_check_libs_allows_only_tensorflow_to_be_missing(monkeypatch):
  resolved = {
    'libtensorflow_framework.so.2': '',
    'libfoo.so.1': '',
    'libgrpc-1a2b.so.29': '/site/tf_reverb.libs/libgrpc-1a2b.so.29',
    'libstdc++.so.6': '/lib/x86_64-linux-gnu/libstdc++.so.6',
    'libssl.so.3': '/lib/x86_64-linux-gnu/libssl.so.3',
  }
  monkeypatch.setattr(check_libs, 'ldd', lambda path: resolved)
  failures, notes = check_libs.check('/x.so')
  assert len(failures) == 2, failures
  assert 'libfoo.so.1 not found' in failures[0]
  assert 'libssl.so.3' in failures[1] and 'manylinux' in failures[1]
  assert notes == [
    '/x.so: libgrpc-1a2b.so.29 => /site/tf_reverb.libs/libgrpc-1a2b.so.29'
  ]


def test_test_wheel_script_arguments(tmp_path):
  result = subprocess.run(
    ['bash', SCRIPT, '--help'], capture_output=True, text=True
  )
  assert result.returncode == 0 and '--all' in result.stdout
  result = subprocess.run(
    ['bash', SCRIPT, '--wheel', str(tmp_path / 'missing.whl')],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 2 and 'not found' in result.stderr
  result = subprocess.run(
    ['bash', SCRIPT, '--bogus'], capture_output=True, text=True
  )
  assert result.returncode == 2 and 'unknown argument' in result.stderr


FIND_PYTHON = os.path.join(ROOT, 'scripts', 'find_python.sh')
BUILD_WHEEL = os.path.join(ROOT, 'scripts', 'build_wheel.sh')


def _fake_pyenv(root, *versions):
  """A pyenv versions folder whose interpreters are this test's Python."""
  for version in versions:
    minor = '.'.join(version.split('.')[:2])
    bin_dir = root / 'versions' / version / 'bin'
    bin_dir.mkdir(parents=True)
    (bin_dir / f'python{minor}').symlink_to(sys.executable)
  return str(root)


def test_find_python_takes_the_newest_patch_release_of_the_minor(tmp_path):
  pyenv = _fake_pyenv(tmp_path, '3.12.1', '3.12.10', '3.12.9', '3.13.0')
  result = subprocess.run(
    ['bash', FIND_PYTHON, '3.12'],
    capture_output=True,
    text=True,
    env=dict(os.environ, PYENV_ROOT=pyenv),
  )
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == str(
    tmp_path / 'versions' / '3.12.10' / 'bin' / 'python3.12'
  )


def test_find_python_names_what_to_install_when_the_minor_is_missing(tmp_path):
  pyenv = _fake_pyenv(tmp_path, '3.12.1')
  result = subprocess.run(
    ['bash', FIND_PYTHON, '3.99'],
    capture_output=True,
    text=True,
    env=dict(os.environ, PYENV_ROOT=pyenv),
  )
  assert result.returncode == 1
  assert 'no Python 3.99 found' in result.stderr
  assert 'pyenv install 3.99' in result.stderr
  supported = subprocess.run(
    ['bash', FIND_PYTHON, '--supported'],
    capture_output=True,
    text=True,
    check=True,
  )
  assert supported.stdout.split() == ['3.10', '3.11', '3.12', '3.13']


def test_wheel_scripts_refuse_a_python_that_is_not_there(tmp_path):
  env = dict(os.environ, PYENV_ROOT=str(tmp_path))
  for script in (BUILD_WHEEL, SCRIPT):
    result = subprocess.run(
      ['bash', script, '--python', '3.99'],
      capture_output=True,
      text=True,
      env=env,
    )
    assert result.returncode != 0, script
    assert 'no Python 3.99 found' in result.stderr, script


def test_all_pythons_refuses_a_single_python_or_tf_list():
  result = subprocess.run(
    ['bash', BUILD_WHEEL, '--all-pythons', '--tf', '2.21'],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 2 and 'takes neither' in result.stderr
  result = subprocess.run(
    ['bash', SCRIPT, '--all-pythons', '--python', '3.12'],
    capture_output=True,
    text=True,
  )
  assert result.returncode == 2 and 'takes none of' in result.stderr


def test_build_plan_for_python_3_13_has_the_tf_minors_published_for_it(
  tmp_path,
):
  """A cp313 wheel gets kernels for exactly the TFs PyPI has for 3.13."""
  found = subprocess.run(
    ['bash', FIND_PYTHON, '3.13'], capture_output=True, text=True
  )
  if found.returncode != 0:
    pytest.skip(f'no CPython 3.13 on this machine: {found.stderr.strip()}')
  result = subprocess.run(
    ['bash', BUILD_WHEEL, '--python', '3.13', '--plan'],
    capture_output=True,
    text=True,
    env=dict(os.environ, TF_REVERB_WHEEL_CACHE=str(tmp_path)),
  )
  assert result.returncode == 0, result.stderr[-2000:]
  line = result.stdout.strip().splitlines()[-1]
  assert line.startswith('Python 3.13.'), line
  minors = line.split('TensorFlow ')[1].split()
  # TensorFlow's first release for Python 3.13 is 2.20; none of 2.15-2.19
  # has a cp313 wheel.
  assert minors[0] == '2.20' and '2.21' in minors, line
  assert not set(minors) & {'2.15', '2.16', '2.17', '2.18', '2.19'}, line
  # The build venv is of that Python, under the cache directory.
  assert str(tmp_path / 'build-venvs' / 'py3.13') in line
