"""Packaging for tf_reverb.

Building runs Bazel (fully offline, see WORKSPACE) against the TensorFlow of
the Python running this script, places the core extension, the TF kernel
library and the server binary inside the package, and generates the Python
modules of the wire protocol with grpcio-tools. Build with
``pip install --no-build-isolation .`` so Bazel sees the installed TensorFlow.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import setuptools
from setuptools.command import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(ROOT, 'tf_reverb')

# Bazel target -> path inside the package.
NATIVE_OUTPUTS = {
    '//tf_reverb:pybind.so': 'pybind.so',
    '//tf_reverb/kernels:libtf_reverb_ops.so': 'ops/libtf_reverb_ops.so',
    '//server:reverb_server': 'bin/reverb_server',
}


BAZEL_FLAGS = ['-c', 'opt']


def build_native() -> None:
  """Builds the native parts with Bazel and copies them into the package."""
  env = dict(os.environ, PYTHON_BIN_PATH=sys.executable)
  subprocess.check_call(
      ['bazel', 'build', '--noshow_progress', *BAZEL_FLAGS, *NATIVE_OUTPUTS],
      cwd=ROOT, env=env)
  # Not the bazel-bin symlink: it follows whichever build ran last.
  bazel_bin = subprocess.check_output(
      ['bazel', 'info', *BAZEL_FLAGS, 'bazel-bin'], cwd=ROOT, env=env,
      text=True).strip()
  for target, relative in NATIVE_OUTPUTS.items():
    destination = os.path.join(PACKAGE, relative)
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    if os.path.exists(destination):
      os.remove(destination)
    package, name = target[2:].split(':')
    shutil.copy(os.path.join(bazel_bin, package, name), destination)
    os.chmod(destination, 0o755)


def generate_protos() -> None:
  """Generates tf_reverb/proto/*_pb2.py from proto/*.proto."""
  from grpc_tools import protoc  # pylint: disable=g-import-not-at-top
  out_dir = os.path.join(PACKAGE, 'proto')
  protos = sorted(glob.glob(os.path.join(ROOT, 'proto', '*.proto')))
  include = os.path.join(os.path.dirname(protoc.__file__), '_proto')
  includes = [f'-I{ROOT}/proto', f'-I{include}']
  if (protoc.main(['protoc', *includes, f'--python_out={out_dir}', *protos]) or
      protoc.main(['protoc', *includes, f'--grpc_python_out={out_dir}',
                   os.path.join(ROOT, 'proto', 'reverb_service.proto')])):
    raise RuntimeError('protoc failed on ' + ' '.join(protos))
  # protoc emits absolute imports of sibling modules; make them relative.
  for path in glob.glob(os.path.join(out_dir, '*_pb2*.py')):
    with open(path) as f:
      text = f.read()
    text = re.sub(r'^import (\w+_pb2) as', r'from . import \1 as', text,
                  flags=re.MULTILINE)
    with open(path, 'w') as f:
      f.write(text)


class BinaryDistribution(setuptools.Distribution):
  """Marks the wheel as platform-specific: it carries native code."""

  def has_ext_modules(self):
    return True


# The start-up hook of tf_reverb_as_reverb.py (TF_REVERB_AS_REVERB); it goes
# into site-packages itself, where the interpreter reads .pth files.
PTH_FILE = 'tf_reverb_as_reverb.pth'


class BuildPy(build_py.build_py):
  """build_py that first builds the native parts and the protos, and puts the
  start-up hook at the root of the wheel."""

  def run(self):
    build_native()
    generate_protos()
    super().run()
    # An editable wheel carries only what lands in install_lib (its root);
    # a regular one the whole build_lib.
    root = (self.get_finalized_command('install').install_lib
            if getattr(self, 'editable_mode', False) else self.build_lib)
    self.copy_file(os.path.join(ROOT, PTH_FILE), os.path.join(root, PTH_FILE))


if __name__ == '__main__':
  setuptools.setup(
      name='tf_reverb',
      version='0.1.0',
      description='Experience replay for reinforcement learning, Reverb-compatible.',
      packages=setuptools.find_packages(include=['tf_reverb', 'tf_reverb.*']),
      py_modules=['tf_reverb_as_reverb'],
      package_data={
          'tf_reverb': ['pybind.so', 'bin/reverb_server'],
          'tf_reverb.ops': ['libtf_reverb_ops.so'],
      },
      python_requires='>=3.9',
      install_requires=[
          'numpy',
          'dm-tree',
          'portpicker',
          'protobuf',
          'absl-py',
      ],
      extras_require={
          # The kernels are compiled against the TensorFlow present at build
          # time; any 2.x that provides tf.sysconfig works.
          'tensorflow': ['tensorflow>=2.12'],
      },
      entry_points={
          'console_scripts': [
              'reverb_server = tf_reverb.server_executable.server_main:app_run_main',
          ],
      },
      cmdclass={'build_py': BuildPy},
      distclass=BinaryDistribution,
      zip_safe=False,
  )
