"""The standalone ``reverb_server`` (a C++ binary packaged with tf_reverb)."""

# The submodules, which `from tf_reverb.server_executable import *` imports.
__all__ = ['server_from_proto', 'server_main']
