"""Item selectors: how a table picks items to sample and to evict.

Each selector is a ``pybind.ItemSelector`` (``pybind.UniformSelector``, ...,
as in Reverb) describing itself with a ``KeyDistributionOptions`` proto; the
C++ table builds its own selector from it. A selector object may serve one
table in one role only (sampler or remover): reusing it raises ``ValueError``
instead of corrupting a table as in Reverb.
"""

import functools

from tf_reverb import pybind
from tf_reverb.proto import schema_pb2

__all__ = [
  'ItemSelector',
  'Uniform',
  'Prioritized',
  'Fifo',
  'Lifo',
  'HeapSelector',
  'MinHeap',
  'MaxHeap',
]


ItemSelector = pybind.ItemSelector
"""The base class of every selector (Reverb's name, ``pybind.ItemSelector``)."""


class _Options:
  """Adds the ``options`` proto view to a selector class."""

  @property
  def options(self) -> schema_pb2.KeyDistributionOptions:
    """The ``KeyDistributionOptions`` proto describing this selector."""
    return schema_pb2.KeyDistributionOptions.FromString(
      self.serialized_options()
    )


class Uniform(_Options, pybind.UniformSelector):
  """Samples items uniformly at random."""


class Prioritized(_Options, pybind.PrioritizedSelector):
  """Samples item i with probability p_i^a / sum_j p_j^a."""

  def __init__(self, priority_exponent: float):
    """Prioritized sampling with exponent `priority_exponent` (a)."""
    super().__init__(float(priority_exponent))


class Fifo(_Options, pybind.FifoSelector):
  """Selects the oldest item."""


class Lifo(_Options, pybind.LifoSelector):
  """Selects the newest item."""


class HeapSelector(_Options, pybind.HeapSelector):
  """Selects the item of lowest (min_heap) or highest priority.

  Ties go to the item inserted or updated least recently.
  """

  def __init__(self, min_heap: bool):
    """A min-heap (`min_heap`) or max-heap selector."""
    super().__init__(bool(min_heap))


MinHeap = functools.partial(HeapSelector, True)
"""``MinHeap()``: a ``HeapSelector`` selecting the item of lowest priority."""

MaxHeap = functools.partial(HeapSelector, False)
"""``MaxHeap()``: a ``HeapSelector`` selecting the item of highest priority."""


def selector_from_proto(
  options: schema_pb2.KeyDistributionOptions,
) -> ItemSelector:
  """Builds a fresh selector from its options proto.

  Raises:
    ValueError: when the set distribution is a boolean set to false.
    NotImplementedError: when no distribution is set.
  """
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
