"""Reverb's ``reverb.platform.default`` package: the default platform's
modules (``checkpointers``, which is ``reverb.checkpointers``)."""

from tf_reverb.platform.default import checkpointers

__all__ = ['checkpointers']
