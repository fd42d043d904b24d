"""Reproducible sampling: Table(seed=...) and a seed in the server's config
give the same picks for the same operations, run after run and after a
checkpoint restore; unseeded tables do not."""

import numpy as np

import tf_reverb as reverb

_PRIORITIES = [float(1 + (i * 7) % 13) for i in range(40)]


def _table(seed, sampler=None):
  return reverb.Table(
    't',
    sampler=sampler or reverb.selectors.Prioritized(0.8),
    remover=reverb.selectors.Fifo(),
    max_size=1000,
    rate_limiter=reverb.rate_limiters.MinSize(1),
    seed=seed,
  )


def _fill(client):
  for i, priority in enumerate(_PRIORITIES):
    client.insert(np.int64(i), {'t': priority})


def _draws(client, n):
  """The values of `n` samples, in the order the table picked them."""
  return [
    int(s.data[0][0])
    for s in client.sample('t', num_samples=n, emit_timesteps=False)
  ]


def _run(seed, n=200, sampler=None):
  with reverb.Server([_table(seed, sampler)]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client)
    return _draws(client, n)


def test_the_same_seed_samples_the_same_items_in_the_same_order():
  for make_sampler in (
    lambda: reverb.selectors.Prioritized(0.8),
    reverb.selectors.Uniform,
  ):
    first = _run(11, sampler=make_sampler())
    assert len(set(first)) > 20  # really random over 40 items
    assert _run(11, sampler=make_sampler()) == first


def test_other_seeds_and_no_seed_sample_otherwise():
  first = _run(11)
  assert _run(12) != first
  assert _run(None) != first


def test_a_restored_seeded_table_goes_on_where_the_checkpoint_stopped(
  tmp_path,
):
  checkpointer = reverb.checkpointers.DefaultCheckpointer(str(tmp_path))
  with reverb.Server([_table(5)], checkpointer=checkpointer) as server:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client)
    _draws(client, 30)
    client.checkpoint()
    expected = _draws(client, 100)
  # The new server's table has no seed: the checkpoint's (and its
  # generators' states) come back with it.
  with reverb.Server(
    [_table(None)],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
  ) as server:
    assert _draws(reverb.Client(f'localhost:{server.port}'), 100) == expected


def test_the_seed_field_of_the_server_config(binary_server):
  config = """
  tables {
    table_name: "t"
    sampler { uniform: true }
    remover { fifo: true }
    max_size: 1000
    rate_limiter { samples_per_insert: 1 min_size_to_sample: 1
                   min_diff: -1e9 max_diff: 1e9 }
    seed: 3
  }
  """
  runs = []
  for _ in range(2):
    server = binary_server(f'--config={config}', '--port=0')
    client = reverb.Client(server.address)
    _fill(client)
    runs.append(_draws(client, 100))
    server.terminate()
  assert runs[0] == runs[1]
  assert _run(3, n=100, sampler=reverb.selectors.Uniform()) == runs[0]
