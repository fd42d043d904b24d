"""The driver shared by the throughput benchmarks: tf_reverb and dm-reverb
0.14 (from a separate venv) measured by the same script in turns.

A benchmark script calls ``parse_args``; with ``--serve PORT`` it serves, with
``--measure`` it prints its results (a JSON list of dicts holding 'impl' and
'items_per_s') for one implementation, and otherwise ``best_results`` runs
``--measure`` once per implementation, ``--repeats`` times, alternating, and
keeps each figure's best run: the load of a shared machine then biases
neither side.
"""

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Dict, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args() -> argparse.Namespace:
  """The common flags of the throughput benchmarks."""
  parser = argparse.ArgumentParser()
  parser.add_argument('--seconds', type=float, default=2.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument('--dm_python',
                      help='python of a venv with dm-reverb 0.14')
  parser.add_argument('--impl', default='ours')
  parser.add_argument('--serve', type=int)
  parser.add_argument('--measure', action='store_true')
  return parser.parse_args()


def dm_python(args: argparse.Namespace) -> Any:
  """--dm_python, $TF_REVERB_DM_PYTHON, or the venv scripts/setup_dm_reverb.sh
  makes; None when dm-reverb cannot be had."""
  if args.dm_python:
    return args.dm_python
  if os.environ.get('TF_REVERB_DM_PYTHON'):
    return os.environ['TF_REVERB_DM_PYTHON']
  try:
    # Prints nothing where dm-reverb cannot exist (no Python 3.8-3.11).
    lines = subprocess.check_output(
        ['bash', os.path.join(ROOT, 'scripts', 'setup_dm_reverb.sh')],
        text=True).strip().splitlines()
  except (subprocess.CalledProcessError, OSError):
    return None
  return lines[-1] if lines else None


def best_results(script: str, args: argparse.Namespace,
                 key_fields: Tuple[str, ...]) -> Dict[Tuple[Any, ...], Dict[str, Any]]:
  """Runs `script --measure` per implementation, --repeats times in turns.

  Returns:
    The best result (highest items_per_s) per key, the key being the values
    of `key_fields` (which start with 'impl').
  """
  pythons = {'ours': sys.executable}
  if not args.no_dm:
    dm = dm_python(args)
    if dm:
      pythons['dm'] = dm
    else:
      print('dm-reverb not available; measuring tf_reverb only')
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3')
  best = {}
  for _ in range(max(1, args.repeats)):
    for impl, python in pythons.items():
      out = subprocess.run(
          [python, script, '--measure', '--impl', impl, '--seconds',
           str(args.seconds)], capture_output=True, text=True, env=env,
          check=False)
      if out.returncode != 0:
        print(f'{impl} failed:\n{out.stderr[-3000:]}')
        continue
      for result in json.loads(out.stdout.strip().splitlines()[-1]):
        key = tuple(result[field] for field in key_fields)
        if key not in best or result['items_per_s'] > best[key]['items_per_s']:
          best[key] = result
  return best
