"""Python modules of the wire protocol, generated from proto/ at build time."""

# The generated modules are imported by path (``from tf_reverb.proto import
# schema_pb2``); `import *` binds none of them (reverb_service_pb2_grpc would
# need grpcio, which tf_reverb does not require).
__all__ = []
