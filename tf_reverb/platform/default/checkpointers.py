"""``reverb.platform.default.checkpointers``: the module Reverb exports as
``reverb.checkpointers`` (the implementation is ``tf_reverb.checkpointers``)."""

from tf_reverb.checkpointers import CheckpointerBase
from tf_reverb.checkpointers import default_checkpointer
from tf_reverb.checkpointers import DefaultCheckpointer
from tf_reverb.checkpointers import TempDirCheckpointer

__all__ = [
  'CheckpointerBase',
  'DefaultCheckpointer',
  'TempDirCheckpointer',
  'default_checkpointer',
]
