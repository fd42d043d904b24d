"""Conversion of Python/numpy/TensorFlow values into the core's tensors.

The core identifies dtypes by TensorFlow's DataType numbers, so data written
from numpy and read by TF ops (or by dm-reverb) agree on the wire.
"""

from typing import Any, List, Tuple

import numpy as np

DT_STRING = 7

_NUMPY_TO_TF = {
  np.dtype(np.float32): 1,
  np.dtype(np.float64): 2,
  np.dtype(np.int32): 3,
  np.dtype(np.uint8): 4,
  np.dtype(np.int16): 5,
  np.dtype(np.int8): 6,
  np.dtype(np.complex64): 8,
  np.dtype(np.int64): 9,
  np.dtype(np.bool_): 10,
  np.dtype(np.uint16): 17,
  np.dtype(np.complex128): 18,
  np.dtype(np.float16): 19,
  np.dtype(np.uint32): 22,
  np.dtype(np.uint64): 23,
}

# numpy dtype -> TF DataType number (strings are DT_STRING).
NUMPY_TO_TF = _NUMPY_TO_TF

# (TF dtype number, shape, payload) as the pybind layer takes it.
CoreTensor = Tuple[int, Tuple[int, ...], Any]


def to_numpy(value: Any) -> np.ndarray:
  """`value` (scalar, array, eager tf.Tensor) as a numpy array."""
  if hasattr(value, 'numpy') and not isinstance(value, np.ndarray):
    value = value.numpy()
  return np.asarray(value)


def to_core_tensor(value: Any, path: str = '') -> CoreTensor:
  """Converts one leaf for the core; `path` names it in errors."""
  array = to_numpy(value)
  if array.dtype.kind in 'SUO':
    flat: List[bytes] = []
    for item in array.reshape(-1):
      if isinstance(item, str):
        item = item.encode('utf-8')
      if not isinstance(item, bytes):
        raise ValueError(
          f'Unsupported value {item!r} of type {type(item).__name__} in '
          f'column {path or "?"}: object arrays must hold str or bytes.'
        )
      flat.append(item)
    return DT_STRING, tuple(array.shape), flat
  dtype = _NUMPY_TO_TF.get(array.dtype)
  if dtype is None:
    raise ValueError(
      f'Unsupported dtype {array.dtype} in column {path or "?"}.'
    )
  return dtype, tuple(array.shape), np.ascontiguousarray(array)
