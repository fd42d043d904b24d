"""StructuredWriter and PatternDataset side by side with dm-reverb 0.14.

The same Reverb program (tests/interop/dm_reverb_structured.py) runs under
dm-reverb and under tf_reverb, each writing into one of our servers: the
items written and the PatternDataset output must be identical, and equal to
what the pattern semantics say. Runs when TF_REVERB_DM_PYTHON names the
python of a venv with dm-reverb (scripts/run_tests.sh sets it up).
"""

import json
import os
import subprocess
import sys


import tf_reverb as reverb
from conftest import DM_PYTHON
from conftest import requires_dm_reverb

PROGRAM = os.path.join(
  os.path.dirname(__file__), 'interop', 'dm_reverb_structured.py'
)

pytestmark = requires_dm_reverb


def expected_items():
  """(a of the newest step, obs rows, priority) of every item, by hand.

  Episodes are steps 0-4, 5-9 and 10-11: the window config fires at even
  episode step indices >= 2, the end-of-episode config (TD-error priority
  over 'a') at the last step of each ended episode.
  """
  items = []
  for episode in (range(0, 5), range(5, 10), range(10, 12)):
    for index, i in enumerate(episode):
      if index % 2 == 0 and index >= 2:
        items.append((i, [[j, -j] for j in range(i - 2, i + 1)], 1.0))
    if len(episode) == 5:
      last = episode[-1]
      items.append((last, [[last, -last]], float(last)))
  return items


def run_program(python):
  """Runs the program against a fresh server; (items, PatternDataset output)."""
  table = reverb.Table(
    'my_table',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
    max_times_sampled=1,
  )
  with reverb.Server([table]) as server:
    result = subprocess.run(
      [python, PROGRAM, f'localhost:{server.port}'],
      capture_output=True,
      text=True,
      timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'ALL OK' in result.stdout
    client = reverb.Client(f'localhost:{server.port}')
    size = client.server_info()['my_table'].current_size
    items = []
    for sample in client.sample('my_table', size, emit_timesteps=False):
      a, obs = sample.data  # dm-tree order: 'a', 'obs'
      items.append((int(a), obs.tolist(), sample.info.priority))
  output = json.loads(
    next(
      line
      for line in result.stdout.splitlines()
      if line.startswith('PATTERN_DATASET ')
    )[len('PATTERN_DATASET ') :]
  )
  return items, output


def test_same_program_same_items_under_dm_reverb_and_tf_reverb():
  dm_items, dm_dataset = run_program(DM_PYTHON)
  our_items, our_dataset = run_program(sys.executable)
  assert dm_items == expected_items()
  assert our_items == dm_items
  assert our_dataset == dm_dataset
  assert [x['a'] for x in our_dataset] == [a for a, _, _ in expected_items()]
