"""TensorFlow-free tensor specs: ``TensorSpec`` and ``DType``.

Table signatures are nests of specs. Without TensorFlow in the process,
``TableInfo.signature`` holds these (decoded by ``reverb_types``), and
``Table(signature=...)`` accepts them as well as ``tf.TensorSpec``. They
carry what items are checked against: a dtype (TensorFlow's DataType
numbering, so they travel unchanged), a shape whose unknown dimensions are
``None`` (``None`` as a whole for an unknown rank) and an optional name.
dm-tree treats them as leaves.
"""

from typing import Any, List, Optional, Sequence, Tuple, Type, Union

import numpy as np
import tree

from tf_reverb import _dtypes

__all__ = ['TensorSpec', 'DType', 'as_dtype', 'as_shape']

# DataType number -> (TensorFlow's name, numpy scalar type or None).
_DTYPES = {
  1: ('float32', np.float32),
  2: ('float64', np.float64),
  3: ('int32', np.int32),
  4: ('uint8', np.uint8),
  5: ('int16', np.int16),
  6: ('int8', np.int8),
  7: ('string', np.object_),
  8: ('complex64', np.complex64),
  9: ('int64', np.int64),
  10: ('bool', np.bool_),
  11: ('qint8', None),
  12: ('quint8', None),
  13: ('qint32', None),
  14: ('bfloat16', None),
  15: ('qint16', None),
  16: ('quint16', None),
  17: ('uint16', np.uint16),
  18: ('complex128', np.complex128),
  19: ('float16', np.float16),
  20: ('resource', None),
  21: ('variant', None),
  22: ('uint32', np.uint32),
  23: ('uint64', np.uint64),
}
_BY_NAME = {name: number for number, (name, _) in _DTYPES.items()}
_BY_NAME.update({'float': 1, 'double': 2, 'half': 19})

# A shape as specs hold it: dimensions (None: unknown), or None for an
# unknown rank.
Shape = Optional[Tuple[Optional[int], ...]]


class DType:
  """A tensor dtype by TensorFlow's DataType number, without TensorFlow.

  Compares equal to another ``DType``, a ``tf.DType``, a numpy dtype or
  type, and a dtype name ('float32', ...) of the same type.
  """

  __slots__ = ('_number',)

  def __init__(self, number: int):
    """The dtype of DataType `number` (ValueError for unknown numbers)."""
    if number not in _DTYPES:
      raise ValueError(f'Unknown DataType number {number}')
    self._number = int(number)

  @property
  def name(self) -> str:
    """TensorFlow's name of the dtype: 'float32', 'string', ..."""
    return _DTYPES[self._number][0]

  @property
  def as_datatype_enum(self) -> int:
    """The DataType number (as ``tf.DType.as_datatype_enum``)."""
    return self._number

  @property
  def as_numpy_dtype(self) -> Type[np.generic]:
    """The numpy scalar type (``np.object_`` for strings).

    Raises:
      TypeError: for dtypes numpy has no type of (bfloat16, quantized ...).
    """
    numpy_type = _DTYPES[self._number][1]
    if numpy_type is None:
      raise TypeError(f'{self.name} has no numpy equivalent')
    return numpy_type

  def __eq__(self, other: Any) -> bool:
    try:
      return self._number == as_dtype(other).as_datatype_enum
    except (TypeError, ValueError):
      return False

  def __ne__(self, other: Any) -> bool:
    return not self == other

  def __hash__(self) -> int:
    return hash(self._number)

  def __repr__(self) -> str:
    return f'tf_reverb.{self.name}'

  def __reduce__(self):
    return DType, (self._number,)


def as_dtype(value: Any) -> DType:
  """`value` (DType, tf.DType, DataType number, name, numpy dtype) as a DType.

  Raises:
    TypeError: for values that are no dtype.
  """
  if isinstance(value, DType):
    return value
  if value is None:  # np.dtype(None) would be float64
    raise TypeError('None is not a dtype')
  number = getattr(value, 'as_datatype_enum', None)  # tf.DType
  if isinstance(number, int):
    return DType(number)
  if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
    return DType(int(value))
  if isinstance(value, str) and value in _BY_NAME:
    return DType(_BY_NAME[value])
  try:
    numpy_dtype = np.dtype(value)
  except TypeError:
    raise TypeError(f'Cannot interpret {value!r} as a dtype') from None
  if numpy_dtype.kind in 'OSU':
    return DType(_dtypes.DT_STRING)
  number = _dtypes.NUMPY_TO_TF.get(numpy_dtype)
  if number is None:
    raise TypeError(f'Cannot interpret {value!r} as a dtype')
  return DType(number)


def as_shape(value: Any) -> Shape:
  """`value` (sequence of ints/None, tf.TensorShape, None) as a spec shape.

  Raises:
    TypeError: for values that are no shape.
    ValueError: for negative dimensions.
  """
  if value is None:
    return None
  if hasattr(value, 'as_list') and hasattr(value, 'rank'):  # tf.TensorShape
    if value.rank is None:
      return None
    value = value.as_list()
  if isinstance(value, (int, np.integer)):
    value = (value,)
  dims = []
  for d in value:
    d = getattr(d, 'value', d)  # tf.compat.v1.Dimension
    if d is None or (isinstance(d, (int, np.integer)) and d == -1):
      dims.append(None)
    elif (
      isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
    ):
      dims.append(int(d))
    else:
      raise ValueError(f'Invalid dimension {d!r} in shape {value!r}')
  return tuple(dims)


class TensorSpec:
  """The dtype, shape and name of a tensor (``tf.TensorSpec`` without TF).

  ``shape`` is a tuple of dimensions (``None`` for unknown ones), or ``None``
  for an unknown rank.
  """

  __slots__ = ('_shape', '_dtype', '_name')

  def __init__(
    self,
    shape: Union[Sequence[Optional[int]], Any, None],
    dtype: Any = 'float32',
    name: Optional[str] = None,
  ):
    """A spec of `shape` (see ``as_shape``), `dtype` (see ``as_dtype``)."""
    self._shape = as_shape(shape)
    self._dtype = as_dtype(dtype)
    self._name = name or None

  @classmethod
  def from_spec(cls, spec: Any) -> 'TensorSpec':
    """A TensorSpec with the shape, dtype and name of `spec` (any spec)."""
    if isinstance(spec, TensorSpec):
      return spec
    return cls(spec.shape, spec.dtype, getattr(spec, 'name', None))

  @property
  def shape(self) -> Shape:
    """Dimensions (None: unknown), or None for an unknown rank."""
    return self._shape

  @property
  def dtype(self) -> DType:
    """The dtype."""
    return self._dtype

  @property
  def name(self) -> Optional[str]:
    """The name, or None."""
    return self._name

  def is_compatible_with(self, value: Any) -> bool:
    """Whether `value` (a spec or an array) fits this spec."""
    if hasattr(value, 'dtype') and hasattr(value, 'shape'):
      other = TensorSpec(value.shape, value.dtype)
    else:
      array = np.asarray(value)
      other = TensorSpec(array.shape, array.dtype)
    if self._dtype != other.dtype:
      return False
    if self._shape is None or other.shape is None:
      return True
    return len(self._shape) == len(other.shape) and all(
      a is None or b is None or a == b for a, b in zip(self._shape, other.shape)
    )

  def __eq__(self, other: Any) -> bool:
    if not (hasattr(other, 'shape') and hasattr(other, 'dtype')):
      return False
    try:
      other = TensorSpec.from_spec(other)
    except (TypeError, ValueError):
      return False
    return (
      self._shape == other.shape
      and self._dtype == other.dtype
      and self._name == other.name
    )

  def __ne__(self, other: Any) -> bool:
    return not self == other

  def __hash__(self) -> int:
    return hash((self._shape, self._dtype, self._name))

  def __repr__(self) -> str:
    shape = 'None' if self._shape is None else repr(self._shape)
    return (
      f'TensorSpec(shape={shape}, dtype={self._dtype!r}, name={self._name!r})'
    )

  def __reduce__(self):
    return TensorSpec, (self._shape, self._dtype, self._name)


def flat_columns(signature: Any) -> List[Tuple[int, Optional[List[int]]]]:
  """[(DataType number, dims with -1 for unknown, or None)] per leaf.

  `signature` is a nest of specs (``TensorSpec`` or ``tf.TensorSpec``); the
  leaves are taken in dm-tree order, as the writers number columns.
  """
  columns = []
  for leaf in tree.flatten(signature):
    spec = TensorSpec.from_spec(leaf)
    shape = None
    if spec.shape is not None:
      shape = [-1 if d is None else d for d in spec.shape]
    columns.append((spec.dtype.as_datatype_enum, shape))
  return columns
