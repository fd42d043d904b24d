"""Checks that an installed tf_reverb has all its native parts, and that they work.

    python scripts/check_install.py [--package_dir DIR]

Run with the Python tf_reverb is installed into (scripts/setup.sh runs it
with .venv/bin/python after every set-up, and says "ready" only when it
passes). Each part is tried the way users reach it, each in a fresh process
so that one broken part cannot hide another:

- the core extension: ``import tf_reverb`` loads ``tf_reverb/pybind.so``;
- the server binary: ``tf_reverb/bin/reverb_server --help`` prints its usage;
- the TensorFlow kernels: ``tf_reverb.ops`` loads the kernel library for
  the installed TensorFlow, binds it to the core and finds every op (skipped, and said so,
  where no TensorFlow is installed: a TensorFlow-free install needs none).

Prints one line per part and exits 1 if any part is missing or broken.
--package_dir checks the tf_reverb package in DIR/tf_reverb instead of the
one this Python imports (an editable install of it is bypassed).
"""

import argparse
import os
import subprocess
import sys
from typing import List, Optional, Tuple

# Each probe prints nothing on success and raises (exit status 1) otherwise.
_CORE_PROBE = """
import tf_reverb, tf_reverb.pybind
print(tf_reverb.pybind.__file__)
"""
_BINARY_PROBE = """
import os, subprocess, sys, tf_reverb
binary = os.path.join(os.path.dirname(tf_reverb.__file__), 'bin', 'reverb_server')
if not os.access(binary, os.X_OK):
  sys.exit(f'{binary} is missing or not executable')
# Its usage text says it loaded and ran (absl's --help exits 1 after it).
done = subprocess.run([binary, '--help'], capture_output=True, text=True, timeout=60)
if 'standalone tf_reverb replay server' not in done.stdout + done.stderr:
  sys.exit(f'{binary} --help exited with {done.returncode} without its usage '
           f'text: {done.stderr[-2000:]}')
print(binary)
"""
_HAS_TENSORFLOW_PROBE = """
import importlib.util, sys
sys.exit(0 if importlib.util.find_spec('tensorflow') else 3)
"""
# Importing the module loads the library, binds it to the core and looks up
# every op.
_KERNELS_PROBE = """
import tf_reverb.ops.reverb_ops as ops
print(ops.LIBRARY_PATH)
"""

# With --package_dir, an editable install's finder (which maps tf_reverb's
# submodules to the checkout by name) must not stand in for what DIR lacks.
_BYPASS_EDITABLE_FINDERS = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, '__module__', '').startswith('__editable__')]
"""

# What to do when a part fails.
_ADVICE = (
  'The native build did not complete: run `bash scripts/setup.sh` in '
  'the checkout (it stops at the first build error and shows it; '
  "Bazel's whole output is in build/native_build.log), or "
  '`pip install --no-build-isolation .` with this Python.'
)


def _probe(code: str, package_dir: Optional[str]) -> Tuple[int, str]:
  """Runs code in a fresh interpreter; (exit status, its last output)."""
  env = dict(os.environ)
  if package_dir:
    code = _BYPASS_EDITABLE_FINDERS + code
    env['PYTHONPATH'] = os.pathsep.join(
      filter(None, [package_dir, env.get('PYTHONPATH')])
    )
  # Not the checkout's directory: the installed package is what is checked.
  done = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    env=env,
    cwd='/',
    timeout=600,
  )
  output = (
    done.stdout.strip()
    if done.returncode == 0
    else (done.stderr.strip() or done.stdout.strip())
  )
  return done.returncode, output.splitlines()[-1] if output else ''


def check(package_dir: Optional[str] = None) -> List[str]:
  """Checks each native part; returns the failures, one line each."""
  failures = []
  parts = [
    ('core extension (tf_reverb.pybind)', _CORE_PROBE),
    ('server binary (reverb_server)', _BINARY_PROBE),
  ]
  status, _ = _probe(_HAS_TENSORFLOW_PROBE, package_dir)
  if status == 0:
    parts.append(('TensorFlow kernels (tf_reverb.ops)', _KERNELS_PROBE))
  else:
    print('[check] TensorFlow kernels: not checked, no TensorFlow is installed')
  for name, code in parts:
    status, output = _probe(code, package_dir)
    if status == 0:
      print(f'[check] {name}: ok ({output})')
    else:
      failures.append(f'{name}: {output or f"exit status {status}"}')
      print(f'[check] {name}: FAILED: {failures[-1]}', file=sys.stderr)
  return failures


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--package_dir', help='check DIR/tf_reverb instead')
  args = parser.parse_args()
  if check(args.package_dir):
    print(f'[check] tf_reverb is not usable. {_ADVICE}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main())
