"""benchmarks/torch_jax_replay.py still runs: every system, both sizes, --quick
on tiny tables. Nothing here asserts a time.

The frameworks it compares with (torchrl, tensordict, jax, flashbax) are
benchmark-only (benchmarks/requirements-frameworks.txt, not installed by
scripts/setup.sh): the test is skipped where one of them is missing.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = os.path.join(ROOT, 'benchmarks', 'torch_jax_replay.py')
FRAMEWORKS = ('torch', 'tensordict', 'torchrl', 'jax', 'flashbax', 'ray')
MISSING = [m for m in FRAMEWORKS if importlib.util.find_spec(m) is None]
SYSTEMS = {
  'tf_reverb.torch',
  'torchrl tensor',
  'torchrl memmap',
  'torchrl ray',
  'tf_reverb.jax',
  'flashbax item',
  'flashbax flat',
}
# A hang guard only: the run takes about a minute (most of it Ray's start).
TIMEOUT_S = 600


@pytest.mark.skipif(
  bool(MISSING),
  reason=f'benchmark-only frameworks missing: {", ".join(MISSING)} '
  '(pip install -r benchmarks/requirements-frameworks.txt)',
)
def test_torch_jax_replay_quick(tmp_path):
  report_path = tmp_path / 'report.json'
  run = subprocess.run(
    [
      sys.executable,
      BENCHMARK,
      '--quick',
      '--no_install',
      '--small_transitions=600',
      '--large_transitions=300',
      f'--json={report_path}',
    ],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
    check=False,
  )
  assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
  assert 'machine:' in run.stdout
  report = json.loads(report_path.read_text())
  assert [s['size'] for s in report['sizes']] == ['small', 'large']
  for size in report['sizes']:
    assert set(size['summary']) == SYSTEMS
    for name, row in size['summary'].items():
      assert row['samples_per_s'] > 0, (size['size'], name)
    assert len(size['ratios']) == 5
    assert f'{size["size"]}: medians of 1 round' in run.stdout
  assert 'tf_reverb.torch / torchrl ray' in run.stdout
