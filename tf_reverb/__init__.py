"""tf_reverb: an experience-replay service for reinforcement learning.

A drop-in for DeepMind Reverb (``import tf_reverb as reverb``): the same
Python API over a C++ core and gRPC server that is wire-compatible with
Reverb's. Importing this package does not import TensorFlow; the names that
need it (``TFClient``, ...) load it on first access.

Code that does ``import reverb`` runs on tf_reverb after
``tf_reverb.install_as_reverb()`` (see ``tf_reverb_as_reverb``).
"""

import importlib
import os
import sys
from typing import Any

# The core links Debian's gRPC and protobuf; TensorFlow exports its own copies
# into the global symbol scope. RTLD_DEEPBIND makes the core bind to its own
# (see DESIGN.md, "Symbol isolation"). The TF kernels dlopen this same file.
_dlopen_flags = sys.getdlopenflags()
sys.setdlopenflags(_dlopen_flags | os.RTLD_DEEPBIND)
try:
  from tf_reverb import pybind  # pylint: disable=g-import-not-at-top
except ImportError as _error:
  # Without this, a missing pybind.so surfaces as "cannot import name
  # 'pybind' from partially initialized module", which names no cause.
  _library = os.path.join(os.path.dirname(__file__), 'pybind.so')
  _what = ('is missing' if not os.path.exists(_library) else
           f'cannot be loaded ({_error})')
  raise ImportError(
      f"tf_reverb's native core {_library} {_what}: this installation's "
      'native build did not complete. In a checkout, run `bash '
      'scripts/setup.sh` (it shows the build error; Bazel\'s whole output '
      'goes to build/native_build.log) or `pip install --no-build-isolation '
      '.`.') from _error
finally:
  sys.setdlopenflags(_dlopen_flags)

# pylint: disable=g-import-not-at-top,g-bad-import-order
from tf_reverb import checkpointers
from tf_reverb import errors
from tf_reverb import item_selectors as selectors
from tf_reverb import rate_limiters
from tf_reverb import structured_writer as structured
from tf_reverb.client import Client
from tf_reverb.credentials import ChannelCredentials
from tf_reverb.credentials import ServerCredentials
from tf_reverb.errors import DeadlineExceededError
from tf_reverb.errors import ReverbError
from tf_reverb.numpy_iterator import NumpyIterator
from tf_reverb.replay_sample import ReplaySample
from tf_reverb.replay_sample import SampleInfo
from tf_reverb.server import Server
from tf_reverb.server import Table
from tf_reverb.trajectory_writer import TrajectoryColumn
from tf_reverb.trajectory_writer import TrajectoryWriter
from tf_reverb.writer import Writer
from tf_reverb_as_reverb import install_as_reverb

# Names whose modules import TensorFlow: resolved on first access.
_LAZY_NAMES = {
    'TFClient': 'tf_reverb.tf_client',
    'TFStructuredWriter': 'tf_reverb.tf_structured_writer',
    'WeightsPublisher': 'tf_reverb.keras_callbacks',
    'load_latest_weights': 'tf_reverb.keras_callbacks',
    'weights_table': 'tf_reverb.keras_callbacks',
    'TrajectoryDataset': 'tf_reverb.trajectory_dataset',
    'TimestepDataset': 'tf_reverb.timestep_dataset',
    'PatternDataset': 'tf_reverb.pattern_dataset',
}


# Submodules reachable as attributes (reverb.pattern_dataset, ...), imported
# on first access because most of them import TensorFlow.
_LAZY_MODULES = ('pattern_dataset', 'platform', 'server_executable',
                 'tf_client', 'tf_structured_writer', 'timestep_dataset',
                 'trajectory_dataset')


def __getattr__(name: str) -> Any:
  if name in _LAZY_MODULES:
    value = importlib.import_module(f'{__name__}.{name}')
  elif name in _LAZY_NAMES:
    value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
  else:
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  globals()[name] = value
  return value


def __dir__():
  return sorted(list(globals()) + list(_LAZY_NAMES) + list(_LAZY_MODULES))
