"""``reverb.server_executable.reverb_config_pb2`` (ReverbServerConfig):
tf_reverb's ``tf_reverb.proto.checkpoint_pb2``, which holds it."""

from tf_reverb.cc import alias_module

alias_module(__name__, 'tf_reverb.proto.checkpoint_pb2')
