"""Loads the kernel library and binds it to the process's tf_reverb core.

The kernels link TensorFlow only. They reach the core (the already imported
``tf_reverb.pybind`` extension) through its C ABI, which this module hands
them by path; dlopen returns the loaded copy, so ops and Python share
in-process servers.
"""

import ctypes
import os

import tensorflow as tf

from tf_reverb import pybind

LIBRARY_PATH = os.path.join(os.path.dirname(__file__), 'libtf_reverb_ops.so')

_ops = tf.load_op_library(LIBRARY_PATH)


def _bind_core() -> None:
  error = ctypes.create_string_buffer(2048)
  bind = ctypes.CDLL(LIBRARY_PATH).tf_reverb_kernels_bind_core
  bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
  if bind(pybind.__file__.encode(), error, len(error)) != 0:
    raise ImportError(
        f'Cannot bind the tf_reverb kernels to the core: {error.value.decode()}')


_bind_core()

reverb_client = _ops.reverb_client
reverb_client_sample = _ops.reverb_client_sample
reverb_client_insert = _ops.reverb_client_insert
reverb_client_update_priorities = _ops.reverb_client_update_priorities
reverb_trajectory_dataset = _ops.reverb_trajectory_dataset
reverb_timestep_dataset = _ops.reverb_timestep_dataset
reverb_pattern_dataset = _ops.reverb_pattern_dataset
reverb_structured_writer = _ops.reverb_structured_writer
reverb_structured_writer_append = _ops.reverb_structured_writer_append
reverb_structured_writer_flush = _ops.reverb_structured_writer_flush
reverb_structured_writer_end_episode = _ops.reverb_structured_writer_end_episode
