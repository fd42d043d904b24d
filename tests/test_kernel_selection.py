"""tf_reverb.ops loads the kernel library of the running TensorFlow's minor,
and without one says which versions it has and how to build from source."""

import os
import subprocess
import sys

import tensorflow as tf

from tf_reverb.ops import reverb_ops


def test_loads_the_library_of_this_tensorflow():
  major, minor = tf.__version__.split('.')[:2]
  assert os.path.basename(reverb_ops.LIBRARY_PATH) == (
    f'libtf_reverb_ops_tf{major}_{minor}.so'
  )
  assert f'{major}.{minor}' in reverb_ops.available_versions()


def test_library_name():
  assert reverb_ops.library_name('2.15.1') == 'libtf_reverb_ops_tf2_15.so'
  assert reverb_ops.library_name('2.21.0rc1') == 'libtf_reverb_ops_tf2_21.so'


def test_unsupported_tensorflow_is_an_import_error_naming_versions():
  script = (
    'import tensorflow as tf\n'
    'tf.__version__ = "2.99.0"\n'
    'try:\n'
    '  import tf_reverb.ops\n'
    'except ImportError as e:\n'
    '  print("ERROR:", e)\n'
  )
  result = subprocess.run(
    [sys.executable, '-c', script],
    capture_output=True,
    text=True,
    timeout=300,
    check=True,
  )
  assert (
    'ERROR: tf_reverb has no TensorFlow kernels for the installed '
    'TensorFlow 2.99.0' in result.stdout
  )
  for version in reverb_ops.available_versions():
    assert version in result.stdout
  assert 'pip install --no-build-isolation .' in result.stdout
