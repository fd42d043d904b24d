"""The main job (examples/dqn_cartpole.py) end to end, in --quick mode.

Every run is bounded by environment steps or episodes, never by wall-clock
time, so the test means the same on a slow or busy machine; the subprocess
timeout only catches a hung run.
"""

import json
import os
import subprocess
import sys

import tf_reverb as reverb
from conftest import ROOT
from test_quiet_output import RUN_TIMEOUT_S
from test_quiet_output import default_environment
from test_quiet_output import noise_lines

EXAMPLE = os.path.join(ROOT, 'examples', 'dqn_cartpole.py')


def _run(run_dir, *flags):
  result = subprocess.run(
    [sys.executable, EXAMPLE, '--quick', f'--run_dir={run_dir}', *flags],
    capture_output=True,
    text=True,
    timeout=RUN_TIMEOUT_S,
    env=default_environment(),
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  # Quiet: no TensorFlow / absl start-up notices, no Keras warnings we cause.
  assert not noise_lines(result.stderr), result.stderr[-3000:]
  with open(os.path.join(run_dir, 'summary.json')) as f:
    return json.load(f), result.stdout


def test_quick_run_moves_data_through_every_stage_and_learns(
  tmp_path, binary_server
):
  # --quick stops at a mean return of 100 or after 20000 environment steps.
  summary, stdout = _run(tmp_path)
  print(json.dumps(summary, indent=1), stdout[-3000:])  # shown on failure
  assert 'return(last 20)' in stdout and 'Learning curve' in stdout
  assert summary['items_inserted'] > 1000
  assert summary['samples_consumed'] > 1000
  assert summary['learner_steps'] > 0 and summary['priority_updates'] > 0
  assert summary['weights_published'] > 0 and summary['weights_loaded'] > 0
  assert not summary['failed_processes']
  # Learning: well above a random policy (~22) at its best 20-episode mean.
  assert summary['best_mean_return_20'] > 2 * summary['random_policy_return']
  assert os.path.getsize(summary['plot']) > 10_000

  # The server's checkpoint exists and restores into a fresh server.
  assert summary['checkpoints'], 'no checkpoint was written'
  server = binary_server(
    f'--config_file={tmp_path}/server.json',
    '--port=0',
    f'--checkpoint_dir={tmp_path}/checkpoints',
    '--checkpoint_on_exit=false',
  )
  info = reverb.Client(server.address).server_info(timeout=30)
  assert info['replay'].current_size > 0
  assert info['replay'].signature is not None
  server.kill()

  # --resume continues: the replay table and the episode history carry over.
  # Bounded by new episodes (the actors may take long to start on a loaded
  # machine; a time budget could end the run before they play at all).
  resumed, stdout = _run(
    tmp_path, '--resume', '--episodes=10', '--target_return=1000'
  )
  assert 'Stopping: 10 episodes were played' in stdout
  assert resumed['episodes'] > summary['episodes']
  assert resumed['env_steps'] > summary['env_steps']
  assert resumed['items_inserted'] > summary['items_inserted']
