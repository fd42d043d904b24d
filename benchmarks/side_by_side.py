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
import threading
import time
import urllib.request
from typing import Any, Dict, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args() -> argparse.Namespace:
  """The common flags of the throughput benchmarks."""
  parser = argparse.ArgumentParser()
  parser.add_argument('--seconds', type=float, default=2.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--no_dm', action='store_true')
  parser.add_argument(
    '--dm_python', help='python of a venv with dm-reverb 0.14'
  )
  parser.add_argument('--impl', default='ours')
  parser.add_argument('--serve', type=int)
  parser.add_argument('--measure', action='store_true')
  parser.add_argument(
    '--metrics',
    action='store_true',
    help='also measure tf_reverb with Prometheus metrics on '
    '(impl "ours+metrics": Server(metrics_port=0), scraped '
    'every second)',
  )
  parser.add_argument(
    '--baseline',
    help='also measure the tf_reverb checkout at this path '
    '(its own .venv and build) as impl "baseline", e.g. the '
    'main branch, to see what this build costs or saves',
  )
  return parser.parse_args()


# Seconds between two scrapes of a metrics-on server (Prometheus' default
# is 15 s: this is harsher).
SCRAPE_INTERVAL_S = 1.0


def implementations(args: argparse.Namespace) -> Dict[str, str]:
  """impl -> python: ours, ours+metrics with --metrics, dm unless --no_dm."""
  pythons = {'ours': sys.executable}
  if args.metrics:
    pythons['ours+metrics'] = sys.executable
  if args.baseline:
    pythons['baseline'] = os.path.join(args.baseline, '.venv', 'bin', 'python')
  return pythons


def environment(
  args: argparse.Namespace, impl: str, env: Dict[str, str]
) -> Dict[str, str]:
  """`env` with PYTHONPATH at the checkout `impl` is measured from."""
  if impl == 'baseline':
    return dict(env, PYTHONPATH=os.path.abspath(args.baseline))
  return env


def make_server(reverb: Any, impl: str, tables: Any, port: Any = None) -> Any:
  """reverb.Server(tables, port); for ours+metrics with metrics on and a
  daemon thread scraping /metrics every SCRAPE_INTERVAL_S."""
  if impl != 'ours+metrics':
    return reverb.Server(tables, port=port)
  server = reverb.Server(tables, port=port, metrics_port=0)
  url = f'http://127.0.0.1:{server.metrics_port}/metrics'

  def scrape_forever():
    while True:
      with urllib.request.urlopen(url, timeout=30) as response:
        response.read()
      time.sleep(SCRAPE_INTERVAL_S)

  threading.Thread(target=scrape_forever, daemon=True).start()
  return server


def print_metrics_cost(by_key: Dict[Tuple[Any, ...], Dict[str, Any]]) -> None:
  """items/s of ours+metrics relative to ours, per figure (when measured)."""
  for impl, reference, title in (
    ('ours+metrics', 'ours', 'metrics on vs off'),
    ('ours', 'baseline', 'this build (metrics off) vs --baseline'),
  ):
    rows = [(key, r) for key, r in by_key.items() if key[0] == impl]
    ratios = []
    for key, r in rows:
      off = by_key.get((reference,) + key[1:])
      if not off:
        continue
      if not ratios:
        print(f'{title} (best of the repeats each):')
      ratio = r['items_per_s'] / off['items_per_s']
      ratios.append(ratio)
      print(
        f'  {" / ".join(str(k) for k in key[1:]):60} {reference} '
        f'{off["items_per_s"]:12,.0f}  {impl} {r["items_per_s"]:12,.0f}  '
        f'{100 * (ratio - 1):+6.1f}%'
      )
    if ratios:
      ratios.sort()
      print(f'  median change {100 * (ratios[len(ratios) // 2] - 1):+.1f}%')


def dm_python(args: argparse.Namespace) -> Any:
  """--dm_python, $TF_REVERB_DM_PYTHON, or the venv scripts/setup_dm_reverb.sh
  makes; None when dm-reverb cannot be had."""
  if args.dm_python:
    return args.dm_python
  if os.environ.get('TF_REVERB_DM_PYTHON'):
    return os.environ['TF_REVERB_DM_PYTHON']
  try:
    # Prints nothing where dm-reverb cannot exist (no Python 3.8-3.11).
    lines = (
      subprocess.check_output(
        ['bash', os.path.join(ROOT, 'scripts', 'setup_dm_reverb.sh')], text=True
      )
      .strip()
      .splitlines()
    )
  except (subprocess.CalledProcessError, OSError):
    return None
  return lines[-1] if lines else None


def best_results(
  script: str, args: argparse.Namespace, key_fields: Tuple[str, ...]
) -> Dict[Tuple[Any, ...], Dict[str, Any]]:
  """Runs `script --measure` per implementation, --repeats times in turns.

  Returns:
    The best result (highest items_per_s) per key, the key being the values
    of `key_fields` (which start with 'impl').
  """
  pythons = implementations(args)
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
        [
          python,
          script,
          '--measure',
          '--impl',
          impl,
          '--seconds',
          str(args.seconds),
        ],
        capture_output=True,
        text=True,
        env=environment(args, impl, env),
        check=False,
      )
      if out.returncode != 0:
        print(f'{impl} failed:\n{out.stderr[-3000:]}')
        continue
      for result in json.loads(out.stdout.strip().splitlines()[-1]):
        key = tuple(result[field] for field in key_fields)
        if key not in best or result['items_per_s'] > best[key]['items_per_s']:
          best[key] = result
  return best
