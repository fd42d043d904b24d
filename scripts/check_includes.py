"""Finds C++ files that use a name without including the header declaring it.

    .venv/bin/python scripts/check_includes.py [--jobs N] [PATH_PREFIX ...]

A file that compiles only because another header happens to include what it
needs breaks on the next release of that library (Debian 13's abseil no
longer brings absl/strings/str_cat.h in through its other headers, and a
file that used absl::StrCat without including it stopped compiling). This
runs clang's include-cleaner over every C++ source and header of the tree
(server/, tf_reverb/kernels/, benchmarks/; or only the files under the given
path prefixes) with the exact compile commands of the Bazel build (from
`bazel aquery`), and reports each header a file uses but does not include.
Headers it could remove are not reported, nor those a .cc gets from its own
header (x.h of x.cc, Google style), nor TensorFlow's internal headers (their
layout differs between TensorFlow versions; the kernels use TF's public ones).
--fix adds the missing #include lines. Exits 1 if any file misses one.

Needs clang-include-cleaner (Debian's clang-tools-16 on Debian 12,
clang-tools-19 on Debian 13; it is installed where missing) and the Bazel
build done (scripts/setup.sh), whose generated headers it reads.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCOPE = ('server/', 'tf_reverb/kernels/', 'benchmarks/')
# Debian's clang-tools-N, newest first.
CLANG_VERSIONS = (19, 18, 17, 16)
# GCC flags clang does not know; the rest of the command is kept.
GCC_ONLY_FLAGS = re.compile(
  r'^-(fno-canonical-system-headers|Wno-free-nonheap-object|'
  r'fno-semantic-interposition|Wno-stringop-\S+|Wno-maybe-uninitialized)$'
)
# Headers a file may use through another header by design.
ALLOWED = (
  # Generated protobuf headers bring the runtime headers of their API.
  re.compile(r'^[<"]google/protobuf/.*[>"]$'),
  # TensorFlow's internal layout (moves between TF versions: tsl/, xla/).
  re.compile(
    r'^[<"](tensorflow|xla|tsl|third_party|unsupported|Eigen)/.*[>"]$'
  ),
  # Implementation headers clang maps some standard names to.
  re.compile(r'^<bits/.*>$'),
)

# Umbrella headers a library documents as its entry point: a file including
# one has every header under the given prefixes.
UMBRELLAS = {
  'grpcpp/grpcpp.h': ('grpcpp/', 'grpc/'),
  'gtest/gtest.h': ('gtest/',),
  'gmock/gmock.h': ('gmock/', 'gtest/'),
  'zlib.h': ('zconf.h',),
}


def find_include_cleaner() -> str:
  """Path of clang-include-cleaner, installing Debian's clang-tools if needed."""
  for version in CLANG_VERSIONS:
    path = f'/usr/lib/llvm-{version}/bin/clang-include-cleaner'
    if os.access(path, os.X_OK):
      return path
  found = shutil.which('clang-include-cleaner')
  if found:
    return found
  sudo = [] if os.geteuid() == 0 else ['sudo']
  for version in CLANG_VERSIONS:
    package = f'clang-tools-{version}'
    known = (
      subprocess.run(
        ['apt-cache', 'show', package], capture_output=True
      ).returncode
      == 0
    )
    if known:
      print(f'[includes] installing {package}', file=sys.stderr)
      subprocess.check_call(
        [*sudo, 'apt-get', 'install', '-y', '-qq', package],
        env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'),
        stdout=subprocess.DEVNULL,
      )
      return f'/usr/lib/llvm-{version}/bin/clang-include-cleaner'
  sys.exit(
    'no clang-tools package with clang-include-cleaner '
    f'(tried clang-tools-{CLANG_VERSIONS})'
  )


def compile_commands() -> Dict[str, List[str]]:
  """Source file -> its Bazel compile command (arguments), from aquery."""
  env = dict(os.environ)
  env.setdefault(
    'PYTHON_BIN_PATH', os.path.join(ROOT, '.venv', 'bin', 'python')
  )
  query = (
    'mnemonic("CppCompile", //server/... + //tf_reverb/... + //benchmarks/...)'
  )
  output = subprocess.check_output(
    [
      'bazel',
      'aquery',
      '--noshow_progress',
      '-c',
      'opt',
      '--output=jsonproto',
      query,
    ],
    cwd=ROOT,
    env=env,
    text=True,
  )
  commands = {}
  for action in json.loads(output).get('actions', []):
    arguments = action['arguments']
    source = arguments[arguments.index('-c') + 1]
    if source.startswith(SCOPE):
      commands[source] = arguments
  return commands


def clang_command(
  arguments: List[str], source: str, execroot: str
) -> List[str]:
  """A Bazel (GCC) compile command rewritten for clang's tooling on source
  (the command's own source file is replaced by it), run in the workspace:
  include directories only the execution root has are made absolute, and
  those of external repositories point into the output base, where they stay
  (the execution root links only the repositories of the last build, which
  may not have needed TensorFlow's)."""
  compiled = arguments[arguments.index('-c') + 1]
  out, skip = ['clang++'], False
  for argument in arguments[1:]:
    if skip:
      skip = False
      continue
    if argument in ('-o', '-MF'):
      skip = True
      continue
    if out[-1] in ('-iquote', '-isystem', '-I') and not os.path.exists(
      os.path.join(ROOT, argument)
    ):
      if argument.startswith('external/'):
        argument = os.path.join(
          os.path.dirname(os.path.dirname(execroot)), argument
        )
      else:
        argument = os.path.join(execroot, argument)
    if argument in ('-c', '-MD', compiled) or GCC_ONLY_FLAGS.match(argument):
      continue
    out.append(argument)
  return out + ['-Wno-unknown-warning-option', '-c', source]


def header_command(
  header: str, commands: Dict[str, List[str]], seen: Optional[set] = None
) -> Optional[List[str]]:
  """The compile command of a header: its .cc's, else that of a source that
  includes it (whose target has the header's dependencies), else that of a
  header of the tree that includes it (a header-only base class)."""
  stem = header[: -len('.h')]
  for candidate in (stem + '.cc', stem + '_test.cc'):
    if candidate in commands:
      return commands[candidate]
  for source, command in sorted(commands.items()):
    if header in includes_of(source):
      return command
  seen = (seen or set()) | {header}
  for other in sorted(glob.glob('**/*.h', root_dir=ROOT, recursive=True)):
    if other not in seen and other.startswith(SCOPE):
      if header in includes_of(other):
        command = header_command(other, commands, seen)
        if command:
          return command
  return None


# C headers include-cleaner names for names the C++ headers declare too.
C_HEADERS = {
  'stdint.h': 'cstdint',
  'stdlib.h': 'cstdlib',
  'stdio.h': 'cstdio',
  'float.h': 'cfloat',
  'string.h': 'cstring',
  'math.h': 'cmath',
  'stddef.h': 'cstddef',
  'wchar.h': 'cstddef',
  'limits.h': 'climits',
  'errno.h': 'cerrno',
  'time.h': 'ctime',
  'assert.h': 'cassert',
  # Linux's own headers behind <cerrno>.
  'asm-generic/errno-base.h': 'cerrno',
  'asm-generic/errno.h': 'cerrno',
}
INCLUDE = re.compile(r'^#include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def includes_of(path: str) -> List[str]:
  """The headers path includes directly, each as a path from the root when it
  is one of the tree's (a sibling included bare is named by its full path)."""
  try:
    with open(os.path.join(ROOT, path)) as f:
      text = f.read()
  except FileNotFoundError:
    return []
  found = []
  for _, header in INCLUDE.findall(text):
    sibling = os.path.join(os.path.dirname(path), header)
    found.append(
      sibling if os.path.exists(os.path.join(ROOT, sibling)) else header
    )
  return found


def related_header(source: str) -> Optional[str]:
  """x.h of x.cc: a .cc may use what its own header includes (Google style)."""
  if source.endswith('.cc') and not source.endswith('_test.cc'):
    header = source[: -len('.cc')] + '.h'
    if os.path.exists(os.path.join(ROOT, header)):
      return header
  return None


# Headers spelled with quotes: the tree's own and its libraries'; system and
# standard headers keep angle brackets.
QUOTED = re.compile(
  r'^(absl|google|grpc|grpcpp|prometheus|gtest|gmock|tensorflow|'
  r'pybind11|server|tf_reverb|benchmarks)/|^(snappy|zstd)\.h$|\.pb\.h$'
)


def normalize(header: str) -> str:
  """include-cleaner's spelling (<stdint.h>, <absl/x.h>) as the tree spells
  it (<cstdint>, "absl/x.h")."""
  name = header[1:-1]
  if name in C_HEADERS:
    return f'<{C_HEADERS[name]}>'
  return f'"{name}"' if QUOTED.search(name) else f'<{name}>'


def missing_includes(
  tool: str, execroot: str, source: str, arguments: List[str]
) -> List[str]:
  """Headers source uses without including them, as the tree spells them
  ("absl/status/status.h", <vector>), or a line saying the check failed."""
  with tempfile.TemporaryDirectory(prefix='includes_') as database:
    with open(os.path.join(database, 'compile_commands.json'), 'w') as f:
      json.dump(
        [
          {
            'directory': ROOT,
            'file': source,
            'arguments': clang_command(arguments, source, execroot),
          }
        ],
        f,
      )
    done = subprocess.run(
      [
        tool,
        '-p',
        database,
        '--print=changes',
        '--insert',
        '--remove=false',
        os.path.join(ROOT, source),
      ],
      capture_output=True,
      text=True,
      cwd=ROOT,
    )
  if done.returncode != 0 and not done.stdout:
    return [f'(include-cleaner failed: {done.stderr.strip()[-500:]})']
  have = set(includes_of(source))
  if related_header(source):
    have |= set(includes_of(related_header(source))) | {related_header(source)}
  missing = []
  for line in done.stdout.splitlines():
    if not line.startswith('+ '):
      continue
    header = line[2:].strip()
    if any(p.match(header) for p in ALLOWED):
      continue
    header = normalize(header)
    covered = any(
      header[1:-1].startswith(prefixes)
      for umbrella, prefixes in UMBRELLAS.items()
      if umbrella in have
    )
    if header[1:-1] not in have and not covered and header not in missing:
      missing.append(header)
  return missing


def add_includes(path: str, headers: List[str]) -> None:
  """Inserts #include lines for headers into path, each in sorted place in
  the block of its kind (<...> or "..."; a new block after the others if the
  file has none of that kind)."""
  with open(os.path.join(ROOT, path)) as f:
    lines = f.read().split('\n')
  for header in sorted(headers):
    kind = header[0]
    new = f'#include {header}'
    block = [
      i for i, line in enumerate(lines) if line.startswith(f'#include {kind}')
    ]
    # The first include of a .cc is its own header: not part of a block.
    if (
      block
      and related_header(path)
      and block[0]
      == min(i for i, line in enumerate(lines) if line.startswith('#include'))
    ):
      block = block[1:]
    if block:
      after = [i for i in block if lines[i] < new]
      at = (after[-1] + 1) if after else block[0]
      lines.insert(at, new)
    else:
      every = [i for i, line in enumerate(lines) if line.startswith('#include')]
      at = every[-1] + 1 if every else 0
      lines[at:at] = ['', new] if every else [new, '']
  with open(os.path.join(ROOT, path), 'w') as f:
    f.write('\n'.join(lines))


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('prefixes', nargs='*', default=list(SCOPE))
  parser.add_argument('--jobs', type=int, default=os.cpu_count() or 2)
  parser.add_argument(
    '--fix',
    action='store_true',
    help='add the missing #include lines to the files',
  )
  args = parser.parse_args()
  tool = find_include_cleaner()
  commands = compile_commands()
  execroot = subprocess.check_output(
    ['bazel', 'info', '-c', 'opt', 'execution_root'], cwd=ROOT, text=True
  ).strip()
  files = {
    s: c for s, c in commands.items() if s.startswith(tuple(args.prefixes))
  }
  for header in sorted(glob.glob('**/*.h', root_dir=ROOT, recursive=True)):
    if header.startswith(tuple(args.prefixes)) and header.startswith(SCOPE):
      command = header_command(header, commands)
      if command:
        files[header] = command
      else:
        print(
          f'[includes] {header}: no compile command to check it with',
          file=sys.stderr,
        )
  print(
    f'[includes] {len(files)} files, {os.path.basename(tool)} '
    f'of {os.path.dirname(os.path.dirname(tool))}',
    file=sys.stderr,
  )
  problems = 0
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    futures = {
      pool.submit(missing_includes, tool, execroot, f, c): f
      for f, c in files.items()
    }
    for future in concurrent.futures.as_completed(futures):
      missing = future.result()
      if missing:
        problems += 1
        print(
          f'{futures[future]}: uses names from {", ".join(missing)} '
          'without including them'
        )
        if args.fix and not missing[0].startswith('(include-cleaner'):
          add_includes(futures[future], missing)
  print(
    f'[includes] {problems} of {len(files)} files miss includes',
    file=sys.stderr,
  )
  return 1 if problems else 0


if __name__ == '__main__':
  sys.exit(main())
