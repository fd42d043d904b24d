"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`).

The flags table of reference/server-flags.md is generated at build time from
the server binary's own `--help`, so the page cannot drift from the binary:
the page holds the marker `<!-- reverb_server flags -->` where the table goes.

After the build, every name in the `__all__` of tf_reverb's public modules
must have an entry in the API reference (the inventory mkdocstrings writes),
or the build fails: a public name cannot go undocumented.
"""

import ast
import glob
import os
import re
import subprocess
import zlib
from typing import Dict, List, Set, Tuple

from mkdocs.exceptions import PluginError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS_MARKER = '<!-- reverb_server flags -->'
# The binary the set-up copies into the package (scripts/setup.sh).
BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')


def server_help(binary: str = BINARY) -> str:
  """What `reverb_server --help` prints."""
  if not os.access(binary, os.X_OK):
    raise RuntimeError(
      f'{binary} does not exist: run scripts/setup.sh (it '
      'builds the server binary) before building the docs'
    )
  result = subprocess.run(
    [binary, '--help'], capture_output=True, text=True, check=False
  )
  return result.stdout + result.stderr


def parse_flags(help_text: str) -> List[Tuple[str, str, str]]:
  """(name, description, default) of every flag in absl's --help output."""
  entries = []
  current = None
  for line in help_text.split('\n'):
    if re.match(r'^\s{4}--\w', line):
      current = line.strip()
      entries.append(current)
    elif current is not None and re.match(r'^\s{6}\S', line):
      entries[-1] += ' ' + line.strip()
    else:
      current = None
  flags = []
  for entry in entries:
    match = re.match(r'^--(\w+) \((.*)\); default: (.*);$', entry)
    if not match:
      raise RuntimeError(
        f'cannot parse this flag of reverb_server --help: {entry!r}'
      )
    flags.append((match[1], match[2], match[3]))
  return flags


def flags_table(help_text: str) -> str:
  """The Markdown table of the flags in `help_text`."""
  rows = ['| flag | default | meaning |', '|---|---|---|']
  for name, description, default in parse_flags(help_text):
    description = (
      description.replace('&', '&amp;')
      .replace('<', '&lt;')
      .replace('>', '&gt;')
      .replace('|', '\\|')
    )
    rows.append(f'| `--{name}` | `{default}` | {description} |')
  return '\n'.join(rows)


def on_page_markdown(markdown, page, config, files):  # pylint: disable=unused-argument
  """Puts the generated flags table where the marker is."""
  if FLAGS_MARKER in markdown:
    markdown = markdown.replace(FLAGS_MARKER, flags_table(server_help()))
  return markdown


PACKAGE = os.path.join(ROOT, 'tf_reverb')


def _all_names(path: str) -> List[str]:
  """The string literals of a module's `__all__` (read, not imported: the
  build imports neither TensorFlow nor the native core)."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read(), path)
  names = []
  for node in tree.body:
    targets = []
    if isinstance(node, ast.Assign):
      targets, value = node.targets, node.value
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value:
      targets, value = [node.target], node.value
    if any(isinstance(t, ast.Name) and t.id == '__all__' for t in targets):
      names += [
        n.value
        for n in ast.walk(value)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
      ]
  return names


def public_modules() -> Dict[str, str]:
  """Dotted name -> file of every public module of tf_reverb that has an
  `__all__` (no part of its name starts with an underscore)."""
  modules = {}
  for path in sorted(
    glob.glob(os.path.join(PACKAGE, '**', '*.py'), recursive=True)
  ):
    relative = os.path.relpath(path, ROOT)[: -len('.py')].split(os.sep)
    if relative[-1] == '__init__':
      relative = relative[:-1]
    if any(part.startswith('_') for part in relative[1:]):
      continue
    if any(
      part.endswith('_pb2') or part.endswith('_pb2_grpc') for part in relative
    ):
      continue  # generated protocol-buffer modules: see the wire protocol page
    if _all_names(path):
      modules['.'.join(relative)] = path
  return modules


def documented_objects(site_dir: str) -> Set[str]:
  """The objects in the site's inventory (objects.inv, which mkdocstrings
  writes in Sphinx's format: four header lines, then zlib-compressed lines
  `name domain:role priority uri display-name`)."""
  with open(os.path.join(site_dir, 'objects.inv'), 'rb') as f:
    data = f.read()
  body = data.split(b'\n', 4)[4]
  return {
    line.split(' ', 1)[0]
    for line in zlib.decompress(body).decode('utf-8').split('\n')
    if line
  }


def undocumented_names(site_dir: str) -> List[str]:
  """Every name in a public module's `__all__` that the API reference lacks.

  A name counts as documented under its module (`tf_reverb.client.Client`)
  or wherever it is re-exported from in the package (`tf_reverb.Client`).
  """
  objects = documented_objects(site_dir)
  suffixes = {
    name.rsplit('.', 1)[-1] for name in objects if name.startswith('tf_reverb')
  }
  missing = []
  for module, path in public_modules().items():
    for name in _all_names(path):
      if f'{module}.{name}' in objects:
        continue
      if name in suffixes and module == 'tf_reverb':
        continue  # re-exported at the top level, documented where it lives
      missing.append(f'{module}.{name}')
  return missing


def on_post_build(config):
  """Fails the build when a public name has no entry in the API reference."""
  missing = undocumented_names(config['site_dir'])
  if missing:
    raise PluginError(
      f'{len(missing)} public names have no entry in the API reference '
      f'(docs/reference/): {", ".join(missing)}'
    )
