"""``reverb.cc.patterns_pb2``: tf_reverb's ``tf_reverb.proto.patterns_pb2``."""

from tf_reverb.cc import alias_module

alias_module(__name__, 'tf_reverb.proto.patterns_pb2')
