"""Item selectors: how a table picks items to sample and to evict.

Each selector describes itself with a ``KeyDistributionOptions`` proto; the
C++ table builds its own selector from it. A selector object may serve one
table in one role only (sampler or remover): reusing it raises ``ValueError``
instead of corrupting a table as in Reverb.
"""

import functools

from tf_reverb import pybind
from tf_reverb.proto import schema_pb2


class ItemSelector:
  """Base class of the selectors; holds their options."""

  def __init__(self, options: schema_pb2.KeyDistributionOptions):
    self._options = options
    self._owner = None

  @property
  def options(self) -> schema_pb2.KeyDistributionOptions:
    """The ``KeyDistributionOptions`` proto describing this selector."""
    return self._options

  def claim(self, owner: str) -> None:
    """Marks the selector as used by `owner`; raises if already used."""
    if self._owner is not None:
      raise ValueError(
          f'{self!r} is already used as the {self._owner}; every table needs '
          'fresh selector objects for its sampler and its remover.')
    self._owner = owner

  def __repr__(self) -> str:
    return pybind.selector_debug_string(self._options.SerializeToString())


class Uniform(ItemSelector):
  """Samples items uniformly at random."""

  def __init__(self):
    super().__init__(
        schema_pb2.KeyDistributionOptions(uniform=True, is_deterministic=False))


class Prioritized(ItemSelector):
  """Samples item i with probability p_i^a / sum_j p_j^a."""

  def __init__(self, priority_exponent: float):
    options = schema_pb2.KeyDistributionOptions(is_deterministic=False)
    options.prioritized.priority_exponent = priority_exponent
    super().__init__(options)


class Fifo(ItemSelector):
  """Selects the oldest item."""

  def __init__(self):
    super().__init__(
        schema_pb2.KeyDistributionOptions(fifo=True, is_deterministic=True))


class Lifo(ItemSelector):
  """Selects the newest item."""

  def __init__(self):
    super().__init__(
        schema_pb2.KeyDistributionOptions(lifo=True, is_deterministic=True))


class HeapSelector(ItemSelector):
  """Selects the item of lowest (min_heap) or highest priority.

  Ties go to the item inserted or updated least recently.
  """

  def __init__(self, min_heap: bool):
    options = schema_pb2.KeyDistributionOptions(is_deterministic=True)
    options.heap.min_heap = min_heap
    super().__init__(options)


MinHeap = functools.partial(HeapSelector, True)
MaxHeap = functools.partial(HeapSelector, False)


def selector_from_proto(
    options: schema_pb2.KeyDistributionOptions) -> ItemSelector:
  """Builds a fresh selector from its options proto."""
  kind = options.WhichOneof('distribution')
  if kind == 'uniform' and options.uniform:
    return Uniform()
  if kind == 'fifo' and options.fifo:
    return Fifo()
  if kind == 'lifo' and options.lifo:
    return Lifo()
  if kind == 'heap':
    return HeapSelector(options.heap.min_heap)
  if kind == 'prioritized':
    return Prioritized(options.prioritized.priority_exponent)
  if kind is None:
    raise NotImplementedError(f'No distribution set in {options}')
  raise ValueError(f'Distribution {kind} is set to false in {options}')
