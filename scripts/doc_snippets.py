#!/usr/bin/env python3
"""Runs the Python snippets of the documentation, page by page.

Every fenced ```python block of a Markdown page runs: the blocks of one page
in order, in one fresh interpreter (they share a namespace, as a reader who
pastes them one after another would), with a scratch directory as the
working directory. A page is therefore self-contained: it starts the servers
it uses. A block preceded by a line `<!-- notest: REASON -->` is not run (for
what needs something the test machine cannot have, such as a Kubernetes
cluster); the reason is required and reported.

  python scripts/doc_snippets.py [PAGE.md ...]   run these pages (default:
                                                 README.md and docs/**/*.md)
  python scripts/doc_snippets.py --list          list pages and their blocks

Exits non-zero when a page fails, printing the failing block's line and the
traceback.
"""

import argparse
import dataclasses
import glob
import os
import re
import subprocess
import sys
import tempfile
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_FENCE = re.compile(
  r'^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\n]*)$'
)
_NOTEST = re.compile(r'^\s*<!--\s*notest:\s*(?P<reason>.*?)\s*-->\s*$')


@dataclasses.dataclass
class Block:
  """One fenced code block of a page."""

  path: str
  line: int  # 1-based line of the opening fence
  language: str
  code: str
  skip_reason: Optional[str]


def blocks(path: str) -> List[Block]:
  """The fenced code blocks of the Markdown file at `path`, in order."""
  with open(path, encoding='utf-8') as f:
    lines = f.read().split('\n')
  found = []
  i = 0
  previous = ''
  while i < len(lines):
    match = _FENCE.match(lines[i])
    if not match:
      if lines[i].strip():
        previous = lines[i]
      i += 1
      continue
    indent, fence = match['indent'], match['fence']
    language = (match['info'].split() or [''])[0].lstrip('{.').rstrip('}')
    start = i
    body = []
    i += 1
    while i < len(lines) and not re.match(
      rf'^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$', lines[i]
    ):
      line = lines[i]
      body.append(line[len(indent) :] if line.startswith(indent) else line)
      i += 1
    i += 1
    notest = _NOTEST.match(previous)
    found.append(
      Block(
        path,
        start + 1,
        language,
        '\n'.join(body) + '\n',
        notest['reason'] if notest else None,
      )
    )
    previous = ''
  return found


def python_blocks(path: str) -> List[Block]:
  """The ```python blocks of a page (the ones the test suite runs or skips)."""
  return [b for b in blocks(path) if b.language in ('python', 'py')]


def pages() -> List[str]:
  """README.md and every page of the documentation site."""
  found = [os.path.join(ROOT, 'README.md')]
  found += sorted(
    glob.glob(os.path.join(ROOT, 'docs', '**', '*.md'), recursive=True)
  )
  return found


_DRIVER = r'''
import sys, traceback
blocks = %r
namespace = {'__name__': '__main__'}
for path, line, code in blocks:
  try:
    exec(compile(code, f'{path}:{line}', 'exec'), namespace)
  except SystemExit:
    raise
  except BaseException:
    print(f'SNIPPET FAILED: {path}, the block at line {line}', file=sys.stderr)
    traceback.print_exc()
    sys.exit(1)
'''


def run_page(
  path: str, python: str = sys.executable, timeout: Optional[float] = None
) -> subprocess.CompletedProcess:
  """Runs the page's Python blocks in one fresh interpreter.

  `timeout` guards against a hang only; the snippets are bounded by items.
  """
  runnable = [
    (os.path.relpath(b.path, ROOT), b.line, b.code)
    for b in python_blocks(path)
    if b.skip_reason is None
  ]
  with tempfile.TemporaryDirectory(prefix='tf_reverb_doc_') as scratch:
    return subprocess.run(
      [python, '-c', _DRIVER % (runnable,)],
      cwd=scratch,
      capture_output=True,
      text=True,
      timeout=timeout,
    )


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('pages', nargs='*')
  parser.add_argument('--list', action='store_true')
  args = parser.parse_args()
  failed = 0
  for page in args.pages or pages():
    found = python_blocks(page)
    skipped = [b for b in found if b.skip_reason is not None]
    if args.list:
      print(
        f'{os.path.relpath(page, ROOT)}: {len(found)} blocks, '
        f'{len(skipped)} not run'
      )
      for block in skipped:
        print(f'  line {block.line}: not run: {block.skip_reason}')
      continue
    if len(found) == len(skipped):
      continue
    result = run_page(page)
    status = 'ok' if result.returncode == 0 else 'FAILED'
    print(
      f'{os.path.relpath(page, ROOT)}: {len(found) - len(skipped)} '
      f'blocks {status}',
      flush=True,
    )
    if result.returncode != 0:
      failed += 1
      sys.stdout.write(result.stdout[-4000:])
      sys.stdout.write(result.stderr[-8000:])
  return 1 if failed else 0


if __name__ == '__main__':
  sys.exit(main())
