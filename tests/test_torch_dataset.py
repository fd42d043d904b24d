"""tf_reverb.torch: ReplayDataset, DataLoader, priorities and torch steps.

Real servers on real ports. Issue 29: batches of torch.Tensor made from the
sampler's buffers without a copy, DataLoader workers that split max_samples
exactly and never share an item of a once-sampled table, pin_memory and
device, priority updates from tensors, writers taking CPU tensors of every
dtype, and all of it where TensorFlow cannot be imported.
"""

import sys
import warnings

import numpy as np
import pytest

from conftest import run_python
from conftest import run_python_without_tensorflow
import framework_steps
import tf_reverb as reverb
from tf_reverb import _dtypes
from tf_reverb import numpy_iterator

if sys.version_info[:2] == (3, 11):
  import torch  # scripts/setup.sh installs it on Python 3.11
else:
  torch = pytest.importorskip(
    'torch',
    reason='scripts/setup.sh installs PyTorch (a CPU build on local disk) '
    'on Python 3.11 only; elsewhere pip would fetch a multi-GB CUDA build',
  )

import tf_reverb.torch  # noqa: E402  pylint: disable=g-import-not-at-top

from tf_reverb.torch import ReplayDataset  # noqa: E402
from tf_reverb.torch import update_priorities  # noqa: E402

SIGNATURE = {'action': None, 'obs': None}  # the structure: sorted keys


@pytest.fixture
def server():
  """'queue' (FIFO, each item sampled once), 'once' (uniform, each item
  sampled at most once) and 'prio' (prioritized, sampled any number of
  times)."""
  tables = [
    reverb.Table.queue('queue', 1000),
    reverb.Table(
      'once',
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      1000,
      reverb.rate_limiters.MinSize(1),
      max_times_sampled=1,
    ),
    reverb.Table(
      'prio',
      reverb.selectors.Prioritized(1.0),
      reverb.selectors.Fifo(),
      1000,
      reverb.rate_limiters.MinSize(1),
    ),
  ]
  with reverb.Server(tables, host='127.0.0.1') as s:
    yield s


def _address(server):
  return framework_steps.address(server)


def _fill(server, table, n):
  """Items i = 0..n-1: obs float32 [3] of i, action int64 i (squeezed)."""
  return framework_steps.fill(server, table, n, np.int64)


def test_batches_are_tensors_over_the_samplers_buffers(server, monkeypatch):
  _fill(server, 'queue', 12)
  # Record the numpy arrays NumpyIterator hands over.
  produced = []
  original = numpy_iterator.NumpyIterator._next_flat

  def recording_next_flat(self):
    info, columns = original(self)
    produced.append(self._assemble(info, columns))
    return info, columns

  monkeypatch.setattr(
    numpy_iterator.NumpyIterator, '_next_flat', recording_next_flat
  )
  dataset = ReplayDataset(
    _address(server),
    'queue',
    batch_size=4,
    max_samples=12,
    num_workers_per_iterator=1,
    structure=SIGNATURE,
  )
  assert isinstance(dataset, torch.utils.data.IterableDataset)
  batches = list(dataset)
  assert len(batches) == 3 and len(produced) == 3
  actions = []
  for batch, arrays in zip(batches, produced):
    assert isinstance(batch, reverb.ReplaySample)
    assert isinstance(batch.info, reverb.SampleInfo)
    obs, action = batch.data['obs'], batch.data['action']
    assert obs.dtype == torch.float32 and obs.shape == (4, 3)
    assert action.dtype == torch.int64 and action.shape == (4,)
    actions += action.tolist()
    np.testing.assert_array_equal(
      obs.numpy(), np.repeat(action.numpy().astype(np.float32), 3).reshape(4, 3)
    )
    info = batch.info
    assert info.key.dtype == torch.uint64 and info.key.shape == (4,)
    assert info.probability.dtype == torch.float64
    assert info.table_size.dtype == torch.int64
    assert info.priority.dtype == torch.float64
    assert info.times_sampled.dtype == torch.int32
    # No copy: each tensor is the sampler's array.
    assert obs.data_ptr() == arrays.data['obs'].ctypes.data
    assert action.data_ptr() == arrays.data['action'].ctypes.data
    assert info.key.data_ptr() == arrays.info.key.ctypes.data
    assert info.key.tolist() == arrays.info.key.tolist()
  assert sorted(actions) == list(range(12))


def test_string_columns_stay_numpy_object_arrays(server):
  client = reverb.Client(_address(server))
  client.insert(
    [np.array([b'ab', b'cde'], object), np.float32(1)], {'queue': 1}
  )
  batch = next(iter(ReplayDataset(_address(server), 'queue', 1, max_samples=1)))
  assert isinstance(batch.data[0], np.ndarray)
  assert batch.data[0].dtype == object
  assert batch.data[0].tolist() == [[[b'ab', b'cde']]]
  assert isinstance(batch.data[1], torch.Tensor)


def test_each_iter_starts_its_own_sampler(server):
  _fill(server, 'prio', 5)
  dataset = ReplayDataset(_address(server), 'prio', 5, max_samples=10)
  assert sum(len(b.info.key) for b in dataset) == 10
  assert sum(len(b.info.key) for b in dataset) == 10


def test_dataloader_in_process(server):
  _fill(server, 'queue', 20)
  dataset = ReplayDataset(
    _address(server), 'queue', 6, max_samples=20, structure=SIGNATURE
  )
  loader = torch.utils.data.DataLoader(dataset, batch_size=None)
  sizes, actions = [], []
  for batch in loader:
    assert isinstance(batch.data['obs'], torch.Tensor)
    sizes.append(len(batch.data['action']))
    actions += batch.data['action'].tolist()
  assert sizes == [6, 6, 6, 2]
  assert sorted(actions) == list(range(20))


def test_dataloader_workers_split_max_samples_without_duplicates(server):
  # 'once' samples every item at most once, so an item seen twice would
  # show. 31 items over two workers: shares of 16 and 15.
  _fill(server, 'once', 31)
  dataset = ReplayDataset(
    _address(server),
    'once',
    4,
    max_samples=31,
    structure=SIGNATURE,
    # A bound should a worker be starved; never reached when it works.
    rate_limiter_timeout_ms=30_000,
  )
  loader = torch.utils.data.DataLoader(
    dataset,
    batch_size=None,
    num_workers=2,
    multiprocessing_context='spawn',
  )
  actions, keys = [], []
  for batch in loader:
    assert batch.info.key.dtype == torch.uint64
    actions += batch.data['action'].tolist()
    keys += batch.info.key.tolist()
  assert sorted(actions) == list(range(31))
  assert len(set(keys)) == 31
  info = reverb.Client(_address(server)).server_info()['once']
  assert info.current_size == 0  # every item sampled once, then removed


def test_worker_shares_add_up_exactly():
  # pylint: disable=protected-access
  for total in (1, 2, 7, 31, 100):
    for workers in (1, 2, 3, 8):
      shares = [
        tf_reverb.torch._share(total, i, workers) for i in range(workers)
      ]
      assert sum(shares) == total
      assert max(shares) - min(shares) <= 1
  assert tf_reverb.torch._share(-1, 0, 4) == -1


def test_worker_with_nothing_to_sample_ends_at_once(server):
  _fill(server, 'once', 1)
  dataset = ReplayDataset(_address(server), 'once', 4, max_samples=1)
  loader = torch.utils.data.DataLoader(
    dataset, batch_size=None, num_workers=2, multiprocessing_context='spawn'
  )
  assert [len(b.info.key) for b in loader] == [1]


def test_forked_worker_says_to_spawn(server):
  dataset = ReplayDataset(_address(server), 'queue', 4, max_samples=4)
  loader = torch.utils.data.DataLoader(
    dataset, batch_size=None, num_workers=1, multiprocessing_context='fork'
  )
  with pytest.raises(RuntimeError, match="multiprocessing_context='spawn'"):
    next(iter(loader))


def test_pin_memory_without_an_accelerator_warns_once_and_yields(server):
  _fill(server, 'prio', 4)
  tf_reverb.torch._warned.clear()  # pylint: disable=protected-access
  dataset = ReplayDataset(
    _address(server), 'prio', 2, max_samples=4, pin_memory=True
  )
  if tf_reverb.torch._accelerator_available():  # pylint: disable=protected-access
    batches = list(dataset)
    assert all(b.data[0].is_pinned() for b in batches)
    return
  with pytest.warns(UserWarning, match='no accelerator'):
    batches = list(dataset)
  assert [len(b.info.key) for b in batches] == [2, 2]
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    assert len(list(dataset)) == 2  # warned once only


def test_device_cpu_changes_nothing(server, monkeypatch):
  _fill(server, 'queue', 4)
  moved = []
  monkeypatch.setattr(
    tf_reverb.torch,
    '_moved_to',
    lambda device, convert: moved.append(device),
  )
  dataset = ReplayDataset(
    _address(server), 'queue', 2, max_samples=4, device='cpu'
  )
  batches = list(dataset)
  assert not moved
  assert [b.data[0].device.type for b in batches] == ['cpu', 'cpu']


@pytest.mark.parametrize('prefetch', [1, 2, 3])
def test_device_moves_batches_ahead_of_use(server, monkeypatch, prefetch):
  # The meta device stands in for an accelerator: the same moves, no data.
  _fill(server, 'queue', 10)
  calls = []
  original = numpy_iterator.NumpyIterator._next_flat

  def counting_next_flat(self):
    calls.append(1)
    return original(self)

  monkeypatch.setattr(
    numpy_iterator.NumpyIterator, '_next_flat', counting_next_flat
  )
  dataset = ReplayDataset(
    _address(server),
    'queue',
    2,
    max_samples=10,
    device='meta',
    prefetch_to_device=prefetch,
  )
  iterator = iter(dataset)
  first = next(iterator)
  # `prefetch` batches were sampled and moved before the first was handed
  # out.
  assert len(calls) == prefetch
  assert first.data[0].device.type == 'meta'
  assert first.info.key.device.type == 'meta'
  assert first.data[1].shape == (2, 3)  # obs
  rest = list(iterator)
  assert len(rest) == 4
  assert all(b.data[1].device.type == 'meta' for b in rest)


def test_invalid_options_raise_at_construction():
  with pytest.raises(ValueError, match='batch_size'):
    ReplayDataset('localhost:1', 't', 0)
  with pytest.raises(ValueError, match='prefetch_to_device'):
    ReplayDataset('localhost:1', 't', 1, prefetch_to_device=0)
  with pytest.raises(ValueError, match='max_samples'):
    ReplayDataset('localhost:1', 't', 1, max_samples=0)


def test_priority_updates_from_tensors(server):
  client = _fill(server, 'prio', 8)
  address = _address(server)
  batch = next(iter(ReplayDataset(address, 'prio', 8, max_samples=8)))
  keys = torch.unique(batch.info.key)  # sampled with replacement
  n = len(keys)
  assert keys.dtype == torch.uint64
  assert set(client.lookup('prio', keys.tolist()).items) == set(keys.tolist())

  def priorities():
    items = client.lookup('prio', keys.tolist()).items
    return [items[k].info.priority for k in keys.tolist()]

  new = torch.arange(1, n + 1, dtype=torch.float32, requires_grad=True) * 0.5
  update_priorities(client, 'prio', keys, new)
  assert priorities() == pytest.approx([0.5 * i for i in range(1, n + 1)])
  # int64 views of the keys (the bits of each uint64 key) and an address.
  update_priorities(address, 'prio', keys.view(torch.int64), torch.ones(n))
  assert priorities() == [1.0] * n
  # Client.mutate_priorities takes a (keys, priorities) pair and tensors
  # of keys to delete; the dict form of Reverb's API still works.
  client.mutate_priorities(
    'prio', updates=(keys, torch.full([n], 3.0, dtype=torch.float64))
  )
  assert priorities() == [3.0] * n
  # tolist(), not int(keys[0]): torch converts a uint64 element through
  # int64, which fails for keys of 2**63 and above (random keys: the smallest
  # of the batch is that large once in 2**n runs).
  client.mutate_priorities('prio', updates={keys.tolist()[0]: 4.0})
  assert priorities()[0] == 4.0
  client.mutate_priorities('prio', deletes=keys[:1])
  assert client.lookup('prio', keys.tolist()).missing == keys[:1].tolist()
  with pytest.raises(ValueError, match='same number'):
    update_priorities(client, 'prio', keys, torch.ones(n + 1))
  with pytest.raises(ValueError, match='integers'):
    update_priorities(client, 'prio', keys.double(), torch.ones(n))


def test_keys_beyond_int64_round_trip_losslessly():
  keys = torch.from_numpy(np.array([2**64 - 1, 2**63, 5], np.uint64))
  for form in (keys, keys.view(torch.int64), keys.tolist()):
    pairs = _dtypes.priority_updates(form, torch.ones(3))
    assert [k for k, _ in pairs] == [2**64 - 1, 2**63, 5]


DTYPES = [
  torch.float16,
  torch.float32,
  torch.float64,
  torch.int8,
  torch.int16,
  torch.int32,
  torch.int64,
  torch.uint8,
  torch.bool,
]


def _step_of_every_dtype():
  step = {}
  for i, dtype in enumerate(DTYPES):
    values = torch.arange(6).reshape(2, 3) % (2 if dtype == torch.bool else 7)
    step[f'c{i}_{str(dtype)[6:]}'] = values.to(dtype)
  step['scalar'] = torch.tensor(1.5, dtype=torch.float64)
  step['grad'] = torch.ones(2, requires_grad=True)  # detached, no copy
  step['strided'] = torch.arange(6, dtype=torch.int32).reshape(2, 3).t()
  return step


@pytest.mark.parametrize('kind', framework_steps.WRITERS)
def test_writers_take_cpu_tensors_of_every_dtype(server, kind):
  step = _step_of_every_dtype()
  client = reverb.Client(_address(server))
  values = framework_steps.round_trip(client, 'queue', kind, step)
  for key, tensor in step.items():
    expected = tensor.detach().numpy()
    assert values[key].dtype == expected.dtype, key
    np.testing.assert_array_equal(values[key], expected, err_msg=key)


def test_conversion_of_a_cpu_tensor_is_a_view():
  for dtype in DTYPES:
    tensor = torch.zeros(4, 3, dtype=dtype)
    array = _dtypes.to_numpy(tensor)
    assert array.ctypes.data == tensor.data_ptr(), dtype
    _, _, payload = _dtypes.to_core_tensor(tensor)
    assert payload.ctypes.data == tensor.data_ptr(), dtype


def test_tensors_off_the_cpu_are_refused_by_name(server):
  client = reverb.Client(_address(server))
  step = {'obs': torch.ones(2, device='meta'), 'x': torch.ones(1)}
  for kind in framework_steps.WRITERS:
    with pytest.raises(ValueError, match=r'device meta in column .*\.cpu\(\)'):
      framework_steps.write_one_item(client, 'queue', kind, step)
  with pytest.raises(ValueError, match='bfloat16'):
    client.insert([torch.ones(2, dtype=torch.bfloat16)], {'queue': 1.0})


def test_a_training_loop(server):
  client = _fill(server, 'prio', 64)
  torch.manual_seed(0)
  model = torch.nn.Linear(3, 1)
  # Inputs in [0, 1) on 3 equal features: a step size well inside the
  # stable range (0.5 diverged on some draws of the prioritized batches).
  optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
  dataset = ReplayDataset(
    _address(server), 'prio', 16, max_samples=16 * 30, structure=SIGNATURE
  )
  losses = []
  for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
    target = batch.data['action'].float() / 64
    error = model(batch.data['obs'] / 64)[:, 0] - target
    loss = (error**2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    update_priorities(client, 'prio', batch.info.key, error.abs() + 1e-3)
    losses.append(loss.item())
  assert len(losses) == 30
  assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_import_tf_reverb_imports_neither_torch_nor_tensorflow():
  run_python(
    'import sys\n'
    'import tf_reverb\n'
    "assert 'torch' not in sys.modules\n"
    "assert 'tensorflow' not in sys.modules\n"
    'import tf_reverb.torch\n'
    "assert 'torch' in sys.modules\n"
    'assert tf_reverb.torch.ReplayDataset.__module__ == "tf_reverb.torch"\n'
    'import torch\n'
    'assert tf_reverb.torch.torch is torch\n'
    "assert 'tensorflow' not in sys.modules\n"
  )


def test_write_sample_update_loop_without_tensorflow():
  result = run_python_without_tensorflow(
    '''
import numpy as np
import torch
import tf_reverb as reverb
import tf_reverb.torch

table = reverb.Table('t', reverb.selectors.Prioritized(1.0),
                     reverb.selectors.Fifo(), 100,
                     reverb.rate_limiters.MinSize(1))
with reverb.Server([table], host='127.0.0.1') as server:
  address = f'localhost:{server.port}'
  client = reverb.Client(address)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i in range(16):
      writer.append({'obs': torch.full([3], float(i)), 'a': torch.tensor(i)})
      writer.create_item('t', 1.0, {'obs': writer.history['obs'][-1],
                                    'a': writer.history['a'][-1]})
  dataset = tf_reverb.torch.ReplayDataset(address, 't', 4, max_samples=16)
  for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
    a, obs = batch.data
    assert torch.equal(obs[:, 0], a.float())
    tf_reverb.torch.update_priorities(client, 't', batch.info.key,
                                      torch.full([4], 2.0))
  items = client.lookup('t', batch.info.key.tolist()).items
  assert all(i.info.priority == 2.0 for i in items.values())
print('trained without TensorFlow')
'''
  )
  assert 'trained without TensorFlow' in result.stdout
