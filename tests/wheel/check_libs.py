"""Checks what the native files of the installed tf_reverb wheel resolve to.

    python check_libs.py

Run with the interpreter of a venv into which the wheel was installed. Every
ELF file the distribution installed (its .so files, bin/reverb_server, the
libraries auditwheel vendored into tf_reverb.libs/) goes through `ldd`. It
fails when any of them resolves a library to the system's gRPC, protobuf,
absl, snappy or zstd (/usr/lib/x86_64-linux-gnu/lib{grpc,protobuf,absl,
snappy,zstd}* and gRPC's libgpr/libupb/libaddress_sorting: the wheel must
carry its own, to work where those Debian packages are absent), to any other
system library outside the manylinux base (c-ares, re2, OpenSSL, ...: what
`auditwheel repair` would vendor), or when a dependency is not found at all
(except TensorFlow's own libraries, which only a venv with TensorFlow has).
Does not import tf_reverb. Prints one summary line last; exit status 1 on
failure.
"""

import importlib.metadata
import os
import re
import subprocess
import sys
from typing import Dict, List, Tuple

DISTRIBUTION = 'tf_reverb'
FORBIDDEN = re.compile(
  r'^(/usr)?/lib/x86_64-linux-gnu/'
  r'lib(grpc|protobuf|absl|snappy|zstd|gpr|upb|address_sorting)'
)
# Resolved only where TensorFlow is installed (the kernel libraries link it).
MAY_BE_MISSING = re.compile(
  r'^(libtensorflow_framework\.so|_pywrap_tensorflow)'
)
# The manylinux base (PEP 600's allow-list): present on every target system.
BASE = re.compile(
  r'^(linux-vdso|ld-linux[-\w]*|libc|libm|libdl|libpthread|librt|libutil|'
  r'libgcc_s|libstdc\+\+|libcrypt|libnsl|libresolv|libz|libexpat|'
  r'libX11|libGL)\.so'
)


def installed_elf_files() -> List[str]:
  """The ELF files among the distribution's installed files."""
  files = importlib.metadata.files(DISTRIBUTION) or []
  found = []
  for relative in files:
    path = str(relative.locate())
    if not os.path.isfile(path):
      continue
    with open(path, 'rb') as f:
      if f.read(4) == b'\x7fELF':
        found.append(os.path.realpath(path))
  return sorted(set(found))


def ldd(path: str) -> Dict[str, str]:
  """Library name -> resolved path ('' when not found) for one ELF file."""
  result = subprocess.run(['ldd', path], capture_output=True, text=True)
  resolved = {}
  for line in result.stdout.splitlines():
    match = re.match(r'\s*(\S+)\s+=>\s+(not found|\S+)', line)
    if match:
      name, target = match.groups()
      resolved[name] = '' if target == 'not found' else target
    else:
      match = re.match(r'\s*(/\S+)\s+\(0x', line)  # the dynamic loader
      if match:
        resolved[os.path.basename(match.group(1))] = match.group(1)
  return resolved


def check(path: str) -> Tuple[List[str], List[str]]:
  """(failures, notes) of one ELF file."""
  failures, notes = [], []
  for name, target in sorted(ldd(path).items()):
    if not target:
      if not MAY_BE_MISSING.match(name):
        failures.append(f'{path}: {name} not found')
    elif FORBIDDEN.match(target) or FORBIDDEN.match(os.path.realpath(target)):
      failures.append(f'{path}: {name} => {target} (system library)')
    elif target.startswith(('/usr/lib', '/lib')) and not BASE.match(name):
      failures.append(
        f'{path}: {name} => {target} (outside the manylinux base)'
      )
    elif not target.startswith(('/usr/lib', '/lib')):
      notes.append(f'{path}: {name} => {target}')
  return failures, notes


def main() -> int:
  elf_files = installed_elf_files()
  if not elf_files:
    print(f'libs: FAIL no ELF files installed by {DISTRIBUTION}')
    return 1
  failures, notes = [], []
  for path in elf_files:
    print(f'elf {path}')
    file_failures, file_notes = check(path)
    failures += file_failures
    notes += file_notes
  for note in notes:
    print(f'note: {note}')
  for failure in failures:
    print(f'FAIL {failure}')
  status = 'FAIL' if failures else 'ok'
  print(
    f'libs: {status} {len(elf_files)} ELF files, {len(failures)} failures, '
    f'{len(notes)} notes'
  )
  return 1 if failures else 0


if __name__ == '__main__':
  sys.exit(main())
