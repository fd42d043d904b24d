"""A Reverb program using StructuredWriter and PatternDataset, run unchanged by
dm-reverb 0.14 and by tf_reverb (whichever `reverb` imports) for comparison:

  PYTHON tests/interop/dm_reverb_structured.py HOST:PORT

Writes NUM_STEPS steps with the StructuredWriter into table 'my_table' of the
server at HOST:PORT, then runs the same configs through PatternDataset and
prints its output as one JSON line prefixed with 'PATTERN_DATASET '.
"""

import json
import sys

import numpy as np
import tensorflow as tf

try:
  import reverb  # dm-reverb
except ImportError:
  import tf_reverb as reverb

STEP = {'obs': np.zeros(2, np.float32), 'a': np.int32(0)}
NUM_STEPS = 12
EPISODE_LENGTH = 5


def configs():
  """The configs the test compares (shared text with the test file)."""
  structured = reverb.structured
  window = structured.pattern_from_transform(
    STEP, lambda s: {'obs': s['obs'][-3:], 'a': s['a'][-1]}
  )
  last = structured.pattern_from_transform(
    STEP, lambda s: {'obs': s['obs'][-1:], 'a': s['a'][-1]}
  )
  return [
    structured.create_config(
      window,
      'my_table',
      conditions=[structured.Condition.step_index() % 2 == 0],
    ),
    structured.create_config(
      last,
      'my_table',
      conditions=[structured.Condition.is_end_episode()],
      priority=structured.td_error(0.5, STEP, lambda s: s['a']),
    ),
  ]


def step(i):
  return {'obs': np.array([i, -i], np.float32), 'a': np.int32(i)}


def main(address: str) -> None:
  client = reverb.Client(address)
  writer = client.structured_writer(configs())
  for i in range(NUM_STEPS):
    writer.append(step(i))
    if (i + 1) % EPISODE_LENGTH == 0:
      writer.end_episode()
  writer.flush()
  print('structured writer ok')

  ids = np.arange(NUM_STEPS)
  steps = tf.data.Dataset.from_tensor_slices(
    {
      'obs': np.stack([ids, -ids], axis=1).astype(np.float32),
      'a': ids.astype(np.int32),
    }
  )
  dataset = reverb.PatternDataset(
    steps,
    configs(),
    respect_episode_boundaries=True,
    is_end_of_episode=lambda s: (s['a'] + 1) % EPISODE_LENGTH == 0,
  )
  out = [
    {'obs': x['obs'].tolist(), 'a': int(x['a'])}
    for x in dataset.as_numpy_iterator()
  ]
  print('PATTERN_DATASET ' + json.dumps(out))
  print('ALL OK')


if __name__ == '__main__':
  main(sys.argv[1])
