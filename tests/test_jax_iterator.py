"""tf_reverb.jax: ReplayIterator, device prefetch, sharding, jax steps.

Real servers on real ports. Issue 29: batches of jax.Array put on the
device ahead of use, split over devices by a sharding (two CPU devices in a
subprocess), priority updates from jax arrays, writers taking jax arrays of
every dtype, and all of it where TensorFlow cannot be imported.
"""

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

from conftest import run_python
from conftest import run_python_without_tensorflow
import framework_steps
import tf_reverb as reverb
from tf_reverb import _dtypes
from tf_reverb import numpy_iterator

import jax  # scripts/setup.sh installs it (pinned) on every Python  # noqa: I001
import jax.numpy as jnp
import tf_reverb.jax
from tf_reverb.jax import ReplayIterator
from tf_reverb.jax import update_priorities

STRUCTURE = {'action': None, 'obs': None}


@pytest.fixture
def server():
  """'queue' (FIFO, each item sampled once) and 'prio' (prioritized)."""
  tables = [
    reverb.Table.queue('queue', 1000),
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
  """Items i = 0..n-1: obs float32 [3] of i, action int32 i (squeezed)."""
  return framework_steps.fill(server, table, n, np.int32)


def test_batches_are_jax_arrays_with_host_keys(server):
  _fill(server, 'queue', 12)
  with ReplayIterator(
    _address(server), 'queue', 4, max_samples=12, structure=STRUCTURE
  ) as iterator:
    batches = list(iterator)
  assert len(batches) == 3
  actions = []
  for batch in batches:
    obs, action = batch.data['obs'], batch.data['action']
    assert isinstance(obs, jax.Array) and isinstance(action, jax.Array)
    assert obs.dtype == jnp.float32 and obs.shape == (4, 3)
    assert action.dtype == jnp.int32 and action.shape == (4,)
    assert obs.devices() == {jax.devices()[0]}
    np.testing.assert_array_equal(
      np.asarray(obs), np.repeat(np.asarray(action), 3).reshape(4, 3)
    )
    actions += np.asarray(action).tolist()
    info = batch.info
    assert isinstance(info.key, np.ndarray) and info.key.dtype == np.uint64
    for field in info[1:]:
      assert isinstance(field, jax.Array) and field.shape == (4,)
    # JAX's dtype rules: without jax_enable_x64, 64-bit fields are 32-bit.
    assert info.probability.dtype == jax.dtypes.canonicalize_dtype(np.float64)
    assert info.table_size.dtype == jax.dtypes.canonicalize_dtype(np.int64)
    assert info.times_sampled.dtype == jnp.int32
  assert sorted(actions) == list(range(12))


def test_string_columns_stay_numpy_object_arrays(server):
  client = reverb.Client(_address(server))
  client.insert([np.array([b'ab'], object), np.float32(1)], {'queue': 1})
  with ReplayIterator(_address(server), 'queue', 1, max_samples=1) as it:
    batch = next(it)
  assert batch.data[0].dtype == object and isinstance(batch.data[1], jax.Array)


@pytest.mark.parametrize('prefetch', [1, 2, 3])
def test_batches_are_put_on_the_device_ahead_of_use(
  server, monkeypatch, prefetch
):
  _fill(server, 'queue', 10)
  calls = []
  original = numpy_iterator.NumpyIterator._next_flat

  def counting_next_flat(self):
    calls.append(1)
    return original(self)

  monkeypatch.setattr(
    numpy_iterator.NumpyIterator, '_next_flat', counting_next_flat
  )
  iterator = ReplayIterator(
    _address(server),
    'queue',
    2,
    max_samples=10,
    prefetch_to_device=prefetch,
    device=jax.devices()[0],
  )
  first = next(iterator)
  assert len(calls) == prefetch  # staged before the first was handed out
  assert first.data[1].devices() == {jax.devices()[0]}
  assert len(list(iterator)) == 4
  iterator.close()
  with pytest.raises(StopIteration):
    next(iterator)


def test_close_stops_early(server):
  _fill(server, 'prio', 4)
  iterator = ReplayIterator(_address(server), 'prio', 2)
  next(iterator)
  iterator.close()
  with pytest.raises(StopIteration):
    next(iterator)


def test_invalid_options():
  with pytest.raises(ValueError, match='prefetch_to_device'):
    ReplayIterator('localhost:1', 't', 2, prefetch_to_device=0)
  with pytest.raises(ValueError, match='either sharding or device'):
    ReplayIterator(
      'localhost:1',
      't',
      2,
      device=jax.devices()[0],
      sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]),
    )
  with pytest.raises(TypeError, match='jax.sharding.Sharding'):
    ReplayIterator('localhost:1', 't', 2, sharding='data')


def test_large_columns_reach_the_device_without_a_copy(server, monkeypatch):
  # A batch's column of 1 MiB or more goes by jax.device_put, which on the
  # CPU takes the sampler's aligned buffer as it is; smaller fields go
  # through the jitted mover.
  client = reverb.Client(_address(server))
  for i in range(8):
    client.insert(
      [np.full([512, 1024], i, np.uint8), np.int32(i)], {'queue': 1.0}
    )
  put = jax.device_put
  shared = []

  def recording_put(value, *args, **kwargs):
    out = put(value, *args, **kwargs)
    shared.append(out.unsafe_buffer_pointer() == value.ctypes.data)
    return out

  monkeypatch.setattr(jax, 'device_put', recording_put)
  device = jax.devices()[0]
  with ReplayIterator(
    _address(server), 'queue', 2, max_samples=8, device=device
  ) as iterator:
    batches = list(iterator)
  assert shared == [True] * 4  # the frames of 4 batches, nothing else
  frames = [b.data[0] for b in batches]
  assert all(
    f.shape == (2, 1, 512, 1024) and f.dtype == jnp.uint8 for f in frames
  )
  assert all(f.devices() == {device} for f in frames)
  for batch in batches:
    np.testing.assert_array_equal(
      np.asarray(batch.data[0])[:, 0, 7, 9], np.asarray(batch.data[1])[:, 0]
    )


def test_an_iterator_dropped_without_close_is_freed_at_once(server):
  # Its staging (NumpyIterator._staged) must not keep it alive in a
  # reference cycle: the sampler's threads stop when the last reference
  # goes, not at the next garbage collection.
  _fill(server, 'prio', 4)
  gc.disable()
  try:
    iterator = ReplayIterator(_address(server), 'prio', 2)
    next(iterator)
    batches = weakref.ref(iterator._batches)  # pylint: disable=protected-access
    alive = weakref.ref(iterator)
    del iterator
    assert alive() is None and batches() is None
  finally:
    gc.enable()


def test_an_error_leaves_the_staged_batches_in_place(server, monkeypatch):
  # A sampler error (or a KeyboardInterrupt) is raised by the next() that
  # met it; the batches staged before it are still handed out after it.
  _fill(server, 'queue', 8)
  original = numpy_iterator.NumpyIterator._next_flat
  calls = []

  def failing_once(self):
    calls.append(1)
    if len(calls) == 3:
      raise RuntimeError('injected sampler error')
    return original(self)

  monkeypatch.setattr(numpy_iterator.NumpyIterator, '_next_flat', failing_once)
  with ReplayIterator(
    _address(server),
    'queue',
    2,
    max_samples=8,
    prefetch_to_device=2,
    structure=STRUCTURE,
  ) as iterator:
    actions = np.asarray(next(iterator).data['action']).tolist()
    with pytest.raises(RuntimeError, match='injected'):
      next(iterator)
    for batch in iterator:
      actions += np.asarray(batch.data['action']).tolist()
  assert sorted(actions) == list(range(8))


def test_single_device_sharding(server):
  _fill(server, 'prio', 4)
  sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  with ReplayIterator(
    _address(server), 'prio', 4, max_samples=4, sharding=sharding
  ) as it:
    batch = next(it)
  assert batch.data[1].sharding == sharding


_TWO_DEVICES = r"""
import warnings
import numpy as np
import jax
from jax.sharding import NamedSharding, PartitionSpec as P
import tf_reverb as reverb
import tf_reverb.jax

assert len(jax.devices()) == 2, jax.devices()
mesh = jax.make_mesh((2,), ('data',))
table = reverb.Table('t', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                     100, reverb.rate_limiters.MinSize(1))
with reverb.Server([table], host='127.0.0.1') as server:
  address = f'localhost:{server.port}'
  client = reverb.Client(address)
  for i in range(8):
    # 'frame': 256 KiB an item, so a batch's 1 MiB goes by jax.device_put.
    client.insert({'obs': np.full([3], i, np.float32),
                   'frame': np.full([256, 1024], i, np.uint8)}, {'t': 1.0})
  # A spec longer than a field's rank is cut to it: [batch] info fields
  # are split as the [batch, 1, 3] column is.
  for spec in (P('data'), P('data', None, None)):
    sharding = NamedSharding(mesh, spec)
    with tf_reverb.jax.ReplayIterator(address, 't', 4, max_samples=8,
                                      sharding=sharding,
                                      structure={'frame': 0, 'obs': 0}) as batches:
      for batch in batches:
        obs, frame = batch.data['obs'], batch.data['frame']
        assert obs.shape == (4, 1, 3), obs.shape
        shards = sorted((s.device.id, s.data.shape) for s in obs.addressable_shards)
        assert shards == [(0, (2, 1, 3)), (1, (2, 1, 3))], shards
        shards = sorted((s.device.id, s.data.shape) for s in frame.addressable_shards)
        assert shards == [(0, (2, 1, 256, 1024)), (1, (2, 1, 256, 1024))], shards
        np.testing.assert_array_equal(
            np.asarray(frame)[:, 0, 100, 100], np.asarray(obs)[:, 0, 0])
        probability = batch.info.probability
        assert [s.data.shape for s in probability.addressable_shards] == [(2,), (2,)]
        assert isinstance(batch.info.key, np.ndarray)
        tf_reverb.jax.update_priorities(client, 't', batch.info.key,
                                        probability * 0 + 2.0)
  for kwargs, what in ((dict(batch_size=3), 'batch_size (3)'),
                       (dict(batch_size=4, max_samples=9), 'last batch')):
    try:
      tf_reverb.jax.ReplayIterator(address, 't', sharding=sharding, **kwargs)
      raise AssertionError('no error')
    except ValueError as e:
      assert what in str(e) and 'split evenly' in str(e), e
  # A partial batch the sharding cannot split (the last 1 of 7 queued
  # items after three batches of 2, when the rate limiter times out) is dropped with a
  # warning that points at the caller.
  queue = reverb.Table.queue('q', 10)
  with reverb.Server([queue], host='127.0.0.1') as queue_server:
    queue_address = f'localhost:{queue_server.port}'
    for i in range(7):
      reverb.Client(queue_address).insert([np.float32(i)], {'q': 1.0})
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      with tf_reverb.jax.ReplayIterator(
          queue_address, 'q', 2, rate_limiter_timeout_ms=300,
          sharding=NamedSharding(mesh, P('data'))) as batches:
        sizes = [len(batch.info.key) for batch in batches]
    assert sizes == [2, 2, 2], sizes
    dropped = [w for w in caught if 'Dropped a partial batch of 1' in str(w.message)]
    assert len(dropped) == 1 and dropped[0].filename == '<string>', [
        (str(w.message), w.filename) for w in caught]
print('sharded over 2 devices')
"""


def test_sharding_splits_the_batch_over_two_devices():
  env = dict(os.environ)
  env['XLA_FLAGS'] = (
    env.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=2'
  )
  env['JAX_PLATFORMS'] = 'cpu'
  result = subprocess.run(
    [sys.executable, '-c', _TWO_DEVICES],
    capture_output=True,
    text=True,
    timeout=180,
    env=env,
  )
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'sharded over 2 devices' in result.stdout


def test_priority_updates_from_jax_arrays(server):
  client = _fill(server, 'prio', 8)
  with ReplayIterator(_address(server), 'prio', 8, max_samples=8) as it:
    batch = next(it)
  keys = np.unique(batch.info.key)
  n = len(keys)

  def priorities():
    items = client.lookup('prio', keys.tolist()).items
    return [items[k].info.priority for k in keys.tolist()]

  update_priorities(client, 'prio', keys, jnp.arange(1, n + 1) * 0.5)
  assert priorities() == pytest.approx([0.5 * i for i in range(1, n + 1)])
  update_priorities(_address(server), 'prio', keys, jnp.ones(n))
  assert priorities() == [1.0] * n
  client.mutate_priorities('prio', updates=(keys, jnp.full([n], 3.0)))
  assert priorities() == [3.0] * n
  with jax.enable_x64(True):
    update_priorities(client, 'prio', jnp.asarray(keys), jnp.full([n], 5.0))
  assert priorities() == [5.0] * n
  with pytest.raises(ValueError, match='jax_enable_x64'):
    update_priorities(
      client, 'prio', jnp.asarray(keys, jnp.uint32), jnp.ones(n)
    )
  with pytest.raises(ValueError, match='same number'):
    update_priorities(client, 'prio', keys, jnp.ones(n + 1))


DTYPES = ['float16', 'float32', 'int8', 'int16', 'int32', 'uint8', 'bool']
DTYPES_X64 = ['float64', 'int64']


def _step_of_every_dtype():
  step = {}
  for dtype in DTYPES + DTYPES_X64:
    values = jnp.arange(6).reshape(2, 3) % (2 if dtype == 'bool' else 7)
    step[dtype] = values.astype(dtype)
    assert step[dtype].dtype == np.dtype(dtype), dtype
  step['scalar'] = jnp.float32(1.5)
  step['transposed'] = jnp.arange(6, dtype=jnp.int32).reshape(2, 3).T
  return step


@pytest.mark.parametrize('kind', framework_steps.WRITERS)
def test_writers_take_jax_arrays_of_every_dtype(server, kind):
  client = reverb.Client(_address(server))
  with jax.enable_x64(True):  # for float64 and int64
    step = _step_of_every_dtype()
    values = framework_steps.round_trip(client, 'queue', kind, step)
  for key, array in step.items():
    expected = np.asarray(array)
    assert values[key].dtype == expected.dtype, key
    np.testing.assert_array_equal(values[key], expected, err_msg=key)


def test_conversion_of_a_cpu_jax_array_is_a_view():
  for dtype in DTYPES:
    array = jnp.zeros((4, 3), dtype)
    converted = _dtypes.to_numpy(array)
    assert converted.ctypes.data == array.unsafe_buffer_pointer(), dtype
    _, _, payload = _dtypes.to_core_tensor(array)
    assert payload.ctypes.data == array.unsafe_buffer_pointer(), dtype


def test_a_training_loop(server):
  client = _fill(server, 'prio', 64)

  @jax.jit
  def step(weights, obs, target):
    def loss(w):
      return jnp.mean((obs @ w - target) ** 2)

    value, grad = jax.value_and_grad(loss)(weights)
    # A step well inside the stable range (inputs in [0, 1) on 3 equal
    # features: 0.5 can diverge on high-priority batches).
    return weights - 0.1 * grad, value, jnp.abs(obs @ weights - target)

  weights = jnp.zeros(3)
  losses = []
  with ReplayIterator(
    _address(server), 'prio', 16, max_samples=16 * 30, structure=STRUCTURE
  ) as batches:
    for batch in batches:
      target = batch.data['action'].astype(jnp.float32) / 64
      weights, loss, error = step(weights, batch.data['obs'] / 64, target)
      update_priorities(client, 'prio', batch.info.key, error + 1e-3)
      losses.append(float(loss))
  assert len(losses) == 30
  assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_import_tf_reverb_imports_neither_jax_nor_tensorflow():
  run_python(
    'import sys\n'
    'import tf_reverb\n'
    "assert 'jax' not in sys.modules\n"
    'import tf_reverb.jax\n'
    "assert 'jax' in sys.modules\n"
    'import jax\n'
    'assert tf_reverb.jax.jax is jax\n'
    "assert 'tensorflow' not in sys.modules\n"
    "assert 'torch' not in sys.modules\n"
  )


def test_write_sample_update_loop_without_tensorflow():
  result = run_python_without_tensorflow(
    '''
import jax
import jax.numpy as jnp
import tf_reverb as reverb
import tf_reverb.jax

table = reverb.Table('t', reverb.selectors.Prioritized(1.0),
                     reverb.selectors.Fifo(), 100,
                     reverb.rate_limiters.MinSize(1))
with reverb.Server([table], host='127.0.0.1') as server:
  address = f'localhost:{server.port}'
  client = reverb.Client(address)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i in range(16):
      writer.append({'obs': jnp.full([3], float(i)), 'a': jnp.int32(i)})
      writer.create_item('t', 1.0, {'obs': writer.history['obs'][-1],
                                    'a': writer.history['a'][-1]})
  with tf_reverb.jax.ReplayIterator(address, 't', 4, max_samples=16) as it:
    for batch in it:
      a, obs = batch.data
      assert isinstance(obs, jax.Array)
      assert bool((obs[:, 0] == a.astype(jnp.float32)).all())
      tf_reverb.jax.update_priorities(client, 't', batch.info.key,
                                      jnp.full([4], 2.0))
  items = client.lookup('t', batch.info.key.tolist()).items
  assert all(i.info.priority == 2.0 for i in items.values())
print('trained without TensorFlow')
'''
  )
  assert 'trained without TensorFlow' in result.stdout
