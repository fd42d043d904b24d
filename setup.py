"""Packaging for tf_reverb.

Building runs Bazel (fully offline, see WORKSPACE) against the TensorFlow of
the Python running this script, places the core extension, the TF kernel
libraries and the server binary inside the package, and generates the Python
modules of the wire protocol with the system protoc (gencode that loads under
protobuf 3.20 to 7.x, see generate_protos). Build with
``pip install --no-build-isolation .`` so Bazel sees the installed TensorFlow.
With TF_REVERB_TF_KITS (space-separated TensorFlow build kits that
scripts/make_tf_kit.py wrote; scripts/build_wheel.sh sets it) the package gets
one kernel library per TensorFlow minor instead, ``libtf_reverb_ops_tf<major>_<minor>.so``.
"""

import ast
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List

import setuptools
from setuptools.command import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(ROOT, 'tf_reverb')

# Bazel target -> path inside the package.
NATIVE_OUTPUTS = {
  '//tf_reverb:pybind.so': 'pybind.so',
  '//server/service:reverb_server': 'bin/reverb_server',
}

# Every kernel library of the build, one per configured TensorFlow; they go
# into tf_reverb/ops/ under their own names.
KERNELS = '//tf_reverb/kernels:kernels'
KERNEL_GLOB = 'libtf_reverb_ops*.so'


BAZEL_FLAGS = ['-c', 'opt']

# The single source of the version (tf_reverb.__version__ is the same value).
VERSION_FILE = os.path.join(PACKAGE, '_version.py')

CLASSIFIERS = [
  'Development Status :: 4 - Beta',
  'Intended Audience :: Developers',
  'Intended Audience :: Science/Research',
  'License :: OSI Approved :: Apache Software License',
  'Operating System :: POSIX :: Linux',
  'Programming Language :: C++',
  'Programming Language :: Python :: 3',
  'Programming Language :: Python :: 3 :: Only',
  'Programming Language :: Python :: 3.10',
  'Programming Language :: Python :: 3.11',
  'Programming Language :: Python :: 3.12',
  'Programming Language :: Python :: 3.13',
  'Topic :: Scientific/Engineering :: Artificial Intelligence',
]


def read_version(path: str = VERSION_FILE) -> str:
  """The `__version__ = '...'` string literal of `path`, read without
  importing it (tf_reverb cannot be imported before its native build)."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read(), path)
  for node in tree.body:
    if (
      isinstance(node, ast.Assign)
      and any(
        isinstance(t, ast.Name) and t.id == '__version__' for t in node.targets
      )
      and isinstance(node.value, ast.Constant)
      and isinstance(node.value.value, str)
    ):
      return node.value.value
  raise RuntimeError(f'{path} assigns no __version__ string')


def read_long_description() -> str:
  """README.md, the package's long description (PyPI renders Markdown)."""
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    return f.read()


# Where build_native writes Bazel's whole output (gitignored).
BUILD_LOG = os.path.join(ROOT, 'build', 'native_build.log')

# How many compiler and Bazel error lines a failed build's summary quotes.
QUOTED_ERRORS = 12


class NativeBuildError(RuntimeError):
  """The Bazel build of the native parts failed; the message says where."""


def _failing_label(output: str, action: str) -> str:
  """'//pkg:target, ' of a failed compile action, from its object's path
  (bazel-out/<config>/bin/<pkg>/_objs/<target>/<file>.o), or ''."""
  source = re.match(r'Compiling (\S+) failed', action)
  if not source:
    return ''
  stem = re.escape(os.path.splitext(os.path.basename(source.group(1)))[0])
  objects = re.search(
    rf'bazel-out/[^/\s]+/bin/(\S+)/_objs/([^/\s]+)/(\S+/)?{stem}\.', output
  )
  return f'//{objects.group(1)}:{objects.group(2)}, ' if objects else ''


def _build_failure_summary(
  output: str, command: List[str], returncode: int
) -> str:
  """What a failed Bazel build's output says failed: the failing actions and
  targets and the first compiler errors, for a message a user reads first."""
  failing, errors = [], []
  for line in output.splitlines():
    line = line.rstrip()
    # "ERROR: <path>/BUILD:12:11: Compiling server/x.cc failed: (Exit 1): ..."
    action = re.match(
      r'ERROR: (\S+/)?(\S+BUILD(?:\.bazel)?:\d+:\d+): (.+? failed)', line
    )
    target = re.match(r'(?:ERROR: )?Target (//\S+) failed to build', line)
    if action:
      failing.append(
        f'{action.group(3)} ({_failing_label(output, action.group(3))}'
        f'rule at {action.group(2)})'
      )
    elif target:
      failing.append(f'target {target.group(1)}')
    elif (
      re.search(r'\b(fatal )?error\b', line)
      and 'Build did NOT complete' not in line
      and not line.startswith('ERROR: Build failed')
    ):
      errors.append(line)
  lines = [
    f'The Bazel build of tf_reverb\'s native parts failed '
    f'(`{" ".join(command)}` exited with {returncode}).'
  ]
  lines += [f'  failed: {item}' for item in dict.fromkeys(failing)]
  if errors:
    lines.append('  first errors:')
    lines += [f'    {line}' for line in errors[:QUOTED_ERRORS]]
  lines.append(f'  Bazel\'s whole output: {BUILD_LOG}')
  return '\n'.join(lines)


def _run_bazel_build(targets: List[str], env: Dict[str, str]) -> None:
  """Runs `bazel build` on targets, its output streamed to stderr and kept
  in BUILD_LOG; raises NativeBuildError with a summary when it fails.

  TF_REVERB_BAZEL_FLAGS adds Bazel build flags (shell words), e.g.
  ``--jobs=1`` on a machine short of memory.
  """
  extra = shlex.split(os.environ.get('TF_REVERB_BAZEL_FLAGS', ''))
  command = [
    'bazel',
    'build',
    '--noshow_progress',
    *BAZEL_FLAGS,
    *extra,
    *targets,
  ]
  os.makedirs(os.path.dirname(BUILD_LOG), exist_ok=True)
  output = []
  with (
    open(BUILD_LOG, 'w') as log,
    subprocess.Popen(
      command,
      cwd=ROOT,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
      errors='replace',
    ) as bazel,
  ):
    for line in bazel.stdout:
      sys.stderr.write(line)
      log.write(line)
      output.append(line)
  if bazel.returncode != 0:
    summary = _build_failure_summary(''.join(output), command, bazel.returncode)
    sys.stderr.write('\n' + summary + '\n')
    raise NativeBuildError(summary)


def kernel_targets(env: Dict[str, str]) -> List[str]:
  """The kernel library targets Bazel configures under this environment."""
  output = subprocess.check_output(
    ['bazel', 'query', '--noshow_progress', f'labels(srcs, {KERNELS})'],
    cwd=ROOT,
    env=env,
    text=True,
  )
  return sorted(line for line in output.split() if line.startswith('//'))


def build_native() -> None:
  """Builds the native parts with Bazel and copies them into the package."""
  env = dict(os.environ, PYTHON_BIN_PATH=sys.executable)
  kernels = kernel_targets(env)
  _run_bazel_build([*NATIVE_OUTPUTS, *kernels], env)
  # Not the bazel-bin symlink: it follows whichever build ran last.
  bazel_bin = subprocess.check_output(
    ['bazel', 'info', *BAZEL_FLAGS, 'bazel-bin'], cwd=ROOT, env=env, text=True
  ).strip()
  # Kernels of an earlier build (other TF versions) must not linger.
  for stale in glob.glob(os.path.join(PACKAGE, 'ops', KERNEL_GLOB)):
    os.remove(stale)
  outputs = dict(NATIVE_OUTPUTS)
  for target in kernels:
    outputs[target] = 'ops/' + target.split(':')[1]
  for target, relative in outputs.items():
    destination = os.path.join(PACKAGE, relative)
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    if os.path.exists(destination):
      os.remove(destination)
    package, name = target[2:].split(':')
    shutil.copy(os.path.join(bazel_bin, package, name), destination)
    os.chmod(destination, 0o755)


# The Python gencode must load under every protobuf runtime the supported
# TensorFlow versions bring: TF 2.15 pins protobuf >=3.20.3,<5, TF 2.21 brings
# 6.x/7.x. protoc 3.20-25 emits `_builder` gencode without a runtime-version
# check, which all of them load; protoc >= 26 (and grpcio-tools' bundled one)
# adds `ValidateProtobufRuntimeVersion`, which refuses any older runtime, and
# protoc < 3.20 emits descriptors that protobuf >= 4 (upb) refuses. Debian's
# protoc (3.21.12 on Debian 12 and 13) is in range.
PROTOC_VERSIONS = ((3, 20), (26, 0))  # [oldest, first too new)


def _tool(env_var: str, name: str, debian_package: str) -> str:
  """Path of a code generator: $env_var, else `name` on PATH."""
  path = os.environ.get(env_var) or shutil.which(name)
  if not path or not os.access(path, os.X_OK):
    raise RuntimeError(
      f'{name} not found (set {env_var} or install the Debian package '
      f'{debian_package}); it generates tf_reverb/proto/*_pb2*.py'
    )
  return path


def _check_protoc_version(protoc: str) -> None:
  """Raises unless `protoc` emits gencode that loads under protobuf 3.20-7.x."""
  output = subprocess.check_output([protoc, '--version'], text=True).strip()
  match = re.search(r'(\d+)\.(\d+)', output)
  version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
  oldest, too_new = PROTOC_VERSIONS
  if not oldest <= version < too_new:
    raise RuntimeError(
      f'{protoc} is {output!r}; tf_reverb needs protoc >= 3.20 and < 26 '
      '(e.g. Debian\'s protobuf-compiler 3.21.12) so that the generated '
      'modules load under every protobuf runtime from 3.20 to 7.x'
    )


def generate_protos() -> None:
  """Generates tf_reverb/proto/*_pb2.py (and the gRPC stubs) from proto/*.proto.

  Uses the system protoc (``$PROTOC``, else ``protoc`` on PATH: Debian's
  /usr/bin/protoc) and Debian's grpc_python_plugin (``$GRPC_PYTHON_PLUGIN``),
  not grpcio-tools: its bundled protoc stamps the gencode with a check that
  refuses protobuf runtimes older than itself. The plugin's stubs
  (reverb_service_pb2_grpc.py, needed by tests and tools, never imported by
  tf_reverb itself) carry no grpcio version check either.
  """
  protoc = _tool('PROTOC', 'protoc', 'protobuf-compiler')
  _check_protoc_version(protoc)
  grpc_plugin = _tool(
    'GRPC_PYTHON_PLUGIN', 'grpc_python_plugin', 'protobuf-compiler-grpc'
  )
  out_dir = os.path.join(PACKAGE, 'proto')
  protos = sorted(glob.glob(os.path.join(ROOT, 'proto', '*.proto')))
  # google/protobuf/timestamp.proto: beside protoc's own prefix
  # (/usr/include for /usr/bin/protoc, from libprotobuf-dev).
  include = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(protoc))), 'include'
  )
  includes = [f'-I{ROOT}/proto', f'-I{include}']
  # Generate into a scratch directory and move the results in: a failed run
  # leaves the previous modules in place.
  scratch = tempfile.mkdtemp(prefix='tf_reverb_protos_')
  try:
    subprocess.check_call(
      [protoc, *includes, f'--python_out={scratch}', *protos]
    )
    subprocess.check_call(
      [
        protoc,
        *includes,
        f'--plugin=protoc-gen-grpc_python={grpc_plugin}',
        f'--grpc_python_out={scratch}',
        os.path.join(ROOT, 'proto', 'reverb_service.proto'),
      ]
    )
    generated = {}
    for path in sorted(glob.glob(os.path.join(scratch, '*_pb2*.py'))):
      with open(path) as f:
        text = f.read()
      if 'ValidateProtobufRuntimeVersion' in text:
        raise RuntimeError(
          f'{protoc} emitted a runtime-version check into '
          f'{os.path.basename(path)}'
        )
      # protoc emits absolute imports of sibling modules; make them relative.
      generated[os.path.basename(path)] = re.sub(
        r'^import (\w+_pb2) as',
        r'from . import \1 as',
        text,
        flags=re.MULTILINE,
      )
    # Each module is replaced atomically (others may be importing them).
    for name, text in generated.items():
      staging = os.path.join(out_dir, f'.{name}.tmp')
      with open(staging, 'w') as f:
        f.write(text)
      os.replace(staging, os.path.join(out_dir, name))
    for stale in glob.glob(os.path.join(out_dir, '*_pb2*.py')):
      if os.path.basename(stale) not in generated:
        os.remove(stale)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


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
    root = (
      self.get_finalized_command('install').install_lib
      if getattr(self, 'editable_mode', False)
      else self.build_lib
    )
    self.copy_file(os.path.join(ROOT, PTH_FILE), os.path.join(root, PTH_FILE))


if __name__ == '__main__':
  setuptools.setup(
    name='tf_reverb',
    version=read_version(),
    description='Experience replay for reinforcement learning, Reverb-compatible.',
    long_description=read_long_description(),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    license_files=['LICENSE'],
    classifiers=CLASSIFIERS,
    packages=setuptools.find_packages(include=['tf_reverb', 'tf_reverb.*']),
    py_modules=['tf_reverb_as_reverb'],
    package_data={
      # py.typed: the package's annotations are for type checkers (PEP 561).
      'tf_reverb': ['pybind.so', 'bin/reverb_server', 'py.typed'],
      'tf_reverb.ops': [KERNEL_GLOB],
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
      # The binary wheel carries kernels for TensorFlow 2.15-2.21 (the
      # minors scripts/build_wheel.sh built); a source build compiles
      # them against the TensorFlow present at build time.
      'tensorflow': ['tensorflow>=2.15'],
      # tf_reverb.ray (ReplayCluster); tests run with scripts/setup.sh's pin.
      'ray': ['ray>=2.9'],
      # tf_reverb.torch (ReplayDataset; torch.uint64 keys need 2.3) and
      # tf_reverb.jax (ReplayIterator); tests run with scripts/setup.sh's
      # pins.
      'torch': ['torch>=2.3'],
      'jax': ['jax>=0.4.30'],
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
