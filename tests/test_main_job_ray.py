"""The main job's distributed mode (examples/dqn_cartpole.py --ray --shards 2).

Actors and learner as Ray actors over a 2-shard tf_reverb.ray.ReplayCluster,
in --quick mode: bounded by environment steps (or the target return), never
by wall-clock time; the subprocess timeout only catches a hung run.
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

pytest.importorskip(
  'ray', reason='Ray is not installed (scripts/setup.sh installs it)'
)

EXAMPLE = os.path.join(ROOT, 'examples', 'dqn_cartpole.py')


def test_ray_mode_spreads_items_and_samples_over_both_shards(tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      EXAMPLE,
      '--quick',
      '--ray',
      '--shards=2',
      f'--run_dir={tmp_path}',
    ],
    capture_output=True,
    text=True,
    timeout=RUN_TIMEOUT_S,
    env=default_environment(),
  )
  print(result.stdout[-3000:], result.stderr[-3000:])  # shown on failure
  assert result.returncode == 0
  assert not noise_lines(result.stderr), noise_lines(result.stderr)
  with open(os.path.join(tmp_path, 'summary.json')) as f:
    summary = json.load(f)
  assert 'ReplayCluster of 2 shards at ipv4:' in result.stdout
  shards = summary['shards']
  assert len(shards) == 2
  for i, shard in enumerate(shards):
    assert f'Shard {i} ({shard["address"]}): {shard["inserted"]} items' in (
      result.stdout
    )
    # Both shards take inserts and serve samples (each its own rate limiter).
    assert shard['inserted'] > 500 and shard['sampled'] > 500, shards
  assert sum(s['inserted'] for s in shards) == summary['items_inserted']
  assert sum(s['sampled'] for s in shards) == summary['samples_consumed']
  assert summary['learner_steps'] > 0 and summary['weights_loaded'] > 0
  assert not summary['failed_processes']
  assert summary['best_mean_return_20'] > 2 * summary['random_policy_return']
  # Every shard checkpointed into its own directory.
  for i in range(2):
    assert any(f'/checkpoints/shard-{i}/' in c for c in summary['checkpoints'])
