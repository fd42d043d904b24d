"""The main job without TensorFlow: --framework torch and --framework jax.

examples/dqn_cartpole.py --quick with PyTorch or JAX agents (actors writing
with the TrajectoryWriter, the learner reading through tf_reverb.torch /
tf_reverb.jax), run where TensorFlow cannot be imported: a directory on
PYTHONPATH holds a `tensorflow` package whose import fails, and the spawned
actors and learner inherit it; also in the --ray mode. Every run is bounded
by environment steps (or the target return), never by wall-clock time; the
subprocess timeout only catches a hung run.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_quiet_output import RUN_TIMEOUT_S
from test_quiet_output import default_environment
from test_quiet_output import noise_lines

EXAMPLE = os.path.join(ROOT, 'examples', 'dqn_cartpole.py')


def _without_tensorflow(tmp_path) -> dict:
  """The environment of a run in which `import tensorflow` fails."""
  package = tmp_path / 'no_tensorflow' / 'tensorflow'
  package.mkdir(parents=True)
  (package / '__init__.py').write_text(
    "raise ImportError('tensorflow is blocked in this test')\n"
  )
  environment = default_environment()
  environment['PYTHONPATH'] = os.pathsep.join(
    p for p in (str(package.parent), environment.get('PYTHONPATH')) if p
  )
  return environment


def _run(tmp_path, *flags):
  run_dir = tmp_path / 'run'
  result = subprocess.run(
    [sys.executable, EXAMPLE, '--quick', f'--run_dir={run_dir}', *flags],
    capture_output=True,
    text=True,
    timeout=RUN_TIMEOUT_S,
    env=_without_tensorflow(tmp_path),
  )
  print(result.stdout[-3000:], result.stderr[-3000:])  # shown on failure
  assert result.returncode == 0
  assert not noise_lines(result.stderr), noise_lines(result.stderr)
  with open(run_dir / 'summary.json') as f:
    return json.load(f), result.stdout


@pytest.mark.parametrize(
  'framework, name, flags',
  [
    ('torch', 'PyTorch', ()),
    ('jax', 'JAX', ()),
    # The distributed mode: Ray actors over a 2-shard ReplayCluster.
    ('torch', 'PyTorch', ('--ray', '--shards=2')),
  ],
  ids=['torch', 'jax', 'torch-ray'],
)
def test_quick_run_learns_without_tensorflow(tmp_path, framework, name, flags):
  pytest.importorskip(framework, reason=f'{framework} is not installed')
  if flags:
    pytest.importorskip('ray', reason='Ray is not installed')
  # --quick stops at a mean return of 100 or after 20000 environment steps.
  summary, stdout = _run(tmp_path, f'--framework={framework}', *flags)
  print(json.dumps(summary, indent=1))  # shown on failure
  assert f'({name} agent)' in stdout and 'Learning curve' in stdout
  assert f'{name} training steps' in stdout
  assert summary['framework'] == framework
  assert summary['items_inserted'] > 1000
  assert summary['samples_consumed'] > 1000
  assert summary['learner_steps'] > 0 and summary['priority_updates'] > 0
  assert summary['weights_published'] > 0 and summary['weights_loaded'] > 0
  assert not summary['failed_processes']
  # Learning: well above a random policy (~22) at its best 20-episode mean.
  assert summary['best_mean_return_20'] > 2 * summary['random_policy_return']
  assert summary['checkpoints'], 'no checkpoint was written'
  # No process imported TensorFlow (it could not have: the import fails),
  # and the learner, every actor and the orchestrator reported so.
  assert summary['tensorflow_imported'] is False
  assert summary['tensorflow_checked_in'] == [
    'actor-0',
    'actor-1',
    'learner',
    'orchestrator',
  ]
  assert os.path.getsize(summary['plot']) > 10_000
  if flags:  # both shards took inserts and served samples
    assert len(summary['shards']) == 2
    for shard in summary['shards']:
      assert shard['inserted'] > 500 and shard['sampled'] > 500, summary
