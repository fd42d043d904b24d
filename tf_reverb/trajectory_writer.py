"""``TrajectoryWriter``: the column-oriented, asynchronous writer.

Created with ``Client.trajectory_writer``. Each leaf of the appended steps is a
column (dm-tree order; new paths become new columns, appended at the end).
``history`` exposes the recent references of every column; slices of it become
the columns of items (``create_item``). Chunking, compression and sending run
in C++ (server/writer/); a background thread owns one InsertStream, so
``append`` and ``create_item`` do not wait for the network.

Differences from Reverb, all additive: ``close`` may be followed by nothing
(as in Reverb), and when too many items are pending (queued or unconfirmed)
``create_item`` blocks until the server confirms some instead of letting
memory grow without bound.
"""

import collections
import itertools
import operator
import re
from typing import (
  Any,
  Deque,
  Dict,
  Iterator,
  List,
  Optional,
  Sequence,
  Tuple,
  Union,
)

import numpy as np
import tree

from tf_reverb import _nest
from tf_reverb import _options
from tf_reverb import errors

__all__ = ['TrajectoryWriter', 'TrajectoryColumn']

# A dm-tree path, e.g. ('obs',) or (0, 'a').
Path = Tuple[Union[int, str], ...]

# Queued + unconfirmed items after which create_item blocks.
DEFAULT_MAX_QUEUED_ITEMS = 10000


class TrajectoryColumn:
  """A column of an item: a sequence of data references of one history column.

  Squeezed columns hold exactly one reference and drop the leading (time)
  dimension of the data when sampled.
  """

  __slots__ = ('_data_references', '_squeeze', '_path')

  def __init__(
    self,
    data_references: Sequence[Any],
    *,
    squeeze: bool = False,
    path: Optional[Path] = None,
  ):
    """Creates a column over `data_references` (``pybind.WeakCellRef``s).

    Raises:
      ValueError: if `squeeze` is set and there is not exactly one reference,
        or if any reference is None (no data at that step, or no longer
        kept alive).
    """
    if squeeze and len(data_references) != 1:
      raise ValueError(
        f'Columns must contain exactly one data reference when squeeze set, '
        f'got {len(data_references)}'
      )
    if any(ref is None for ref in data_references):
      raise ValueError(
        'TrajectoryColumns cannot contain any None data references, got '
        f'{list(data_references)!r} for TrajectoryColumn at path {path}'
      )
    self._data_references = tuple(data_references)
    self._squeeze = squeeze
    self._path = path

  @classmethod
  def _trusted(
    cls, refs: Tuple[Any, ...], squeeze: bool, path: Optional[Path]
  ) -> 'TrajectoryColumn':
    """A column over `refs` known to hold no None (no argument checks)."""
    column = object.__new__(cls)
    column._data_references = refs
    column._squeeze = squeeze
    column._path = path
    return column

  def __len__(self) -> int:
    return len(self._data_references)

  def __iter__(self) -> Iterator[Any]:
    return iter(self._data_references)

  def __getitem__(self, index) -> 'TrajectoryColumn':
    if isinstance(index, (int, np.integer)):
      return TrajectoryColumn(
        [self._data_references[index]], squeeze=True, path=self._path
      )
    if isinstance(index, slice):
      return TrajectoryColumn(self._data_references[index], path=self._path)
    if isinstance(index, list):
      return TrajectoryColumn(
        [self._data_references[i] for i in index], path=self._path
      )
    raise TypeError(
      f'{type(self).__name__} indices must be integers, slices or lists of '
      f'integers, not {type(index).__name__}'
    )

  def __repr__(self) -> str:
    return (
      f'TrajectoryColumn(path={self._path}, len={len(self)}, '
      f'squeeze={self._squeeze})'
    )

  @property
  def is_squeezed(self) -> bool:
    """Whether the leading dimension is dropped (exactly one reference)."""
    return self._squeeze

  @property
  def path(self) -> Optional[Path]:
    """The path of the history column the references come from, if known."""
    return self._path

  @property
  def shape(self) -> Tuple[Optional[int], ...]:
    """Step shape if squeezed, else (len, *step shape)."""
    step_shape = tuple(self._data_references[0].shape)
    return step_shape if self._squeeze else (len(self),) + step_shape

  @property
  def dtype(self) -> np.dtype:
    """numpy dtype of the column (object for strings)."""
    return self._data_references[0].dtype

  def numpy(self) -> np.ndarray:
    """Copies the referenced data into a numpy array (stacked unless squeezed).

    Raises:
      RuntimeError: if any reference has expired.
    """
    values = [ref.numpy() for ref in self._data_references]
    if self._squeeze:
      return values[0]
    return np.stack(values)

  def _to_core(self) -> Tuple[List[Any], bool]:
    return list(self._data_references), self._squeeze


class _EpisodeSteps:
  """The number of history steps of the episode, shared by all columns."""

  __slots__ = ('count',)

  def __init__(self):
    self.count = 0


class _ColumnHistory:
  """The references of one column over the steps of the current episode.

  Indices are relative to the whole episode (``len`` = steps so far); only the
  last `buffer_size` references are retained, older positions read as None.
  """

  __slots__ = ('_path', '_refs', '_steps')

  def __init__(self, path: Path, steps: '_EpisodeSteps', buffer_size: int):
    self._path = path
    # The writer appends to (and clears) _refs directly.
    self._refs: Deque[Any] = collections.deque(
      [None] * min(steps.count, buffer_size), maxlen=buffer_size
    )
    self._steps = steps

  def __len__(self) -> int:
    return self._steps.count

  def _ref_at(self, index: int) -> Any:
    num_steps = self._steps.count
    if index < 0:
      index += num_steps
    if not 0 <= index < num_steps:
      raise IndexError(f'History index out of range for column {self._path}')
    position = index - (num_steps - len(self._refs))
    return self._refs[position] if position >= 0 else None

  def __getitem__(self, index) -> TrajectoryColumn:
    if type(index) is slice:  # pylint: disable=unidiomatic-typecheck
      num_steps = self._steps.count
      start, stop, step = index.indices(num_steps)
      first = num_steps - len(self._refs)  # episode index of _refs[0]
      if step == 1 and first <= start < stop:
        # Contiguous and retained: slice the references in one go.
        refs = tuple(itertools.islice(self._refs, start - first, stop - first))
        if None not in refs:
          return TrajectoryColumn._trusted(refs, False, self._path)  # pylint: disable=protected-access
        return TrajectoryColumn(refs, path=self._path)
      return TrajectoryColumn(
        [self._ref_at(i) for i in range(start, stop, step)], path=self._path
      )
    if isinstance(index, (int, np.integer)):
      return TrajectoryColumn(
        [self._ref_at(int(index))], squeeze=True, path=self._path
      )
    if isinstance(index, list):
      return TrajectoryColumn(
        [self._ref_at(int(i)) for i in index], path=self._path
      )
    raise TypeError(
      f'_ColumnHistory indices must be integers, slices or lists of '
      f'integers, not {type(index).__name__}'
    )

  def __repr__(self) -> str:
    return f'_ColumnHistory(path={self._path}, len={len(self)})'


def _merge_structure(old: Any, new: Any) -> Any:
  """The union of two nests (None leaves): new keys/positions are added."""
  if old is None:
    return tree.map_structure(lambda _: None, new)
  if isinstance(old, collections.abc.Mapping) and isinstance(
    new, collections.abc.Mapping
  ):
    merged = dict(old)
    for key, value in new.items():
      merged[key] = _merge_structure(old.get(key), value)
    return type(old)(merged) if not isinstance(old, dict) else merged
  if (
    isinstance(old, (list, tuple))
    and isinstance(new, (list, tuple))
    and not isinstance(old, str)
  ):
    items = [
      _merge_structure(
        old[i] if i < len(old) else None, new[i] if i < len(new) else None
      )
      for i in range(max(len(old), len(new)))
    ]
    if hasattr(old, '_fields'):  # namedtuple
      return type(old)(*items)
    return type(old)(items)
  return old


def _is_leaf(value: Any) -> bool:
  return not isinstance(value, (dict, list, tuple, collections.abc.Mapping))


def _flat_step_layout(data: Any) -> Tuple[Any, Any]:
  """(layout key, values) of a dict/list/tuple step, else (None, None).

  The key names the container, its keys or length and the type of every
  value, so a step of a known key is flat exactly when the first one was.
  """
  kind = type(data)
  if kind is dict:
    values = tuple(data.values())
    return (tuple(data), tuple(map(type, values))), values
  if kind is list or kind is tuple:
    return (kind, tuple(map(type, data))), data
  return None, None


def _getter(indices: Sequence[int]) -> Any:
  """seq -> tuple(seq[i] for i in indices), in C."""
  if not indices:
    return lambda seq: ()
  if len(indices) == 1:
    index = indices[0]
    return lambda seq: (seq[index],)
  return operator.itemgetter(*indices)


class _FlatPlan:
  """How the values of a flat step layout map to the writer's columns."""

  __slots__ = (
    'columns',
    'num_columns',
    'to_columns',
    'from_columns',
    'keys',
    'kind',
  )

  def __init__(self, data: Any, columns: Sequence[int], num_columns: int):
    # columns[i]: the column of the i-th value of `data`.
    self.columns = tuple(columns)
    self.num_columns = num_columns
    position = {column: i for i, column in enumerate(columns)}
    # Only used while the layout sets every column exactly once.
    self.to_columns = (
      _getter([position[c] for c in range(num_columns)])
      if sorted(columns) == list(range(num_columns))
      else None
    )
    self.from_columns = _getter(columns)
    self.kind = type(data)
    self.keys = tuple(data) if self.kind is dict else None

  def structure(self, refs: Sequence[Any]) -> Any:
    """The step's references (one per column) in the layout's structure."""
    step_refs = self.from_columns(refs)
    if self.kind is dict:
      return dict(zip(self.keys, step_refs))
    return list(step_refs) if self.kind is list else step_refs


def _flatten_with_path(structure: Any) -> List[Tuple[Path, Any]]:
  """tree.flatten_with_path, with fast paths for flat dicts, lists, tuples."""
  if type(structure) is dict and all(  # pylint: disable=unidiomatic-typecheck
    _is_leaf(v) for v in structure.values()
  ):
    return [((key,), structure[key]) for key in sorted(structure)]
  if type(structure) in (list, tuple) and all(_is_leaf(v) for v in structure):
    return [((i,), value) for i, value in enumerate(structure)]
  return tree.flatten_with_path(structure)


_COLUMN_RE = re.compile(r'column (\d+)')


class TrajectoryWriter:
  """Writes steps into chunks and trajectories of them into tables.

  Use ``Client.trajectory_writer`` to create one.

  ``append`` adds a step (a nest of arrays); ``history`` gives, per column,
  the steps still kept, and ``create_item`` inserts an item over any slice
  of them. Data reaches the server in chunks, asynchronously; ``flush``
  waits for the confirmations and ``end_episode`` starts a new episode.

  Example:
    ```python
    import numpy as np
    import tf_reverb as reverb

    server = reverb.Server(tables=[reverb.Table.queue('pairs', max_size=10)],
                           host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for step in range(4):
        writer.append({'obs': np.float32(step), 'action': np.int32(step)})
        if step >= 1:  # an item over the last two observations
          writer.create_item('pairs', priority=1.0, trajectory={
              'obs': writer.history['obs'][-2:],
              'action': writer.history['action'][-1]})
      writer.end_episode()
    print(client.server_info()['pairs'].current_size)  # 3
    server.stop()
    ```
  """

  def __init__(self, cpp_writer: Any):
    """Wraps a ``pybind.TrajectoryWriter`` (use Client.trajectory_writer)."""
    self._writer = cpp_writer
    # The union of the appended steps' structures (None leaves); a bare value
    # step (``append(7)``) makes it None, the structure of one leaf.
    self._structure: Any = None
    self._has_structure = False
    self._column_history: List[_ColumnHistory] = []
    self._path_to_column: Dict[Path, int] = {}
    self._column_paths: List[Path] = []
    self._pending_configs: Dict[Path, Tuple[int, int]] = {}
    # History steps, including an open partial step (shared by the columns).
    self._steps = _EpisodeSteps()
    # Bound deque.append of every column's history, in column order.
    self._history_appends: List[Any] = []
    self._last_step_is_open = False
    self._open_step_paths: set = set()
    self._closed = False
    self._history_cache: Any = None  # rebuilt when columns are added
    # Flat steps (dicts/lists/tuples of leaves) seen before: layout key ->
    # column index of each leaf in iteration order.
    self._flat_plans: Dict[Any, Tuple[int, ...]] = {}

  def __enter__(self) -> 'TrajectoryWriter':
    return self

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    if exc_type is None or not issubclass(exc_type, errors.ReverbError):
      self.flush()

  def __del__(self):
    writer = getattr(self, '_writer', None)
    if writer is not None:
      writer.close()

  @property
  def history(self) -> Any:
    """The writer's structure with a column history per leaf.

    Raises:
      RuntimeError: before the first ``append``.
    """
    if not self._has_structure:
      raise RuntimeError(
        'history cannot be accessed before `append` is called at least once.'
      )
    if self._history_cache is None:
      self._history_cache = tree.map_structure_with_path(
        lambda path, _: self._column_history[self._path_to_column[path]],
        self._structure,
      )
    return self._history_cache

  @property
  def episode_steps(self) -> int:
    """Number of (non-partial) steps appended since the episode started."""
    return self._writer.episode_steps

  @property
  def max_num_keep_alive_refs(self) -> int:
    """Largest num_keep_alive_refs of any column (the history buffer size)."""
    pending = [config[0] for config in self._pending_configs.values()]
    return max([self._writer.max_num_keep_alive_refs] + pending)

  def configure(
    self,
    path: Path,
    *,
    num_keep_alive_refs: int,
    max_chunk_length: Optional[int],
  ) -> None:
    """Overrides the chunking of the column at `path`.

    Args:
      path: the dm-tree path of the column, e.g. ``('obs',)`` or ``(0,)``.
      num_keep_alive_refs: how many recent references of the column stay
        usable for items.
      max_chunk_length: constant chunk length (<= num_keep_alive_refs), or
        None for auto-tuned chunks.

    Raises:
      ValueError: for invalid values.
      RuntimeError: if the column has unchunked data (flush first).
    """
    if num_keep_alive_refs < 1:
      raise ValueError(
        f'num_keep_alive_refs ({num_keep_alive_refs}) must be a positive '
        'integer'
      )
    if max_chunk_length is not None and not (
      0 < max_chunk_length <= num_keep_alive_refs
    ):
      raise ValueError(
        f'max_chunk_length ({max_chunk_length}) must be None or a positive '
        f'integer <= num_keep_alive_refs ({num_keep_alive_refs})'
      )
    path = tuple(path)
    config = (num_keep_alive_refs, max_chunk_length or 0)
    if path in self._path_to_column:
      self._writer.configure(self._path_to_column[path], *config)
    else:
      self._pending_configs[path] = config

  def _add_column(self, path: Path) -> int:
    index = len(self._column_paths)
    if path in self._pending_configs:
      self._writer.configure(index, *self._pending_configs.pop(path))
    self._path_to_column[path] = index
    self._column_paths.append(path)
    history = _ColumnHistory(path, self._steps, self.max_num_keep_alive_refs)
    self._column_history.append(history)
    self._history_appends.append(history._refs.append)  # pylint: disable=protected-access
    return index

  def _rewrite_error(self, error: Exception) -> Exception:
    message = _COLUMN_RE.sub(
      lambda m: (
        'column ' + str(self._column_paths[int(m.group(1))])
        if int(m.group(1)) < len(self._column_paths)
        else m.group(0)
      ),
      str(error),
    )
    return type(error)(message)

  def append(self, data: Any, *, partial_step: bool = False) -> Any:
    """Appends one step (a nest of arrays, scalars, eager tensors or None).

    Args:
      data: the step. New paths become new columns; None leaves mean no data
        for that column at this step.
      partial_step: keep the step open; later appends fill other columns of
        the same step. The step counter advances on the next full append.

    Returns:
      The data references of the step, in the structure of `data` (None
      where a leaf was None).

    Raises:
      ValueError: for a dtype/shape different from the column's first value
        (naming the column), unsupported data, or a column set twice in one
        step.
    """
    if self._closed:
      raise RuntimeError('TrajectoryWriter::Close has been called.')
    layout, values = _flat_step_layout(data)
    if layout is not None and not self._open_step_paths:
      plan = self._flat_plans.get(layout)
      if plan is not None:
        return self._append_flat(values, plan, partial_step)
    flat = _flatten_with_path(data)
    if not self._has_structure or any(
      path not in self._path_to_column for path, _ in flat
    ):
      self._structure = _merge_structure(self._structure, data)
      self._has_structure = True
      self._history_cache = None
    columns: List[Any] = [None] * len(self._column_paths)
    set_indices = []
    indices = []
    path_to_column = self._path_to_column
    open_step_paths = self._open_step_paths
    for path, value in flat:
      index = path_to_column.get(path)
      if index is None:
        index = self._add_column(path)
        columns.append(None)
      indices.append(index)
      if value is None:
        continue
      if open_step_paths and path in open_step_paths:
        raise ValueError(
          f'Field {path} has already been set in the active step by previous '
          '(partial) append call and thus must be omitted or set to None '
          f'but got: {value}'
        )
      # Converted in C++ (_dtypes.to_core_tensor for other than numpy values
      # and numbers; errors name the column index, rewritten to the path).
      columns[index] = value
      set_indices.append(index)
    refs = self._append_columns(columns, set_indices, partial_step)
    if not partial_step and layout is not None and all(map(_is_leaf, values)):
      self._flat_plans[layout] = _FlatPlan(
        data,
        [
          path_to_column[(k,)]
          for k in (data if type(data) is dict else range(len(data)))
        ],  # pylint: disable=unidiomatic-typecheck
        len(self._column_paths),
      )
    return _nest.unflatten_as(data, [refs[index] for index in indices])

  def _append_columns(
    self, columns: List[Any], set_indices: Sequence[int], partial_step: bool
  ) -> List[Any]:
    """Appends core `columns` (set at `set_indices`) and records the returned
    references, one per column, in the history."""
    try:
      refs = self._writer.append(columns, partial_step)
    except ValueError as e:
      raise self._rewrite_error(e) from e
    if not self._last_step_is_open:
      self._steps.count += 1
      for append, ref in zip(self._history_appends, refs):
        append(ref)
    else:
      for index in set_indices:
        self._column_history[index]._refs[-1] = refs[index]  # pylint: disable=protected-access
    self._last_step_is_open = partial_step
    if partial_step:
      self._open_step_paths.update(self._column_paths[i] for i in set_indices)
    else:
      self._open_step_paths.clear()
    return refs

  def _append_flat(
    self, values: Sequence[Any], plan: _FlatPlan, partial_step: bool
  ) -> Any:
    """append() of the `values` of a flat step whose layout was seen (no open
    partial step)."""
    if (
      plan.to_columns is not None
      and plan.num_columns == len(self._column_paths)
      and not partial_step
      and not self._last_step_is_open
    ):
      # The step sets every column: no scatter, no open-step bookkeeping.
      refs = self._append_columns(plan.to_columns(values), (), False)
      return plan.structure(refs)
    columns: List[Any] = [None] * len(self._column_paths)
    for index, value in zip(plan.columns, values):
      columns[index] = value
    # The set columns only matter when a step is (or stays) open.
    set_indices = (
      [index for index, value in zip(plan.columns, values) if value is not None]
      if (partial_step or self._last_step_is_open)
      else ()
    )
    return plan.structure(
      self._append_columns(columns, set_indices, partial_step)
    )

  def create_item(
    self,
    table: str,
    priority: float,
    trajectory: Any,
    *,
    policy_version: Optional[int] = None,
  ) -> None:
    """Queues an item of `table` whose columns are the leaves of `trajectory`.

    Args:
      table: the table to insert into.
      priority: the item's priority.
      trajectory: a nest of ``TrajectoryColumn`` (e.g. slices of ``history``).
      policy_version: the version of the policy that produced the item (a
        tf_reverb extension, see ``Client.set_policy_version``); None: the
        table's current version when the item is inserted.

    Raises:
      TypeError: if a leaf is not a TrajectoryColumn, or policy_version is
        not an int.
      ValueError: for an empty trajectory, NaN priority, a negative
        policy_version, expired references,
        inconsistent columns or (with validate_items) an unknown table or a
        signature mismatch.
    """
    flat = tree.flatten(trajectory)
    for column in flat:
      if type(column) is not TrajectoryColumn and not isinstance(  # pylint: disable=unidiomatic-typecheck
        column, TrajectoryColumn
      ):
        raise TypeError(
          f'All leaves of `trajectory` must be TrajectoryColumn but got '
          f'{type(column).__name__}: {column!r}'
        )
    self._writer.create_item(
      table,
      float(priority),
      [(column._data_references, column._squeeze) for column in flat],  # pylint: disable=protected-access
      _options.validate_policy_version(policy_version),
    )

  def flush(
    self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None
  ) -> None:
    """Sends pending items; blocks until at most `block_until_num_items` remain.

    Args:
      block_until_num_items: how many items may still be queued or
        unconfirmed when this returns.
      timeout_ms: give up after this long; None or <= 0 waits forever.

    Raises:
      ValueError: if block_until_num_items < 0.
      DeadlineExceededError: on timeout (sending continues in the
        background).
    """
    if block_until_num_items < 0:
      raise ValueError(
        f'block_until_num_items must be >= 0, got {block_until_num_items}'
      )
    timeout = -1 if timeout_ms is None or timeout_ms <= 0 else int(timeout_ms)
    errors.call_with_deadline(
      'Flush',
      timeout,
      lambda: self._writer.flush(block_until_num_items, timeout),
    )

  def end_episode(
    self, clear_buffers: bool = True, timeout_ms: Optional[int] = None
  ) -> None:
    """Flushes all items, then starts a new episode.

    Args:
      clear_buffers: drop the buffered data and history (True) or only
        finalize the open chunks (False). A chunk never spans episodes.
      timeout_ms: None waits forever, 0 checks once.

    Raises:
      DeadlineExceededError: on timeout; nothing is reset then.
    """
    timeout = -1 if timeout_ms is None else max(0, int(timeout_ms))
    errors.call_with_deadline(
      'End episode',
      timeout,
      lambda: self._writer.end_episode(clear_buffers, timeout),
    )
    if clear_buffers:
      self._steps.count = 0
      for history in self._column_history:
        history._refs.clear()  # pylint: disable=protected-access
    self._last_step_is_open = False
    self._open_step_paths.clear()

  def close(self) -> None:
    """Stops the background worker without flushing; later calls raise."""
    self._closed = True
    self._writer.close()
