"""Checkpointers: where a server saves its tables and restores them from.

``Server(checkpointer=...)`` restores the newest complete checkpoint at start
and ``Client.checkpoint()`` writes a new one. Unlike Reverb's, checkpoints are
crash-safe (written under a temporary name, published atomically), do not
block the tables while written, have no size ceiling, are incremental (a
checkpoint writes only the chunks earlier ones do not hold), and retention
only deletes checkpoints the checkpointer wrote itself.
"""

import abc
import tempfile
from typing import Optional

from tf_reverb import pybind

__all__ = [
  'CheckpointerBase',
  'DefaultCheckpointer',
  'TempDirCheckpointer',
  'default_checkpointer',
]


class CheckpointerBase(metaclass=abc.ABCMeta):
  """Base class of checkpointers."""

  @abc.abstractmethod
  def internal_checkpointer(self) -> pybind.Checkpointer:
    """The C++ checkpointer the server uses."""


class DefaultCheckpointer(CheckpointerBase):
  """Checkpoints into directories under `path`.

  Args:
    path: root directory of the checkpoints (created when missing).
    group: unsupported, as in Reverb; must be empty.
    fallback_checkpoint_path: a checkpoint directory to load when `path`
      holds no complete checkpoint.
    keep_latest: complete checkpoints kept after each save.
    fall_back_to_older: when the newest checkpoint is corrupt, load the
      newest good one instead of failing (each failure is logged).
    keep_table_config: when a checkpointed table's configuration differs from
      the server's table, keep the server's (new rate limiter, new max_size
      with eviction, ...) instead of the checkpoint's. Differences are logged
      either way.
    incremental: write only the chunks that earlier checkpoints of `path` do
      not hold and reference the others, so a checkpoint costs about what
      changed since the last one (the default). An earlier checkpoint whose
      chunks a kept one uses stays on disk as a chunk file until none does.
      ``Client.checkpoint(full=True)`` writes one self-contained checkpoint
      (the format dm-reverb restores); ``incremental=False`` makes every
      checkpoint self-contained.
  """

  def __init__(
    self,
    path: str,
    group: str = '',
    fallback_checkpoint_path: Optional[str] = None,
    *,
    keep_latest: int = 1,
    fall_back_to_older: bool = False,
    keep_table_config: bool = False,
    incremental: bool = True,
  ):
    if group:
      raise ValueError('Setting non-empty group is not supported')
    if keep_latest < 1:
      raise ValueError(f'keep_latest ({keep_latest}) must be >= 1')
    self._path = path
    self._checkpointer = pybind.Checkpointer(
      root=path,
      keep_latest=keep_latest,
      fallback_checkpoint_path=fallback_checkpoint_path or '',
      fall_back_to_older=fall_back_to_older,
      keep_table_config=keep_table_config,
      incremental=incremental,
    )

  @property
  def path(self) -> str:
    """The root directory of the checkpoints."""
    return self._path

  def internal_checkpointer(self) -> pybind.Checkpointer:
    return self._checkpointer

  def __repr__(self) -> str:
    return self._checkpointer.debug_string()


class TempDirCheckpointer(DefaultCheckpointer):
  """A ``DefaultCheckpointer`` in a fresh temporary directory."""

  def __init__(self, **kwargs):
    super().__init__(
      tempfile.mkdtemp(prefix='tf_reverb_checkpoints_'), **kwargs
    )


def default_checkpointer(group: Optional[str] = None) -> CheckpointerBase:
  """The checkpointer of a server created without one (a temp directory)."""
  del group  # Accepted for Reverb compatibility.
  return TempDirCheckpointer()
