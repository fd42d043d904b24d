"""Writes a TensorFlow build kit: what the kernels compile and link against.

  <python with tensorflow> scripts/make_tf_kit.py KIT_DIR

KIT_DIR gets include/ (TensorFlow's C++ headers), libtensorflow_framework.so.2
and tf_config.txt (line 1: the TensorFlow version; line 2: its compile
defines, e.g. "_GLIBCXX_USE_CXX11_ABI=1 EIGEN_MAX_ALIGN_BYTES=64"), which is
written last: a kit without it is incomplete. About 210-350 MB against the 1.3-1.6
GB of a venv with TensorFlow, so scripts/build_wheel.sh keeps kits, not venvs
(TF_REVERB_TF_KITS, read by third_party/local_config.bzl). Files are
hard-linked where the kit is on the venv's file system (scripts/build_wheel.sh
deletes the venv afterwards, so the kit costs no second copy of them while
both exist), copied elsewhere.
"""

import os
import shutil
import sys

import tensorflow as tf


def _link_or_copy(source: str, destination: str) -> str:
  """Hard-links `source` to `destination`, or copies it where it cannot."""
  try:
    os.link(source, destination)
  except OSError:
    shutil.copy2(source, destination)
  return destination


def main(kit: str) -> None:
  """Fills `kit` (replacing what is there) from the running TensorFlow."""
  if os.path.exists(kit):
    shutil.rmtree(kit)
  os.makedirs(kit)
  shutil.copytree(
    tf.sysconfig.get_include(),
    os.path.join(kit, 'include'),
    ignore=shutil.ignore_patterns('*.so', '*.so.*'),
    copy_function=_link_or_copy,
  )
  _link_or_copy(
    os.path.join(tf.sysconfig.get_lib(), 'libtensorflow_framework.so.2'),
    os.path.join(kit, 'libtensorflow_framework.so.2'),
  )
  defines = [
    flag[2:]
    for flag in tf.sysconfig.get_compile_flags()
    if flag.startswith('-D')
  ]
  with open(os.path.join(kit, 'tf_config.txt'), 'w') as config:
    config.write(f'{tf.__version__}\n{" ".join(defines)}\n')


if __name__ == '__main__':
  if len(sys.argv) != 2:
    sys.exit(__doc__)
  main(sys.argv[1])
