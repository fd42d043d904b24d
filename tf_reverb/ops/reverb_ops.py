"""Loads the kernel library and binds it to the process's tf_reverb core.

An installation carries one kernel library per TensorFlow minor it was built
for, ``libtf_reverb_ops_tf<major>_<minor>.so``; this module loads the one
matching ``tf.__version__``. The kernels link TensorFlow only. They reach the
core (the already imported ``tf_reverb.pybind`` extension) through its C ABI,
which this module hands them by path; dlopen returns the loaded copy, so ops
and Python share in-process servers.
"""

import ctypes
import glob
import os
import re
from typing import List

import tensorflow as tf

from tf_reverb import pybind

# Internal: the loader of the kernels behind TFClient, the datasets and
# TFStructuredWriter (scripts/check_install.py and the tests reach its names
# by attribute); `import *` binds none of them.
__all__ = []

_DIRECTORY = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_PATTERN = re.compile(r'libtf_reverb_ops_tf(\d+)_(\d+)\.so$')


def library_name(tf_version: str) -> str:
  """The kernel library's file name for a TensorFlow version ('2.21.0')."""
  major, minor = tf_version.split('.')[:2]
  return f'libtf_reverb_ops_tf{major}_{minor}.so'


def available_versions() -> List[str]:
  """TensorFlow minors ('2.15', ...) this installation has kernels for."""
  versions = []
  for path in glob.glob(os.path.join(_DIRECTORY, 'libtf_reverb_ops_tf*.so')):
    match = _LIBRARY_PATTERN.search(os.path.basename(path))
    if match:
      versions.append((int(match.group(1)), int(match.group(2))))
  return [f'{major}.{minor}' for major, minor in sorted(versions)]


def _library_path() -> str:
  path = os.path.join(_DIRECTORY, library_name(tf.__version__))
  if not os.path.exists(path):
    have = ', '.join(available_versions()) or 'none'
    raise ImportError(
      f'tf_reverb has no TensorFlow kernels for the installed TensorFlow '
      f'{tf.__version__} (this installation has kernels for TensorFlow '
      f'{have}). Install a TensorFlow it supports, or build tf_reverb from '
      f'source against this one: in a checkout of tf_reverb, run '
      f'`pip install --no-build-isolation .` with this Python (see the '
      f"README's set-up)."
    )
  return path


LIBRARY_PATH = _library_path()

_ops = tf.load_op_library(LIBRARY_PATH)


def _bind_core() -> None:
  """Hands the kernels the path of the process's core library."""
  error = ctypes.create_string_buffer(2048)
  bind = ctypes.CDLL(LIBRARY_PATH).tf_reverb_kernels_bind_core
  bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
  if bind(pybind.__file__.encode(), error, len(error)) != 0:
    raise ImportError(
      f'Cannot bind the tf_reverb kernels to the core: {error.value.decode()}'
    )


_bind_core()

reverb_client = _ops.reverb_client
reverb_client_sample = _ops.reverb_client_sample
reverb_client_insert = _ops.reverb_client_insert
reverb_client_insert_with_policy_version = (
  _ops.reverb_client_insert_with_policy_version
)
reverb_client_update_priorities = _ops.reverb_client_update_priorities
reverb_trajectory_dataset = _ops.reverb_trajectory_dataset
reverb_timestep_dataset = _ops.reverb_timestep_dataset
reverb_pattern_dataset = _ops.reverb_pattern_dataset
reverb_structured_writer = _ops.reverb_structured_writer
reverb_structured_writer_append = _ops.reverb_structured_writer_append
reverb_structured_writer_flush = _ops.reverb_structured_writer_flush
reverb_structured_writer_end_episode = _ops.reverb_structured_writer_end_episode
