"""Reverb's protocol-buffer modules at Reverb's import paths.

Programs written against dm-reverb import its generated modules from the C++
tree's paths: ``reverb.cc.schema_pb2`` (TableInfo, KeyDistributionOptions,
RateLimiterInfo, ...), ``reverb.cc.checkpointing.checkpoint_pb2``
(PriorityTableCheckpoint, RateLimiterCheckpoint) and
``reverb.cc.patterns_pb2`` (PatternNode, Condition, StructuredWriterConfig).
Each module here *is* tf_reverb's own module of those messages
(``tf_reverb.proto.*_pb2``: same message names and field numbers), so a
message built through either path is accepted wherever tf_reverb takes one.
"""

import importlib
import sys

# Nothing for `import *`: the modules here are imported by their paths
# (``from tf_reverb.cc import schema_pb2``), and ``alias_module`` is the
# plumbing of those modules, not API.
__all__ = []


def alias_module(name: str, target: str) -> None:
  """Makes the module being imported as `name` the module `target`.

  Called from the module body of `name`: the import system returns what
  ``sys.modules[name]`` holds once the body has run.
  """
  sys.modules[name] = importlib.import_module(target)
