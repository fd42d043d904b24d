"""Reverb's ``reverb.platform`` package path, kept for programs that use
``reverb.platform.checkpointers_lib`` (or ``reverb.platform.default``).

As in Reverb, ``checkpointers_lib`` is imported with the package, so
``reverb.platform.checkpointers_lib.DefaultCheckpointer(path=...)`` works
after a bare ``import reverb`` (TF-Agents' and Acme's examples do this).
"""

from tf_reverb.platform import checkpointers_lib
from tf_reverb.platform import default

__all__ = ['checkpointers_lib', 'default']
