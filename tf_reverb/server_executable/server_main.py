"""Entry point of the ``reverb_server`` console script.

Replaces the Python process with the packaged C++ server binary, passing the
command line through (``--config``, ``--config_file``, ``--port``).
"""

import os
import sys

__all__ = ['app_run_main']

BINARY_PATH = os.path.join(
  os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
  'bin',
  'reverb_server',
)


def app_run_main() -> None:
  """Runs the server binary with this process's arguments."""
  if not os.access(BINARY_PATH, os.X_OK):
    sys.exit(
      f'reverb_server binary not found at {BINARY_PATH}; reinstall tf_reverb.'
    )
  os.execv(BINARY_PATH, [BINARY_PATH] + sys.argv[1:])


if __name__ == '__main__':
  app_run_main()
