"""The root BUILD names the product's targets, and //:tests holds every C++
test of the tree (so a new cc_test cannot be left out of it)."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _query(expression):
  result = subprocess.run(
      ['bazel', 'query', '--noshow_progress', expression], cwd=ROOT,
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr
  return set(result.stdout.split())


def test_root_targets_and_test_suite_cover_the_tree():
  assert {'//:reverb_server', '//:core', '//:kernels', '//:pybind',
          '//:tests'} <= _query('//:all')
  assert _query('deps(//:reverb_server, 1)') >= {'//server:reverb_server'}
  every_cc_test = _query('kind(cc_test, //...)')
  assert len(every_cc_test) > 20
  assert _query('tests(//:tests)') == every_cc_test
