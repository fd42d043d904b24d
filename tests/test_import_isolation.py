"""The risky seams: TensorFlow and our gRPC/protobuf in one process."""

from conftest import run_python

# Starts a server, round-trips over gRPC (a non-loopback-shortcut address,
# so real gRPC is used) and in-process, and runs the sample op in a
# tf.function.
_ROUND_TRIP = '''
import numpy as np
import tensorflow as tf
import tf_reverb as reverb
from tf_reverb.proto import schema_pb2  # our protos beside TF's in one pool
from tensorflow.core.framework import tensor_pb2  # noqa: F401

table = reverb.Table('t', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                     10, reverb.rate_limiters.MinSize(1))
with reverb.Server([table]) as server:
  for address in (f'ipv4:127.0.0.1:{server.port}', f'localhost:{server.port}'):
    client = reverb.Client(address)
    client.insert([np.float32(1.5), np.arange(4)], {'t': 1.0})
    sample = next(client.sample('t', emit_timesteps=False))
    assert sample.data[0].tolist() == [1.5], sample
    assert sample.data[1].tolist() == [[0, 1, 2, 3]], sample
    assert client.server_info()['t'].current_size >= 1
    tf_client = reverb.TFClient(address)

    @tf.function
    def sample_op():
      return tf_client.sample('t', [tf.float32, tf.int64])

    result = sample_op()
    assert result.data[1].numpy().tolist() == [0, 1, 2, 3], result
print('OK')
'''


def test_import_does_not_import_tensorflow():
  run_python(
    'import sys, tf_reverb\n'
    "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    'import tf_reverb.server, tf_reverb.client, tf_reverb.rate_limiters\n'
    "assert 'tensorflow' not in sys.modules\n"
  )


def test_import_does_not_import_torch_or_jax():
  # tf_reverb.torch and tf_reverb.jax import their framework; nothing else
  # does (the writers take their arrays by duck typing).
  run_python(
    'import sys, tf_reverb\n'
    'import tf_reverb.client, tf_reverb.trajectory_writer, tf_reverb.writer\n'
    'import tf_reverb.structured_writer, tf_reverb._dtypes\n'
    "for name in ('torch', 'jax', 'tensorflow'):\n"
    '  assert name not in sys.modules, name\n'
    "assert 'torch' not in dir(tf_reverb) and 'jax' not in dir(tf_reverb)\n"
  )


def test_tensorflow_imported_before_tf_reverb():
  code = 'import tensorflow as tf\n' + _ROUND_TRIP
  assert 'OK' in run_python(code).stdout


def test_tensorflow_imported_after_tf_reverb():
  code = 'import tf_reverb\nimport tensorflow\n' + _ROUND_TRIP
  assert 'OK' in run_python(code).stdout


def test_lazy_tensorflow_names_resolve():
  run_python(
    'import sys, tf_reverb as reverb\n'
    "assert 'tensorflow' not in sys.modules\n"
    'client_class = reverb.TFClient\n'
    "assert 'tensorflow' in sys.modules\n"
    "assert 'TFClient' in dir(reverb)\n"
  )


def test_reverb_module_paths_resolve():
  run_python(
    'import sys, tf_reverb as reverb\n'
    "assert 'tensorflow' not in sys.modules\n"
    'assert reverb.structured is reverb.structured_writer\n'
    'from tf_reverb.platform import checkpointers_lib\n'
    'assert checkpointers_lib.DefaultCheckpointer is '
    'reverb.checkpointers.DefaultCheckpointer\n'
    "assert 'tensorflow' not in sys.modules\n"
    'assert callable(reverb.pattern_dataset.pattern_dataset_with_info)\n'
    'assert reverb.trajectory_dataset.TrajectoryDataset is '
    'reverb.TrajectoryDataset\n'
    "assert reverb.PatternDataset.__module__ == 'tf_reverb.pattern_dataset'\n"
    "assert 'pattern_dataset' in dir(reverb)\n"
  )
