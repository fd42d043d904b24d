"""The wheel-proof tools themselves (tests/wheel/check_libs.py,
scripts/test_wheel.sh): the library check catches Debian-linked builds, and
the script's arguments fail cleanly. The smoke runs themselves need a wheel
(`bash scripts/test_wheel.sh`)."""

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
  for name in ('libgrpc', 'libprotobuf', 'libabsl_', 'libsnappy', 'libzstd',
               'libprometheus-cpp-core', 'libprometheus-cpp-pull', 'libcivetweb'):
    assert f'{name}' in text, (name, text)
  assert 'libstdc++' not in text and 'libc.so' not in text  # manylinux base


@pytest.mark.parametrize('line,expected', [
    ('\tlibgrpc++.so.1.51 => /lib/x86_64-linux-gnu/libgrpc++.so.1.51 (0x1)',
     ('libgrpc++.so.1.51', '/lib/x86_64-linux-gnu/libgrpc++.so.1.51')),
    ('\tlibtensorflow_framework.so.2 => not found',
     ('libtensorflow_framework.so.2', '')),
    ('\t/lib64/ld-linux-x86-64.so.2 (0x7f)',
     ('ld-linux-x86-64.so.2', '/lib64/ld-linux-x86-64.so.2')),
])
def test_check_libs_parses_ldd_lines(monkeypatch, line, expected):
  completed = subprocess.CompletedProcess([], 0, stdout=line + '\n', stderr='')
  monkeypatch.setattr(check_libs.subprocess, 'run', lambda *a, **k: completed)
  assert list(check_libs.ldd('/x.so').items()) == [expected]


def test_check_libs_allows_only_tensorflow_to_be_missing(monkeypatch):
  resolved = {'libtensorflow_framework.so.2': '', 'libfoo.so.1': '',
              'libgrpc-1a2b.so.29': '/site/tf_reverb.libs/libgrpc-1a2b.so.29',
              'libstdc++.so.6': '/lib/x86_64-linux-gnu/libstdc++.so.6',
              'libssl.so.3': '/lib/x86_64-linux-gnu/libssl.so.3'}
  monkeypatch.setattr(check_libs, 'ldd', lambda path: resolved)
  failures, notes = check_libs.check('/x.so')
  assert len(failures) == 2, failures
  assert 'libfoo.so.1 not found' in failures[0]
  assert 'libssl.so.3' in failures[1] and 'manylinux' in failures[1]
  assert notes == ['/x.so: libgrpc-1a2b.so.29 => '
                   '/site/tf_reverb.libs/libgrpc-1a2b.so.29']


def test_test_wheel_script_arguments(tmp_path):
  result = subprocess.run(['bash', SCRIPT, '--help'], capture_output=True,
                          text=True)
  assert result.returncode == 0 and '--all' in result.stdout
  result = subprocess.run(['bash', SCRIPT, '--wheel',
                           str(tmp_path / 'missing.whl')],
                          capture_output=True, text=True)
  assert result.returncode == 2 and 'not found' in result.stderr
  result = subprocess.run(['bash', SCRIPT, '--bogus'], capture_output=True,
                          text=True)
  assert result.returncode == 2 and 'unknown argument' in result.stderr
