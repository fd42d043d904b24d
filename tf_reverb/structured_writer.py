"""``StructuredWriter`` and the pattern language (``reverb.structured``).

A pattern declares once how a stream of steps becomes items: build it from a
*reference step* (the step structure with each leaf replaced by a reference
that can be indexed like a history, ``ref[-1]`` or ``ref[-3:]``), wrap it in a
``Config`` with ``create_config`` (table, conditions, priority) and hand the
configs to ``Client.structured_writer``. Every ``append`` then creates the
items of each config whose conditions hold. The engine runs in C++
(server/patterns/); ``PatternDataset`` runs the same engine over a
``tf.data`` dataset.

Only ``create_config``, ``unpack_pattern`` and ``infer_signature`` import
TensorFlow (the pattern structure is a ``tensorflow.StructuredValue``).
"""

import math
import re
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import tree

from tf_reverb import _dtypes
from tf_reverb import errors
from tf_reverb.proto import patterns_pb2

__all__ = [
  'StructuredWriter',
  'Config',
  'PatternNode',
  'ReferenceStep',
  'Pattern',
  'PatternTransform',
  'Condition',
  'create_reference_step',
  'pattern_from_transform',
  'create_config',
  'unpack_pattern',
  'infer_signature',
  'add_buffer_length_conditions',
  'constant_priority_fn',
  'td_error',
]

Config = patterns_pb2.StructuredWriterConfig
"""A config: the pattern, table, priority and conditions of the items it makes
(``StructuredWriterConfig``; build it with ``create_config``)."""

PatternNode = patterns_pb2.PatternNode
"""One leaf of a pattern: a column (``flat_source_index``) and the slice of
its recent steps an item takes."""

# A condition of a config (built with ``Condition``).
ConditionProto = patterns_pb2.Condition

# Type names of Reverb's module, used in annotations by rlds and Acme.
ReferenceStep = Any
"""A reference step: the step structure with a ``_RefNode`` per leaf
(``create_reference_step``)."""

Pattern = Any
"""A pattern: a nest of ``PatternNode`` (what a transform of a reference step
returns)."""

PatternTransform = Callable[[ReferenceStep], Pattern]
"""A function from a reference step to a pattern (``pattern_from_transform``)."""


class _RefNode:
  """A leaf of a reference step: indexing it yields a ``PatternNode``."""

  def __init__(self, flat_source_index: int):
    self._index = flat_source_index

  @property
  def flat_source_index(self) -> int:
    """The flattened index of the step leaf this node refers to."""
    return self._index

  def __getitem__(self, key: Any) -> PatternNode:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
      return PatternNode(flat_source_index=self._index, stop=int(key))
    if isinstance(key, slice):
      node = PatternNode(flat_source_index=self._index)
      if key.start is not None:
        node.start = int(key.start)
      if key.stop is not None:
        node.stop = int(key.stop)
      if key.step is not None:
        node.step = int(key.step)
      return node
    raise ValueError(
      f'Unsupported key type {type(key).__name__} ({key!r}): reference '
      'nodes are indexed with an int (ref[-1]) or a slice (ref[-3:]).'
    )

  def __repr__(self) -> str:
    return f'_RefNode(flat_source_index={self._index})'


def create_reference_step(step_structure: Any) -> ReferenceStep:
  """`step_structure` with each leaf replaced by a reference node.

  Leaves are numbered in dm-tree order (dict keys sorted), the order in which
  ``StructuredWriter.append`` flattens steps.
  """
  flat = tree.flatten(step_structure)
  return tree.unflatten_as(
    step_structure, [_RefNode(i) for i in range(len(flat))]
  )


def pattern_from_transform(
  step_structure: Any, transform: PatternTransform
) -> Pattern:
  """``transform(create_reference_step(step_structure))``.

  Example: ``pattern_from_transform(step, lambda s: {'obs': s['obs'][-2:],
  'action': s['action'][-2]})``.
  """
  return transform(create_reference_step(step_structure))


def constant_priority_fn(value: float) -> patterns_pb2.Priority:
  """A priority that is always `value`."""
  return patterns_pb2.Priority(
    constant_fn=patterns_pb2.Priority.ConstantPriorityFn(value=value)
  )


def td_error(
  max_priority_weight: float,
  step_structure: Any,
  get_field_from_step_fn: Callable[[Any], Any],
) -> patterns_pb2.Priority:
  """A priority from the TD errors the item holds.

  The priority is ``w * max(|td|) + (1 - w) * mean(|td|)`` over the rows of
  the item column made from the step field that `get_field_from_step_fn`
  selects (scalar float32/float64/int32/int64 values).

  Args:
    max_priority_weight: w, in [0, 1].
    step_structure: the structure of the appended steps.
    get_field_from_step_fn: picks the TD-error leaf of a reference step.

  Raises:
    ValueError: if w is outside [0, 1] or the function does not return a leaf
      of the reference step.
  """
  if not 0 <= max_priority_weight <= 1:
    raise ValueError(
      f'max_priority_weight must be in [0, 1] but got {max_priority_weight}'
    )
  node = get_field_from_step_fn(create_reference_step(step_structure))
  if not isinstance(node, _RefNode):
    raise ValueError(
      'get_field_from_step_fn must return a leaf of the reference step but '
      f'returned {node!r}'
    )
  return patterns_pb2.Priority(
    td_error=patterns_pb2.Priority.TDError(
      max_priority_weight=max_priority_weight,
      flat_source_index=node.flat_source_index,
    )
  )


def create_config(
  pattern: Pattern,
  table: str,
  conditions: Sequence[ConditionProto] = (),
  priority: Optional[patterns_pb2.Priority] = None,
) -> Config:
  """A ``Config``: items of `table` shaped like `pattern`.

  Args:
    pattern: a nest of ``PatternNode`` (see ``pattern_from_transform``).
    table: the table the items go to.
    conditions: all must hold for an item to be created (see ``Condition``).
    priority: ``constant_priority_fn(1.0)`` when None.
  """
  from tensorflow.python.saved_model import nested_structure_coder  # pylint: disable=g-import-not-at-top

  structure = tree.map_structure(lambda _: None, pattern)
  return Config(
    flat=tree.flatten(pattern),
    pattern_structure=nested_structure_coder.encode_structure(
      structure
    ).SerializeToString(),
    table=table,
    priority=priority if priority is not None else constant_priority_fn(1.0),
    conditions=conditions,
  )


def unpack_pattern(config: Config) -> Pattern:
  """The pattern of `config` as a nest of ``PatternNode`` (a flat list when
  the config has no structure)."""
  if not config.pattern_structure:
    return list(config.flat)
  from tensorflow.core.protobuf import struct_pb2  # pylint: disable=g-import-not-at-top
  from tensorflow.python.saved_model import nested_structure_coder  # pylint: disable=g-import-not-at-top

  structure = nested_structure_coder.decode_proto(
    struct_pb2.StructuredValue.FromString(config.pattern_structure)
  )
  return tree.unflatten_as(structure, list(config.flat))


def _node_rows(node: PatternNode) -> Optional[int]:
  """Rows a node selects; None for a squeezed (single element) node."""
  if not node.HasField('start'):
    return None
  stop = node.stop if node.HasField('stop') else 0
  step = node.step if node.HasField('step') else 1
  return max(0, math.ceil((stop - node.start) / step))


def infer_signature(configs: Sequence[Config], step_spec: Any) -> Any:
  """The signature of the items `configs` create from steps of `step_spec`.

  Args:
    configs: configs of one table with one pattern structure.
    step_spec: nest of ``tf.TensorSpec`` (or anything with shape and dtype)
      describing one step.

  Returns:
    A nest of ``tf.TensorSpec`` named by path ('a/b'); a slice node gets the
    leading dimension ``ceil((stop - start) / step)``, and leading dimensions
    that differ between configs become None.

  Raises:
    ValueError: if there are no configs, or they differ in table, pattern
      structure, dtype, rank or non-leading dimensions.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  if not configs:
    raise ValueError('At least one config must be provided.')
  tables = sorted({c.table for c in configs})
  if len(tables) > 1:
    raise ValueError(
      'All configs must target the same table but provided configs '
      f'included {", ".join(tables)}.'
    )
  if any(c.pattern_structure != configs[0].pattern_structure for c in configs):
    raise ValueError(
      'All configs must have exactly the same pattern_structure. Got '
      f'{[unpack_pattern(c) for c in configs]}.'
    )
  if any(len(c.flat) != len(configs[0].flat) for c in configs):
    raise ValueError('All configs must have the same number of nodes.')
  structure = unpack_pattern(configs[0])
  node_paths = [path for path, _ in tree.flatten_with_path(structure)]
  flat_step = tree.flatten(step_spec)
  # Per node: the (dtype, shape) each config produces, in config order.
  produced: List[List[Any]] = [[] for _ in configs[0].flat]
  for config in configs:
    for i, node in enumerate(config.flat):
      if node.flat_source_index >= len(flat_step):
        raise ValueError(
          f'Node {i} references flat_source_index {node.flat_source_index} '
          f'but the step has only {len(flat_step)} leaves.'
        )
      source = flat_step[node.flat_source_index]
      shape = tf.TensorShape(source.shape)
      rows = _node_rows(node)
      if rows is not None:
        shape = tf.TensorShape([rows]).concatenate(shape)
      produced[i].append((tf.as_dtype(source.dtype), shape))
  merged = []
  for path, outputs in zip(node_paths, produced):
    dtypes = [dtype for dtype, _ in outputs]
    shapes = [shape for _, shape in outputs]
    if len(set(dtypes)) > 1:
      raise ValueError(
        f'Configs produce trajectories with multiple dtypes at {path}. '
        f'Got {dtypes}.'
      )
    shape = shapes[0]
    for other in shapes[1:]:
      if other.rank != shape.rank or (shape.rank and other[1:] != shape[1:]):
        raise ValueError(
          'Configs produce trajectories with incompatible shapes at '
          f'{path}. Got {shapes} (only the leading dimension may differ).'
        )
      if shape.rank and other[0] != shape[0]:
        shape = tf.TensorShape([None]).concatenate(shape[1:])
    merged.append((dtypes[0], shape))
  specs = [
    tf.TensorSpec(shape, dtype, name='/'.join(str(p) for p in path))
    for (dtype, shape), path in zip(merged, node_paths)
  ]
  return tree.unflatten_as(structure, specs)


class _ConditionBuilder:
  """The left side of a condition; comparison operators finish it."""

  def __init__(self, condition: patterns_pb2.Condition):
    self._condition = condition

  def _finish(self, **fields) -> patterns_pb2.Condition:
    condition = patterns_pb2.Condition()
    condition.CopyFrom(self._condition)
    for name, value in fields.items():
      setattr(condition, name, value)
    return condition

  def __mod__(self, mod: int) -> '_ConditionBuilder':
    if self._condition.HasField('mod_eq'):
      raise ValueError('Only one modulo can be applied to a condition.')
    condition = self._finish()
    condition.mod_eq.mod = int(mod)
    return _ConditionBuilder(condition)

  def __eq__(
    self, value: int
  ) -> patterns_pb2.Condition:  # pytype: disable=signature-mismatch
    if self._condition.HasField('mod_eq'):
      condition = self._finish()
      condition.mod_eq.eq = int(value)
      return condition
    return self._finish(eq=int(value))

  def __ne__(
    self, value: int
  ) -> patterns_pb2.Condition:  # pytype: disable=signature-mismatch
    condition = self.__eq__(value)
    condition.inverse = True
    return condition

  def _ordered(self, ge: int, inverse: bool) -> patterns_pb2.Condition:
    if self._condition.HasField('mod_eq'):
      raise ValueError('A modulo condition only supports == and !=.')
    return self._finish(ge=int(ge), inverse=inverse)

  def __ge__(self, value: int) -> patterns_pb2.Condition:
    return self._ordered(value, False)

  def __gt__(self, value: int) -> patterns_pb2.Condition:
    return self._ordered(value + 1, False)

  def __lt__(self, value: int) -> patterns_pb2.Condition:
    return self._ordered(value, True)

  def __le__(self, value: int) -> patterns_pb2.Condition:
    return self._ordered(value + 1, True)

  __hash__ = None  # comparisons build conditions; builders are not keys


class Condition:
  """Builders of the conditions a config requires before creating an item.

  ``Condition.step_index() % 2 == 0``, ``Condition.steps_since_applied() >=
  4``, ``Condition.data(step)['done'] == 1`` and ``Condition.is_end_episode()``
  each return a ``patterns_pb2.Condition``.
  """

  @staticmethod
  def step_index() -> _ConditionBuilder:
    """The episode step index of the newest step (0-based)."""
    return _ConditionBuilder(patterns_pb2.Condition(step_index=True))

  @staticmethod
  def steps_since_applied() -> _ConditionBuilder:
    """Steps since the config last created an item (1 on its first check)."""
    return _ConditionBuilder(patterns_pb2.Condition(steps_since_applied=True))

  @staticmethod
  def is_end_episode() -> patterns_pb2.Condition:
    """Holds only while ``end_episode`` is being called."""
    return patterns_pb2.Condition(is_end_episode=True, eq=1)

  @staticmethod
  def data(step_structure: Any) -> Any:
    """`step_structure` with leaves that compare the newest step's value.

    Values are scalar integers or bools (cast to int32); a missing or
    incomparable value makes the condition false.
    """
    return tree.map_structure(
      lambda node: _ConditionBuilder(
        patterns_pb2.Condition(flat_source_index=node.flat_source_index)
      ),
      create_reference_step(step_structure),
    )


def add_buffer_length_conditions(configs: Sequence[Config]) -> None:
  """Adds ``buffer_length >= max_age`` to each config lacking it (in place).

  The age of a node is ``|start|`` when start is set, else ``|stop|``; the
  condition keeps a config from firing before its oldest node has data.
  """
  for config in configs:
    max_age = max(
      (
        abs(n.start) if n.HasField('start') else abs(n.stop)
        for n in config.flat
      ),
      default=0,
    )
    if not any(
      c.buffer_length and c.HasField('ge') and not c.inverse and c.ge >= max_age
      for c in config.conditions
    ):
      config.conditions.append(
        patterns_pb2.Condition(buffer_length=True, ge=max_age)
      )


_COLUMN_RE = re.compile(r'column (\d+)')


class StructuredWriter:
  """Writes steps and creates the items of its configs as they apply.

  Create one with ``Client.structured_writer(configs)``.
  """

  def __init__(self, cpp_writer: Any):
    """Wraps a ``pybind.StructuredWriter`` (use Client.structured_writer)."""
    self._writer = cpp_writer

  @property
  def step_is_open(self) -> bool:
    """Whether a partial step is open (``append(..., partial_step=True)``)."""
    return self._writer.step_is_open

  def append(self, data: Any, *, partial_step: bool = False) -> None:
    """Appends one step and creates the items of every config that applies.

    Args:
      data: the step, a nest flattened in dm-tree order; None leaves are
        missing values. The flattened length must stay the same.
      partial_step: keep the step open so later appends fill other leaves.

    Raises:
      ValueError: for a flattened length differing from the first append's,
        a leaf set twice in one step, or a dtype/shape change of a used
        column (the message names the column's path).
    """
    flat = tree.flatten(data)
    columns = [
      None if value is None else _dtypes.to_core_tensor(value, str(i))
      for i, value in enumerate(flat)
    ]
    try:
      self._writer.append(columns, partial_step)
    except ValueError as e:
      paths = [path for path, _ in tree.flatten_with_path(data)]
      message = _COLUMN_RE.sub(
        lambda m: (
          f'column {m.group(1)} (path={paths[int(m.group(1))]})'
          if int(m.group(1)) < len(paths)
          else m.group(0)
        ),
        str(e),
      )
      raise ValueError(message) from e

  def flush(
    self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None
  ) -> None:
    """Sends pending items; blocks until at most `block_until_num_items` remain.

    Args:
      block_until_num_items: items that may still be pending on return.
      timeout_ms: None waits forever; 0 checks once.

    Raises:
      ValueError: if block_until_num_items < 0.
      DeadlineExceededError: on timeout.
    """
    if block_until_num_items < 0:
      raise ValueError(
        f'block_until_num_items must be >= 0, got {block_until_num_items}'
      )
    timeout = -1 if timeout_ms is None else max(0, int(timeout_ms))
    errors.call_with_deadline(
      'Flush',
      timeout,
      lambda: self._writer.flush(block_until_num_items, timeout),
    )

  def end_episode(
    self, clear_buffers: bool = True, timeout_ms: Optional[int] = None
  ) -> None:
    """Creates the end-of-episode items, flushes, and starts a new episode.

    Args:
      clear_buffers: also forget the buffered steps, so no item spans two
        episodes.
      timeout_ms: None waits forever; 0 checks once.

    Raises:
      DeadlineExceededError: on timeout; the end-of-episode items were
        created, but nothing was reset.
    """
    timeout = -1 if timeout_ms is None else max(0, int(timeout_ms))
    errors.call_with_deadline(
      'End episode',
      timeout,
      lambda: self._writer.end_episode(clear_buffers, timeout),
    )
