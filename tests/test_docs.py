"""The documentation site and the README, as a newcomer meets them.

The site is built as `bash scripts/build_docs.sh` builds it (mkdocs build
--strict: broken links, anchors and reference targets fail it, and so does a
public name without an entry in the API reference, docs/hooks.py); every
Python block of every page runs against a real server; no link leaves the
repository; the built pages' links resolve; and headless Chromium renders
the home page and the API page of Client with their content.
"""

import html.parser
import os
import re
import subprocess
import sys
import urllib.parse

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
sys.path.insert(0, os.path.join(ROOT, 'docs'))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import doc_snippets  # pylint: disable=g-import-not-at-top,wrong-import-position
import docs_browser  # pylint: disable=g-import-not-at-top,wrong-import-position
import hooks  # pylint: disable=g-import-not-at-top,wrong-import-position

PAGES = doc_snippets.pages()
MKDOCS = os.path.join(os.path.dirname(sys.executable), 'mkdocs')


@pytest.fixture(scope='module')
def site(tmp_path_factory):
  """The site, built with --strict into a scratch directory."""
  site_dir = str(tmp_path_factory.mktemp('site'))
  result = subprocess.run(
    [MKDOCS, 'build', '--strict', '-d', site_dir],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-6000:]
  return site_dir


def _page_id(path):
  return os.path.relpath(path, ROOT)


@pytest.mark.parametrize('page', PAGES, ids=_page_id)
def test_every_python_block_of_the_page_runs(page):
  runnable = [
    b for b in doc_snippets.python_blocks(page) if b.skip_reason is None
  ]
  if not runnable:
    pytest.skip(f'{_page_id(page)} has no Python block to run')
  result = doc_snippets.run_page(page, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]


def test_blocks_that_do_not_run_say_why():
  skipped = [
    b
    for page in PAGES
    for b in doc_snippets.python_blocks(page)
    if b.skip_reason is not None
  ]
  for block in skipped:
    assert len(block.skip_reason) >= 10, (
      f'{_page_id(block.path)}:{block.line}: a notest marker needs a reason'
    )


def test_snippet_extractor_reads_fences_markers_and_indentation(tmp_path):
  page = tmp_path / 'page.md'
  page.write_text(
    'Text\n\n```python\nx = 1\n```\n\n<!-- notest: needs a cluster -->\n'
    '```python\nraise SystemError\n```\n\n- item\n\n    ```py\n    y = x + 1\n'
    '    assert y == 2\n    ```\n\n```sh\nexit 1\n```\n'
  )
  blocks = doc_snippets.python_blocks(str(page))
  assert [(b.line, b.skip_reason) for b in blocks] == [
    (3, None),
    (8, 'needs a cluster'),
    (14, None),
  ]
  assert blocks[2].code == 'y = x + 1\nassert y == 2\n'
  assert doc_snippets.run_page(str(page)).returncode == 0
  page.write_text('```python\nassert 1 == 2, "wrong"\n```\n')
  result = doc_snippets.run_page(str(page))
  assert result.returncode == 1 and 'the block at line 1' in result.stderr


_LINK = re.compile(
  r'\]\(\s*<?([^)\s>]+)|<(https?://[^>]+)>|(?<![\w/])(https?://\S+)'
)
_LOOPBACK = re.compile(
  r'^https?://(localhost|127\.0\.0\.1|\[::1\]|<host>|HOST)[:/]?'
)


def _prose(path):
  """The page without its fenced code blocks (where URLs are commands)."""
  with open(path, encoding='utf-8') as f:
    text = f.read()
  return re.sub(
    r'^([ \t]*)(`{3,}|~{3,}).*?^\1\2[ \t]*$',
    '',
    text,
    flags=re.MULTILINE | re.DOTALL,
  )


@pytest.mark.parametrize('page', PAGES, ids=_page_id)
def test_no_link_leaves_the_repository(page):
  outside = []
  for match in _LINK.finditer(_prose(page)):
    target = next(g for g in match.groups() if g)
    if target.startswith(('http://', 'https://')) and not _LOOPBACK.match(
      target
    ):
      outside.append(target)
    elif '../shared' in target or target.startswith('/'):
      outside.append(target)
  assert not outside, (
    f'{_page_id(page)} links outside the repository: {outside}'
  )


class _Links(html.parser.HTMLParser):
  """The href/src targets and the element ids of one HTML page."""

  def __init__(self):
    super().__init__()
    self.targets = []
    self.ids = set()

  def handle_starttag(self, tag, attrs):
    for name, value in attrs:
      if name == 'id' and value:
        self.ids.add(value)
      if name in ('href', 'src') and value:
        self.targets.append(value)


def _parse(path):
  parser = _Links()
  with open(path, encoding='utf-8') as f:
    parser.feed(f.read())
  return parser


def test_every_link_of_the_built_site_resolves(site):
  pages = {}
  for directory, _, files in os.walk(site):
    for name in files:
      if name.endswith('.html'):
        pages[os.path.join(directory, name)] = _parse(
          os.path.join(directory, name)
        )
  assert len(pages) >= 30, sorted(pages)
  broken = []
  for path, links in pages.items():
    for target in links.targets:
      parsed = urllib.parse.urlparse(target)
      if parsed.scheme in ('http', 'https'):
        broken.append(f'{os.path.relpath(path, site)}: external {target}')
        continue
      if parsed.scheme or target.startswith('#') and not parsed.fragment:
        continue  # mailto:, data:, javascript: or a bare '#'
      # Relative to the page; a root-relative link (404.html has only
      # those, since it is served at any depth) to the site's root.
      base = site if parsed.path.startswith('/') else os.path.dirname(path)
      resolved = os.path.normpath(
        os.path.join(base, urllib.parse.unquote(parsed.path).lstrip('/'))
      )
      if parsed.path == '':
        resolved = path
      if os.path.isdir(resolved):
        resolved = os.path.join(resolved, 'index.html')
      if not os.path.exists(resolved):
        broken.append(f'{os.path.relpath(path, site)}: {target}')
      elif (
        parsed.fragment
        and resolved in pages
        and (urllib.parse.unquote(parsed.fragment) not in pages[resolved].ids)
      ):
        broken.append(
          f'{os.path.relpath(path, site)}: {target} (no such anchor)'
        )
  assert not broken, '\n'.join(broken[:50])


def test_every_public_name_has_an_api_reference_entry(site):
  modules = hooks.public_modules()
  assert 'tf_reverb' in modules and 'tf_reverb.client' in modules, modules
  assert hooks.undocumented_names(site) == []
  objects = hooks.documented_objects(site)
  for name in (
    'tf_reverb.Client',
    'tf_reverb.Server',
    'tf_reverb.Table',
    'tf_reverb.TrajectoryDataset',
    'tf_reverb.NumpyIterator',
  ):
    assert name in objects or any(
      o.endswith('.' + name.split('.')[-1]) for o in objects
    ), name


def test_the_build_fails_on_an_undocumented_public_name(site, tmp_path):
  """The check of docs/hooks.py finds a name the inventory lacks."""
  objects = hooks.documented_objects(site)
  assert objects, 'the inventory is empty'
  # The same inventory without Client: Client must be reported missing.
  import zlib  # pylint: disable=g-import-not-at-top

  with open(os.path.join(site, 'objects.inv'), 'rb') as f:
    header = b'\n'.join(f.read().split(b'\n', 4)[:4])
  kept = [o for o in sorted(objects) if not o.endswith('.Client')]
  lines = '\n'.join(f'{o} py:class 1 x.html#{o} -' for o in kept) + '\n'
  (tmp_path / 'objects.inv').write_bytes(
    header + b'\n' + zlib.compress(lines.encode())
  )
  missing = hooks.undocumented_names(str(tmp_path))
  assert 'tf_reverb.Client' in missing or 'tf_reverb.client.Client' in missing


def test_server_flags_page_is_the_binarys_own_help(site):
  flags = hooks.parse_flags(hooks.server_help())
  names = {name for name, _, _ in flags}
  assert {
    'port',
    'checkpoint_dir',
    'config',
    'tls_cert_file',
    'metrics_port',
    'check_item_signatures',
  } <= names, names
  with open(
    os.path.join(site, 'reference', 'server-flags', 'index.html'),
    encoding='utf-8',
  ) as f:
    page = f.read()
  for name in names:
    assert f'--{name}' in page, name


@pytest.mark.skipif(
  docs_browser.chromium() is None,
  reason='no chromium (bash scripts/setup.sh --docs installs it)',
)
def test_home_and_client_pages_render_in_a_real_browser(site, tmp_path):
  from PIL import Image  # pylint: disable=g-import-not-at-top

  client_page = docs_browser.client_page(site)
  with docs_browser.serve(site) as base:
    home = docs_browser.rendered_dom(base)
    client = docs_browser.rendered_dom(base + client_page)
    shots = {}
    for name, url in (('home', base), ('client', base + client_page)):
      shots[name] = str(tmp_path / f'{name}.png')
      docs_browser.screenshot(url, shots[name])
  # The theme rendered (its header and navigation), with the page's content.
  for dom in (home, client):
    assert 'md-header' in dom and 'md-nav' in dom
  assert 'tf_reverb' in home and 'Quick start' in home
  assert 'tf_reverb.Client' in client
  for method in ('sample', 'insert', 'server_info', 'trajectory_writer'):
    assert re.search(rf'id="tf_reverb\.(client\.)?Client\.{method}"', client), (
      method
    )
  for name, path in shots.items():
    with Image.open(path) as image:
      assert image.size == (1280, 900), name
      colors = image.convert('RGB').getcolors(maxcolors=1 << 20)
      assert colors is None or len(colors) > 50, f'{name} looks blank'


def test_readme_is_short_and_screenshots_are_kept():
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    lines = f.read().split('\n')
  assert len(lines) < 200, len(lines)
  for name in ('home.png', 'client-api.png'):
    assert (
      os.path.getsize(os.path.join(ROOT, 'docs', 'screenshots', name)) > 10_000
    )
