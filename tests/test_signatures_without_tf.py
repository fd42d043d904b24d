"""Table signatures without TensorFlow, and signature checks on every insert.

Issue 12: signatures decode into tensor_spec.TensorSpec nests where TF is
not imported (writers, server_info, Client.sample, NumpyIterator work in a
process that cannot import TF); Client.insert and TFClient.insert check data
against the signature before sending; the server rejects inconsistent items
from any client.
"""

import collections
import os
import pickle
import re
import subprocess

import grpc
import numpy as np
import pytest
import tree

from conftest import DM_PYTHON
from conftest import requires_dm_reverb
from conftest import run_python
import grpc_fuzz
import tf_reverb as reverb
from tf_reverb import reverb_types
from tf_reverb import tensor_spec
from tf_reverb.proto import reverb_service_pb2
from tf_reverb.proto import reverb_service_pb2_grpc
from tf_reverb.proto import schema_pb2
from tf_reverb.proto import struct_pb2
from tf_reverb.proto import tensor_pb2

TensorSpec = tensor_spec.TensorSpec

_WITHOUT_TENSORFLOW = r'''
import sys


class _BlockTensorFlow:
  """Makes `import tensorflow` fail, as where it is not installed."""

  def find_spec(self, name, path=None, target=None):
    if name == 'tensorflow' or name.startswith('tensorflow.'):
      raise ImportError(f'{name} is blocked in this test')
    return None


sys.meta_path.insert(0, _BlockTensorFlow())
try:
  import tensorflow  # noqa: F401
  raise AssertionError('tensorflow imported')
except ImportError:
  pass

import numpy as np
import tf_reverb as reverb
from tf_reverb.tensor_spec import TensorSpec

signature = {'obs': TensorSpec([None, 2], 'float32', name='obs'),
             'step': TensorSpec([], np.int32)}
table = reverb.Table.queue('t', 100, signature=signature)
with reverb.Server([table]) as server:
  client = reverb.Client(f'localhost:{server.port}')

  info = client.server_info()['t']
  assert info.signature == signature, info.signature
  assert isinstance(info.signature['obs'], TensorSpec), info.signature

  with client.trajectory_writer(num_keep_alive_refs=3) as writer:
    for step in range(3):
      writer.append({'obs': np.full([2], step, np.float32),
                     'step': np.int32(step)})
      if step >= 1:
        writer.create_item('t', 1.0, {'obs': writer.history['obs'][-2:],
                                      'step': writer.history['step'][-1]})
    try:
      writer.create_item('t', 1.0, {'obs': writer.history['obs'][-1],
                                    'step': writer.history['step'][-1]})
      raise AssertionError('a squeezed obs column was accepted')
    except ValueError as e:
      assert 'signature' in str(e), e

  try:
    client.insert({'obs': np.zeros([2], np.float64), 'step': np.int32(0)},
                  {'t': 1.0})
    raise AssertionError('float64 obs was accepted')
  except ValueError as e:
    assert "('obs',)" in str(e), e
  client.insert({'obs': np.zeros([2], np.float32), 'step': np.int32(9)},
                {'t': 1.0})

  sample = next(client.sample('t', emit_timesteps=False,
                              unpack_as_table_signature=True))
  assert sorted(sample.data) == ['obs', 'step'], sample
  assert sample.data['obs'].tolist() == [[0, 0], [1, 1]], sample
  assert sample.data['step'].tolist() == 1, sample

  with reverb.NumpyIterator(client.server_address, 't', batch_size=1,
                            max_samples=1, structure=info.signature) as it:
    (batch,) = list(it)
  assert batch.data['obs'].shape == (1, 2, 2), batch
  assert batch.data['obs'].dtype == np.float32, batch
  assert batch.data['step'].tolist() == [2], batch

assert not any(m == 'tensorflow' or m.startswith('tensorflow.')
               for m in sys.modules), 'tensorflow imported'
print('OK')
'''


def test_writer_server_info_sample_and_numpy_iterator_without_tensorflow():
  assert 'OK' in run_python(_WITHOUT_TENSORFLOW).stdout


# ---------------------------------------------------------------------------
# The TF-free spec type and the coder.

Point = collections.namedtuple('Point', ['y', 'x'])


def _nests():
  return [
    TensorSpec([], 'float32'),
    TensorSpec(None, np.int64, name='a'),
    {
      'b': TensorSpec([None, 3], np.float32, 'obs'),
      'a': TensorSpec([2], 'string'),
      'c': [TensorSpec([1], np.bool_), (TensorSpec([], np.uint8),)],
    },
    Point(
      y=TensorSpec([], np.float16), x={'q': TensorSpec([5, None], np.complex64)}
    ),
    [TensorSpec([7], np.uint64)],
  ]


@pytest.mark.parametrize('nest', _nests())
def test_signatures_round_trip_without_tensorflow(nest):
  serialized = reverb_types.encode_signature(nest)
  decoded = reverb_types._decode(
    struct_pb2.StructuredValue.FromString(serialized)
  )
  assert decoded == nest
  assert reverb_types.encode_signature(decoded) == serialized


@pytest.mark.parametrize('index', range(len(_nests())))
def test_encoding_matches_tensorflows_coder(index):
  tf = pytest.importorskip('tensorflow')
  from tensorflow.python.saved_model import nested_structure_coder  # pylint: disable=g-import-not-at-top

  nest = _nests()[index]
  tf_nest = tf.nest.map_structure(
    lambda s: tf.TensorSpec(
      None if s.shape is None else list(s.shape),
      s.dtype.as_datatype_enum,
      s.name,
    ),
    nest,
  )
  expected = nested_structure_coder.encode_structure(
    tf_nest
  ).SerializeToString()
  # The same message (map entries serialize in no fixed order).
  parse = struct_pb2.StructuredValue.FromString
  assert parse(reverb_types.encode_signature(nest)) == parse(expected)
  assert parse(reverb_types.encode_signature(tf_nest)) == parse(expected)
  # With TF imported, TableInfo.signature is TF's own decoding.
  assert reverb_types.decode_signature(expected) == tf_nest


def test_tensor_spec_basics():
  spec = TensorSpec([None, 3], np.float32, 'obs')
  assert spec.shape == (None, 3)
  assert spec.dtype == np.float32 and spec.dtype == 'float32'
  assert spec.dtype.as_numpy_dtype is np.float32
  assert spec.dtype.as_datatype_enum == 1
  assert spec.name == 'obs'
  assert spec == TensorSpec((None, 3), 'float32', 'obs')
  assert spec != TensorSpec((None, 3), 'float32')
  assert TensorSpec([], 'string').dtype.as_numpy_dtype is np.object_
  assert TensorSpec([], np.float64).dtype != None  # noqa: E711 (tests __ne__ with None)
  assert TensorSpec([], 'string').dtype == np.dtype('O')
  assert pickle.loads(pickle.dumps(spec)) == spec
  assert tree.flatten({'a': spec, 'b': [spec]}) == [spec, spec]  # a leaf
  assert spec.is_compatible_with(np.zeros([5, 3], np.float32))
  assert not spec.is_compatible_with(np.zeros([5, 4], np.float32))
  assert TensorSpec(None, np.int32).is_compatible_with(np.int32(1))
  with pytest.raises(ValueError):
    TensorSpec([-2], np.float32)
  with pytest.raises(TypeError):
    TensorSpec([1], object())
  with pytest.raises(ValueError, match='Unsupported signature spec'):
    reverb_types.encode_signature({'a': np.zeros(3)})


# ---------------------------------------------------------------------------
# Client.insert / TFClient.insert check the signature before sending.

_SIGNATURE = {
  'obs': TensorSpec([None, 2], np.float32, 'obs'),
  'step': TensorSpec([], np.int32),
}


@pytest.fixture
def signature_server():
  table = reverb.Table(
    'sig',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
    signature=_SIGNATURE,
  )
  free = reverb.Table(
    'free',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
  )
  with reverb.Server([table, free]) as server:
    yield server


def _size(server, table):
  return server.localhost_client().server_info()[table].current_size


# (data, pattern the error must match).
_BAD_INSERTS = [
  (
    {'obs': np.zeros([2], np.float32)},
    r"table 'sig'.*1 columns but the signature has 2.*\('obs',\): \w+\[\?,2\]",
  ),
  (
    {'obs': np.zeros([2], np.float64), 'step': np.int32(1)},
    r"table 'sig'.*column 0 \('obs',\) \(name 'obs'\) is \w+\[\?,2\] in the "
    r'signature but the item provides \w+\[1,2\]',
  ),
  (
    {'obs': np.zeros([3], np.float32), 'step': np.int32(1)},
    r"column 0 \('obs',\) \(name 'obs'\) is \w+\[\?,2\] in the signature but "
    r'the item provides \w+\[1,3\]',
  ),
  (
    {'obs': np.zeros([2], np.float32), 'step': np.zeros([2], np.int32)},
    r"column 1 \('step',\) is \w+\[\] in the signature but the item provides "
    r'\w+\[1,2\]',
  ),
]


@pytest.mark.parametrize('data,pattern', _BAD_INSERTS)
def test_client_insert_checks_the_signature(signature_server, data, pattern):
  client = reverb.Client(f'localhost:{signature_server.port}')
  with pytest.raises(ValueError, match=pattern):
    client.insert(data, {'free': 1.0, 'sig': 1.0})
  # Nothing was sent, not even to the table without a signature.
  assert _size(signature_server, 'sig') == 0
  assert _size(signature_server, 'free') == 0


def test_client_insert_accepts_step_shapes(signature_server):
  client = reverb.Client(f'localhost:{signature_server.port}')
  client.insert(
    {'obs': np.ones([2], np.float32), 'step': np.int32(3)},
    {'sig': 1.0, 'free': 1.0},
  )
  assert _size(signature_server, 'sig') == 1
  sample = next(
    client.sample('sig', emit_timesteps=False, unpack_as_table_signature=True)
  )
  assert sample.data['obs'].tolist() == [[1, 1]]
  assert sample.data['step'].tolist() == [3]


@pytest.mark.parametrize('data,pattern', _BAD_INSERTS)
def test_tf_client_insert_checks_the_signature(signature_server, data, pattern):
  tf = pytest.importorskip('tensorflow')
  client = reverb.TFClient(f'localhost:{signature_server.port}')
  tensors = [tf.constant(v) for v in tree.flatten(data)]
  with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
    client.insert(tensors, tf.constant(['sig']), tf.constant([1.0], tf.float64))
  assert _size(signature_server, 'sig') == 0
  client.insert(
    [tf.zeros([2]), tf.constant(1, tf.int32)],
    tf.constant(['sig']),
    tf.constant([1.0], tf.float64),
  )
  assert _size(signature_server, 'sig') == 1


# ---------------------------------------------------------------------------
# What a client did not check: stored, as by Reverb, unless the table checks.


def test_unvalidated_writer_items_of_other_columns_are_stored(signature_server):
  # TF-Agents' ReverbAddTrajectoryObserver writes policy_info as one more
  # column than the table's signature, with validate_items=False.
  client = reverb.Client(f'localhost:{signature_server.port}')
  with client.trajectory_writer(
    num_keep_alive_refs=2, validate_items=False
  ) as writer:
    writer.append(
      {
        'obs': np.zeros([2], np.float32),
        'step': np.int32(0),
        'policy_info': np.float64(0.5),
      }
    )
    writer.create_item(
      'sig',
      1.0,
      {
        'obs': writer.history['obs'][-1:],
        'step': writer.history['step'][-1],
        'policy_info': writer.history['policy_info'][-1],
      },
    )
    writer.flush()
  assert _size(signature_server, 'sig') == 1
  sample = next(client.sample('sig', emit_timesteps=False))
  assert len(sample.data) == 3
  assert sorted(float(np.ravel(column)[0]) for column in sample.data) == [
    0.0,
    0.0,
    0.5,
  ]


@pytest.fixture
def strict_server():
  table = reverb.Table(
    'sig',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
    signature=_SIGNATURE,
    check_item_signatures=True,
  )
  with reverb.Server([table]) as server:
    yield server


def test_a_checking_table_rejects_unvalidated_writer_items(strict_server):
  signature_server = strict_server
  client = reverb.Client(f'localhost:{signature_server.port}')
  writer = client.trajectory_writer(num_keep_alive_refs=2, validate_items=False)
  writer.append({'obs': np.zeros([2], np.float32), 'step': np.int32(0)})
  writer.create_item(
    'sig',
    1.0,
    {'obs': writer.history['obs'][-1:], 'step': writer.history['step'][-1]},
  )
  writer.flush()
  writer.append({'obs': np.zeros([2], np.float32), 'step': np.int32(1)})
  # The squeezed obs is [2], which is not [?, 2].
  writer.create_item(
    'sig',
    1.0,
    {'obs': writer.history['obs'][-1], 'step': writer.history['step'][-1]},
  )
  pattern = (
    r"table 'sig'.*column 0 \('obs',\).*is \w+\[\?,2\] in the "
    r'signature but the item provides \w+\[2\]'
  )
  with pytest.raises((ValueError, RuntimeError), match=pattern):
    writer.flush()
  writer.close()
  # The earlier, confirmed item stays.
  assert _size(signature_server, 'sig') == 1


def _tensor_proto(dtype, shape, item_bytes):
  """A valid Snappy-coded chunk tensor of zeros."""
  content = bytes(int(np.prod(shape)) * item_bytes)
  return tensor_pb2.TensorProto(
    dtype=dtype,
    tensor_shape=tensor_pb2.TensorShapeProto(
      dim=[tensor_pb2.TensorShapeProto.Dim(size=d) for d in shape]
    ),
    tensor_content=grpc_fuzz.Codecs().snappy_compress(content),
  )


def test_a_checking_table_rejects_inconsistent_raw_grpc_items(strict_server):
  signature_server = strict_server
  # A well-formed chunk whose column 0 disagrees with the signature.
  chunk = schema_pb2.ChunkData(
    chunk_key=1,
    sequence_range=schema_pb2.SequenceRange(episode_id=1, start=0, end=0),
    data=schema_pb2.ChunkData.Data(
      tensors=[
        _tensor_proto(tensor_pb2.DT_INT64, [1, 2], 8),
        _tensor_proto(tensor_pb2.DT_INT32, [1], 4),
      ]
    ),
    data_tensors_len=2,
  )
  item = schema_pb2.PrioritizedItem(
    key=7,
    table='sig',
    priority=1.0,
    flat_trajectory=schema_pb2.FlatTrajectory(
      columns=[
        schema_pb2.FlatTrajectory.Column(
          chunk_slices=[
            schema_pb2.FlatTrajectory.ChunkSlice(
              chunk_key=1, offset=0, length=1, index=c
            )
          ]
        )
        for c in range(2)
      ]
    ),
  )
  request = reverb_service_pb2.InsertStreamRequest(chunks=[chunk], items=[item])
  with grpc.insecure_channel(f'127.0.0.1:{signature_server.port}') as channel:
    stub = reverb_service_pb2_grpc.ReverbServiceStub(channel)
    with pytest.raises(grpc.RpcError) as error:
      list(stub.InsertStream(iter([request]), timeout=30))
  assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
  assert re.search(
    r"table 'sig'.*column 0 \('obs',\) \(name 'obs'\) is \w+\[\?,2\] in the "
    r'signature but the item provides \w+\[1,2\]',
    error.value.details(),
  )
  assert _size(signature_server, 'sig') == 0


@requires_dm_reverb
def test_dm_reverb_writers_pass_the_server_check():
  def table(name, obs_shape):
    # A queue whose table checks every item against its signature.
    return reverb.Table(
      name,
      reverb.selectors.Fifo(),
      reverb.selectors.Fifo(),
      100,
      reverb.rate_limiters.Queue(100),
      max_times_sampled=1,
      signature={
        'obs': TensorSpec(obs_shape, np.float32),
        'step': TensorSpec([], np.int32),
      },
      check_item_signatures=True,
    )

  with reverb.Server([table('steps', [2]), table('traj', [3, 2])]) as server:
    script = os.path.join(
      os.path.dirname(__file__), 'interop', 'dm_reverb_signature_client.py'
    )
    result = subprocess.run(
      [DM_PYTHON, script, f'localhost:{server.port}'],
      capture_output=True,
      text=True,
      timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'ALL OK' in result.stdout
