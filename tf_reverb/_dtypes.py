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


def _is_torch_tensor(value: Any) -> bool:
  """Whether `value` is a torch.Tensor (duck-typed: torch is not imported)."""
  module = type(value).__module__
  return module == 'torch' or module.startswith('torch.')


def _torch_to_numpy(value: Any, path: str) -> np.ndarray:
  """A CPU torch.Tensor as a numpy array sharing its memory (no copy).

  A tensor on another device raises ValueError (call ``.cpu()`` first):
  copying to the host is a synchronizing transfer the caller should see.
  """
  device = value.device
  if device.type != 'cpu':
    raise ValueError(
      f'A torch.Tensor on device {device} in column {path or "?"}: writers '
      'take CPU tensors, move it with .cpu() first.'
    )
  value = value.detach()  # a view; .numpy() refuses tensors needing grad
  if value.is_conj():
    value = value.resolve_conj()
  if value.is_neg():
    value = value.resolve_neg()
  try:
    return value.numpy()
  except (TypeError, RuntimeError) as e:
    raise ValueError(
      f'Unsupported dtype {value.dtype} (layout {value.layout}) in column '
      f'{path or "?"}: {e}'
    ) from e


def to_numpy(value: Any, path: str = '') -> np.ndarray:
  """`value` as a numpy array, without a copy where its memory allows.

  Scalars, numpy arrays, anything with ``__array__`` or the buffer protocol
  (a ``jax.Array`` is fetched to the host by its own ``__array__``: no copy
  on the CPU), eager ``tf.Tensor`` (``.numpy()``) and CPU ``torch.Tensor``
  (a view of its memory; tensors on other devices raise ValueError naming
  `path`). Neither torch, jax nor TensorFlow is imported here.
  """
  if isinstance(value, np.ndarray):
    return value
  if _is_torch_tensor(value):
    return _torch_to_numpy(value, path)
  if hasattr(value, 'numpy'):
    value = value.numpy()
  return np.asarray(value)


_UINT64_MASK = (1 << 64) - 1


def to_uint64_keys(keys: Any, what: str = 'keys') -> np.ndarray:
  """Item keys (a sequence, numpy array, tensor or jax array) as uint64 [n].

  uint64 keys are taken as they are; int64 keys are reinterpreted bit for
  bit (the lossless form of a uint64 key in a signed 64-bit tensor); other
  integer dtypes must be non-negative. Floats are refused: they cannot hold
  every 64-bit key.
  """
  if isinstance(keys, (list, tuple)) or isinstance(keys, int):
    # Python ints, possibly beyond int64; negative ones are int64 bits.
    flat = keys if isinstance(keys, (list, tuple)) else [keys]
    if all(isinstance(k, (int, np.integer)) for k in flat):
      return np.array([int(k) & _UINT64_MASK for k in flat], np.uint64)
  array = to_numpy(keys, what).reshape(-1)
  if array.dtype == np.uint64:
    return array
  if array.size == 0:
    return array.astype(np.uint64)
  if array.dtype == np.int64:
    return array.view(np.uint64)
  if array.dtype.kind == 'O':  # Python ints beyond int64
    return np.array([int(k) for k in array], dtype=np.uint64)
  if array.dtype.kind not in 'iu':
    raise ValueError(
      f'{what} must be integers (uint64 keys, or int64 holding their bits), '
      f'got dtype {array.dtype}'
    )
  if array.dtype.kind == 'i' and (array < 0).any():
    raise ValueError(
      f'{what} of dtype {array.dtype} must be non-negative (only int64 may '
      'hold the bits of a uint64 key)'
    )
  return array.astype(np.uint64)


def priority_updates(keys: Any, priorities: Any) -> List[Tuple[int, float]]:
  """(key, priority) pairs from two equally long arrays/tensors/sequences."""
  flat_keys = to_uint64_keys(keys)
  flat_priorities = (
    to_numpy(priorities, 'priorities').reshape(-1).astype(np.float64)
  )
  if flat_keys.shape != flat_priorities.shape:
    raise ValueError(
      f'keys and priorities must have the same number of elements, got '
      f'{flat_keys.size} keys and {flat_priorities.size} priorities'
    )
  return list(zip(flat_keys.tolist(), flat_priorities.tolist()))


def to_core_tensor(value: Any, path: str = '') -> CoreTensor:
  """Converts one leaf for the core; `path` names it in errors."""
  array = to_numpy(value, path)
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
