"""benchmarks/paper_grid.py and benchmarks/memory_per_item.py still run:
--quick at the tiniest counts, tf_reverb always, dm-reverb beside it where
its venv is (TF_REVERB_DM_PYTHON). Nothing here asserts a time or a ratio.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import DM_PYTHON, requires_dm_reverb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = os.path.join(ROOT, 'benchmarks', 'paper_grid.py')
MEMORY = os.path.join(ROOT, 'benchmarks', 'memory_per_item.py')
TIMEOUT_S = 900  # a hang guard only (the driver may need building first)


def run(args):
  return subprocess.run(
    [sys.executable, *args],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    check=False,
  )


def dm_args(with_dm):
  return ['--dm_python', DM_PYTHON] if with_dm else ['--no_dm']


def check_grid(tmp_path, with_dm):
  report_path = tmp_path / 'grid.json'
  plot_path = tmp_path / 'grid.png'
  out = run(
    [
      GRID,
      '--quick',
      '--scale=0.002',
      '--no_ceiling',
      f'--json={report_path}',
      f'--plot={plot_path}',
      *dm_args(with_dm),
    ],
  )
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
  report = json.loads(report_path.read_text())
  impls = {'ours', 'dm'} if with_dm else {'ours'}
  assert {r['impl'] for r in report['runs']} == impls
  points = {
    (r['mode'], r['tables'], r['payload'], r['clients']) for r in report['runs']
  }
  # --quick: clients 1 and 10 x 400 B and 40 KB x both modes, and 4 tables.
  assert len(points) == 10, points
  for r in report['runs']:
    assert r['items'] > 0, r
  for row in report['rows']:
    assert len(row['ratios']) == (1 if with_dm else 0), row
  assert plot_path.stat().st_size > 0
  assert 'medians over 1 rounds' in out.stdout


def check_memory(tmp_path, with_dm):
  report_path = tmp_path / 'memory.json'
  out = run(
    [
      MEMORY,
      '--items=80',
      '--default_items=200',
      '--shared_items=100',
      f'--json={report_path}',
      *dm_args(with_dm),
    ],
  )
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
  results = json.loads(report_path.read_text())
  assert {(r['impl'], r['variant']) for r in results} == {
    (impl, variant)
    for impl in (('ours', 'dm') if with_dm else ('ours',))
    for variant in ('chunk1', 'default', 'shared')
  }
  assert all(r['items'] > 0 and r['rss_after_mb'] > 0 for r in results)


def test_paper_grid_quick_tf_reverb(tmp_path):
  check_grid(tmp_path, with_dm=False)


@requires_dm_reverb
def test_paper_grid_quick_side_by_side(tmp_path):
  check_grid(tmp_path, with_dm=True)


def test_memory_per_item_tiny_tf_reverb(tmp_path):
  check_memory(tmp_path, with_dm=False)


@requires_dm_reverb
def test_memory_per_item_tiny_side_by_side(tmp_path):
  check_memory(tmp_path, with_dm=True)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-v']))
