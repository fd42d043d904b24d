"""Tables, items and a state dump shared by tf_reverb and dm-reverb 0.14.

The checkpoint interop tests (tests/test_dm_reverb_checkpoints.py) run this
with either implementation imported as `reverb`: one side fills the tables
and checkpoints them, the other restores the checkpoint, and both dump what
the restored tables hold (`dump`), which must be equal. Only Reverb's public
API is used.
"""

import numpy as np
import tensorflow as tf

# Steps written; after each step from the second on, an item of the last two
# steps goes into every table.
STEPS = 7
SIGNATURE = {
  'obs': tf.TensorSpec([2, 3], tf.float32, 'obs'),
  'a': tf.TensorSpec([2], tf.int64, 'a'),
}
# Sampled from every table before the checkpoint (times_sampled, limiter
# counters, queue/stack removals).
SAMPLED_BEFORE = 2
# Samples that show all items of a uniform or prioritized table (of 4-6).
DISCOVERY_SAMPLES = 600


def tables(reverb):
  """Every selector and rate limiter Reverb has, a signature, evictions."""
  s, r = reverb.selectors, reverb.rate_limiters
  return [
    reverb.Table(
      'fifo', s.Fifo(), s.Fifo(), 100, r.MinSize(1), signature=SIGNATURE
    ),
    reverb.Table(
      'lifo', s.Lifo(), s.Fifo(), 100, r.SampleToInsertRatio(2.0, 1, 100.0)
    ),
    reverb.Table(
      'min_heap', s.MinHeap(), s.Fifo(), 100, r.MinSize(1), max_times_sampled=3
    ),
    reverb.Table('max_heap', s.MaxHeap(), s.Lifo(), 100, r.MinSize(2)),
    reverb.Table.queue('queue', 10),
    reverb.Table.stack('stack', 10),
    reverb.Table('uniform', s.Uniform(), s.Fifo(), 4, r.MinSize(1)),
    reverb.Table(
      'prioritized', s.Prioritized(0.8), s.Fifo(), 100, r.MinSize(1)
    ),
  ]


def priority(step: int) -> float:
  """Distinct priorities in no monotone order (heaps order by them)."""
  return float((step * 7) % 11 + 1)


def fill(client, table_names):
  """Writes the items, then samples SAMPLED_BEFORE from every table."""
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for step in range(STEPS):
      writer.append(
        {
          'obs': np.float32(step) + np.float32([0, 0.5, 0.25]),
          'a': np.int64(step * 10),
        }
      )
      if step >= 1:
        for name in table_names:
          writer.create_item(
            name,
            priority(step),
            {'obs': writer.history['obs'][-2:], 'a': writer.history['a'][-2:]},
          )
    writer.flush()
  for name in table_names:
    for _ in client.sample(name, SAMPLED_BEFORE, emit_timesteps=False):
      pass


def _info(info):
  limiter = info.rate_limiter_info
  return {
    'max_size': int(info.max_size),
    'max_times_sampled': int(info.max_times_sampled),
    'current_size': int(info.current_size),
    'sampler': str(info.sampler_options).strip(),
    'remover': str(info.remover_options).strip(),
    'samples_per_insert': float(limiter.samples_per_insert),
    'min_diff': float(limiter.min_diff),
    'max_diff': float(limiter.max_diff),
    'min_size_to_sample': int(limiter.min_size_to_sample),
    'inserts': int(limiter.insert_stats.completed),
    'samples': int(limiter.sample_stats.completed),
    'signature': None
    if info.signature is None
    else {
      path: [spec.shape.as_list(), spec.dtype.name]
      for path, spec in sorted(info.signature.items())
    },
  }


def _sample(sample):
  info = sample.info
  obs, a = sample.data['obs'], sample.data['a']
  return {
    'key': int(np.asarray(info.key).reshape(-1)[0]),
    'priority': float(np.asarray(info.priority).reshape(-1)[0]),
    'times_sampled': int(np.asarray(info.times_sampled).reshape(-1)[0]),
    'probability': round(float(np.asarray(info.probability).reshape(-1)[0]), 9),
    'table_size': int(np.asarray(info.table_size).reshape(-1)[0]),
    'obs': np.asarray(obs).tolist(),
    'obs_bytes': np.asarray(obs, np.float32).tobytes().hex(),
    'a': np.asarray(a).tolist(),
  }


def dump(client, table_names):
  """What each table holds: its info, then its items as sampling shows them:
  the next samples in order for deterministic selectors (key, data,
  priority, times_sampled), every item (key -> data, priority, probability)
  for uniform and prioritized ones."""
  state = {}
  for name in table_names:
    info = client.server_info()[name]
    entry = {'info': _info(info)}
    size = int(info.current_size)
    if name in ('uniform', 'prioritized'):
      items = {}
      for sample in client.sample(
        name,
        DISCOVERY_SAMPLES,
        emit_timesteps=False,
        unpack_as_table_signature=False,
      ):
        got = _sample(_named(sample))
        items[str(got['key'])] = {
          k: got[k] for k in ('priority', 'probability', 'obs_bytes', 'a')
        }
      entry['items'] = items
    else:
      entry['next'] = (
        [
          _sample(_named(sample))
          for sample in client.sample(name, size, emit_timesteps=False)
        ]
        if size
        else []
      )
    state[name] = entry
  return state


def _named(sample):
  """A sample whose data is {'obs', 'a'}, however the client unpacked it."""
  data = sample.data
  if isinstance(data, dict):
    return sample
  # Tables without a signature: columns in flattening order ('a', 'obs').
  return sample._replace(data={'a': data[0], 'obs': data[1]})
