"""Replays one fuzz case: `python tests/grpc_fuzz show|send SEED INDEX
[HOST:PORT]` (or `python -m grpc_fuzz ...` with tests/ on the path); see
``fuzzer.main``."""

import os
import sys

if not __package__:
  # Run as a directory: its own path is sys.path[0]; import the package from
  # tests/ instead.
  sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  from grpc_fuzz.fuzzer import main  # pylint: disable=g-import-not-at-top
else:
  from .fuzzer import main

sys.exit(main(sys.argv[1:]))
