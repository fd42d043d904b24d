"""The usage examples in the docstrings run, and the main entry points have one.

A docstring example is a fenced ```python block in the docstring of a module,
class or function of tf_reverb (the API reference renders it as code). Each
one runs in a fresh interpreter with a scratch working directory, so it must
be self-contained: it starts the server it uses and stops it.
"""

import ast
import os
import re
import subprocess
import sys
import textwrap
from typing import Iterator, List, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, 'tf_reverb')

_BLOCK = re.compile(
  r'^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$', re.MULTILINE | re.DOTALL
)

# The names a user starts from: each shows how it is used.
MAIN_ENTRY_POINTS = [
  'server.Server',
  'server.Table',
  'client.Client',
  'trajectory_writer.TrajectoryWriter',
  'trajectory_dataset.TrajectoryDataset',
  'numpy_iterator.NumpyIterator',
  'tf_client.TFClient',
]


def python_blocks(docstring: str) -> List[str]:
  """The fenced ```python blocks of `docstring`, dedented."""
  return [textwrap.dedent(m.group(2)) for m in _BLOCK.finditer(docstring)]


def docstring_examples() -> Iterator[Tuple[str, str]]:
  """(module.qualname, code) for every example in tf_reverb's docstrings."""
  for name in sorted(os.listdir(PACKAGE)):
    if not name.endswith('.py') or name.endswith('_pb2.py'):
      continue
    module = name[:-3]
    with open(os.path.join(PACKAGE, name), encoding='utf-8') as f:
      tree = ast.parse(f.read())

    def visit(node, prefix):
      doc = ast.get_docstring(node, clean=False) or ''
      for i, code in enumerate(python_blocks(doc)):
        yield f'{prefix}#{i}', code
      for child in getattr(node, 'body', []):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef)):
          yield from visit(child, f'{prefix}.{child.name}')

    yield from visit(tree, module)


EXAMPLES = list(docstring_examples())


def test_the_extractor_finds_indented_blocks():
  doc = 'Text.\n\n  Example:\n    ```python\n    x = 1\n      y = 2\n    ```\n'
  assert python_blocks(doc) == ['x = 1\n  y = 2\n']


def test_every_main_entry_point_has_an_example():
  with_examples = {name.split('#')[0] for name, _ in EXAMPLES}
  missing = [n for n in MAIN_ENTRY_POINTS if n not in with_examples]
  assert not missing, f'no usage example in the docstring of {missing}'


@pytest.mark.parametrize('name,code', EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_docstring_example_runs(name, code, tmp_path):
  result = subprocess.run(
    [sys.executable, '-c', code],
    cwd=tmp_path,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 0, (
    f'the example in {name} failed:\n{code}\n{result.stderr[-3000:]}'
  )
