"""A sharded table is sampled as one table would be.

Two reverb_server shards hold one table each with very different weights
(prioritized: 10 items of priority 10 on one, 10 of priority 1 on the other,
a 10x difference in priority mass; uniform: 30 items against 10). Sampling
through the `ipv4:a,b` target must follow the distribution over all items
(chi-square test against the exact one), report each sample's probability
over all shards and the table size summed over shards: through
Client.sample, NumpyIterator and the TF dataset.
"""

import math
import sys
from typing import Dict, List

import numpy as np
import pytest

import tf_reverb as reverb
from shard_processes import ShardProcess
from shard_processes import ipv4_target

_LIMITER = (
  'rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 '
  'min_diff: -1e9 max_diff: 1e9 }'
)
CONFIG = f'''
tables {{ table_name: "p" sampler {{ prioritized {{ priority_exponent: 1 }} }}
         remover {{ fifo: true }} max_size: 1000 {_LIMITER} }}
tables {{ table_name: "u" sampler {{ uniform: true }}
         remover {{ fifo: true }} max_size: 1000 {_LIMITER} }}
tables {{ table_name: "big" sampler {{ uniform: true }}
         remover {{ fifo: true }} max_size: 1000 {_LIMITER} }}
'''
SAMPLES = 4000


def _chi_square_bound(dof: int, z: float = 4.75) -> float:
  """The chi-square value a fit exceeds with probability ~1e-6 (z = 4.75):
  Wilson-Hilferty's approximation of the quantile."""
  h = 2.0 / (9.0 * dof)
  return dof * (1.0 - h + z * math.sqrt(h)) ** 3


@pytest.fixture(scope='module')
def shards():
  """Shard 0: p has 10 items of priority 10, u 30 items; shard 1: p has 10
  of priority 1, u 10 items. Item values: shard * 1000 + index."""
  processes = [ShardProcess(config=CONFIG) for _ in range(2)]
  try:
    for shard, (priority, uniform_items) in enumerate([(10.0, 30), (1.0, 10)]):
      client = reverb.Client(processes[shard].address)
      for i in range(10):
        client.insert([np.int64(shard * 1000 + i)], priorities={'p': priority})
      for i in range(uniform_items):
        client.insert([np.int64(shard * 1000 + i)], priorities={'u': 1.0})
    yield processes
  finally:
    for process in processes:
      process.kill()


def _exact(table: str) -> Dict[int, float]:
  if table == 'p':
    weights = {i: 10.0 for i in range(10)}
    weights.update({1000 + i: 1.0 for i in range(10)})
  else:
    weights = {i: 1.0 for i in range(30)}
    weights.update({1000 + i: 1.0 for i in range(10)})
  total = sum(weights.values())
  return {value: w / total for value, w in weights.items()}


def _check(table: str, values: List[int], probabilities, sizes) -> None:
  exact = _exact(table)
  counts = {value: 0 for value in exact}
  for value in values:
    counts[value] += 1
  n = len(values)
  chi_square = sum((counts[v] - n * p) ** 2 / (n * p) for v, p in exact.items())
  assert chi_square < _chi_square_bound(len(exact) - 1), (chi_square, counts)
  # Each sample's probability is its item's over all shards.
  for value, probability in zip(values, probabilities):
    assert probability == pytest.approx(exact[value], rel=1e-9), value
  assert set(int(s) for s in sizes) == {len(exact)}


@pytest.mark.parametrize('table', ['p', 'u'])
def test_client_sample_follows_the_whole_table(shards, table):
  client = reverb.Client(ipv4_target(shards))
  values, probabilities, sizes = [], [], []
  for sample in client.sample(table, SAMPLES, emit_timesteps=False):
    values.append(int(np.asarray(sample.data[0]).reshape(-1)[0]))
    probabilities.append(
      float(np.asarray(sample.info.probability).reshape(-1)[0])
    )
    sizes.append(int(np.asarray(sample.info.table_size).reshape(-1)[0]))
  _check(table, values, probabilities, sizes)


def test_numpy_iterator_follows_the_whole_table(shards):
  iterator = reverb.NumpyIterator(
    ipv4_target(shards), 'p', batch_size=50, max_samples=SAMPLES
  )
  values, probabilities, sizes = [], [], []
  for batch in iterator:
    values += [int(v) for v in np.asarray(batch.data[0]).reshape(-1)]
    probabilities += list(np.asarray(batch.info.probability, np.float64))
    sizes += list(np.asarray(batch.info.table_size))
  assert len(values) == SAMPLES
  _check('p', values, probabilities, sizes)


def test_dataset_follows_the_whole_table(shards):
  tf = pytest.importorskip('tensorflow')
  dataset = reverb.TrajectoryDataset(
    ipv4_target(shards),
    'p',
    dtypes=(tf.int64,),
    shapes=(tf.TensorShape([1]),),
    max_in_flight_samples_per_worker=10,
  ).take(SAMPLES)
  values, probabilities, sizes = [], [], []
  for sample in dataset:
    values.append(int(sample.data[0].numpy()[0]))
    probabilities.append(float(sample.info.probability.numpy()))
    sizes.append(int(sample.info.table_size.numpy()))
  _check('p', values, probabilities, sizes)


def test_a_priority_update_on_one_shard_moves_the_split(shards):
  """After shard 1's items are raised to priority 10 (equal mass), samples
  split evenly; the weights follow from ServerInfo and the samples."""
  shard1 = reverb.Client(shards[1].address)
  keys = [
    int(np.asarray(s.info.key).reshape(-1)[0])
    for s in shard1.sample('p', 200, emit_timesteps=False)
  ]
  shard1.mutate_priorities('p', updates={k: 10.0 for k in set(keys)})
  try:
    assert len(set(keys)) == 10
    client = reverb.Client(ipv4_target(shards))
    values = [
      int(np.asarray(s.data[0]).reshape(-1)[0])
      for s in client.sample('p', SAMPLES, emit_timesteps=False)
    ]
    on_shard1 = sum(1 for v in values if v >= 1000)
    # Binomial(4000, 1/2): 5 standard deviations are 158.
    assert abs(on_shard1 - SAMPLES / 2) < 5 * math.sqrt(SAMPLES / 4)
  finally:
    shard1.mutate_priorities('p', updates={k: 1.0 for k in set(keys)})


def test_large_items_fill_partial_batches(shards):
  """Items of 256 KiB: a shard serves a request in several batches (a
  batch stops at 1 MiB of chunks), which the sharded sampler takes as they
  come."""
  rng = np.random.default_rng(0)
  for shard in shards:
    direct = reverb.Client(shard.address)
    for _ in range(8):
      direct.insert(
        [rng.integers(0, 2**31, 65536, dtype=np.int32)], priorities={'big': 1.0}
      )
  iterator = reverb.NumpyIterator(
    ipv4_target(shards),
    'big',
    batch_size=16,
    max_in_flight_samples_per_worker=32,
    max_samples=64,
  )
  sizes = []
  for batch in iterator:
    assert np.asarray(batch.data[0]).shape[1:] == (1, 65536)
    sizes += list(np.asarray(batch.info.table_size))
  assert len(sizes) == 64
  assert set(int(s) for s in sizes) == {16}


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-v']))
