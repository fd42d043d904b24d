"""Reverb's ``reverb.cc.checkpointing`` package path (see tf_reverb.cc)."""

# Its module is imported by path (``from tf_reverb.cc.checkpointing import
# checkpoint_pb2``); nothing for `import *`.
__all__ = []
