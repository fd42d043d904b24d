"""``reverb.cc.checkpointing.checkpoint_pb2``: tf_reverb's
``tf_reverb.proto.checkpoint_pb2`` (PriorityTableCheckpoint,
RateLimiterCheckpoint)."""

from tf_reverb.cc import alias_module

alias_module(__name__, 'tf_reverb.proto.checkpoint_pb2')
