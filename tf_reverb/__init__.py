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
from typing import Any, TYPE_CHECKING

# The core links Debian's gRPC and protobuf; TensorFlow exports its own copies
# into the global symbol scope. RTLD_DEEPBIND makes the core bind to its own
# (docs/architecture/index.md, "One core per process"). The TF kernels dlopen this same file.
_dlopen_flags = sys.getdlopenflags()
sys.setdlopenflags(_dlopen_flags | os.RTLD_DEEPBIND)
try:
  from tf_reverb import pybind  # noqa: F401  pylint: disable=g-import-not-at-top
except ImportError as _error:
  # Without this, a missing pybind.so surfaces as "cannot import name
  # 'pybind' from partially initialized module", which names no cause.
  _library = os.path.join(os.path.dirname(__file__), 'pybind.so')
  _what = (
    'is missing'
    if not os.path.exists(_library)
    else f'cannot be loaded ({_error})'
  )
  raise ImportError(
    f"tf_reverb's native core {_library} {_what}: this installation's "
    'native build did not complete. In a checkout, run `bash '
    'scripts/setup.sh` (it shows the build error; Bazel\'s whole output '
    'goes to build/native_build.log) or `pip install --no-build-isolation '
    '.`.'
  ) from _error
finally:
  sys.setdlopenflags(_dlopen_flags)

# pylint: disable=g-import-not-at-top,g-bad-import-order
from tf_reverb import checkpointers
from tf_reverb import errors

# `x as x`: a re-export (PEP 484), for linters and type checkers.
from tf_reverb._version import __version__ as __version__
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

# What `from tf_reverb import *` binds: the top-level names that load without
# TensorFlow. The lazy names below (TFClient, the datasets, the Keras helpers)
# and the lazily imported submodules are deliberately left out: `import *`
# fetches every name of __all__, so listing them would run __getattr__ and
# import TensorFlow on every `import *` (and bind `platform` over the standard
# library's module of that name). They stay attributes of the package, are in
# dir(tf_reverb) and in the __all__ of the modules defining them;
# tests/test_package_files.py checks that `import *` leaves TensorFlow out.
__all__ = [
  'ChannelCredentials',
  'Client',
  'DeadlineExceededError',
  'NumpyIterator',
  'ReplaySample',
  'ReverbError',
  'SampleInfo',
  'Server',
  'ServerCredentials',
  'Table',
  'TrajectoryColumn',
  'TrajectoryWriter',
  'Writer',
  'checkpointers',
  'errors',
  'install_as_reverb',
  'rate_limiters',
  'selectors',
  'structured',
]

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
_LAZY_MODULES = (
  'pattern_dataset',
  'platform',
  'server_executable',
  'tf_client',
  'tf_structured_writer',
  'timestep_dataset',
  'trajectory_dataset',
)

if TYPE_CHECKING:
  # What the lazy names are, for type checkers only (py.typed): at run time
  # they are imported by __getattr__ on first access, not here.
  from tf_reverb import pattern_dataset as pattern_dataset
  from tf_reverb import platform as platform
  from tf_reverb import server_executable as server_executable
  from tf_reverb import tf_client as tf_client
  from tf_reverb import tf_structured_writer as tf_structured_writer
  from tf_reverb import timestep_dataset as timestep_dataset
  from tf_reverb import trajectory_dataset as trajectory_dataset
  from tf_reverb.keras_callbacks import (
    load_latest_weights as load_latest_weights,
  )
  from tf_reverb.keras_callbacks import weights_table as weights_table
  from tf_reverb.keras_callbacks import WeightsPublisher as WeightsPublisher
  from tf_reverb.pattern_dataset import PatternDataset as PatternDataset
  from tf_reverb.tf_client import TFClient as TFClient
  from tf_reverb.tf_structured_writer import (
    TFStructuredWriter as TFStructuredWriter,
  )
  from tf_reverb.timestep_dataset import TimestepDataset as TimestepDataset
  from tf_reverb.trajectory_dataset import (
    TrajectoryDataset as TrajectoryDataset,
  )


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
