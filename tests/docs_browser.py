"""The built documentation site as a person sees it: served over HTTP and
opened in headless Chromium (Debian's `chromium`).

Used by tests/test_docs.py and, as a program, by
`scripts/build_docs.sh screenshots`:

  python tests/docs_browser.py SITE_DIR --screenshots DIR
"""

import argparse
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Iterator, Optional

# The page that documents tf_reverb.Client (the API reference may be one page
# or several): the HTML file holding the object's anchor.
CLIENT_ANCHOR = 'id="tf_reverb.Client"'


def chromium() -> Optional[str]:
  """Path of the Chromium binary, or None."""
  for name in ('chromium', 'chromium-browser', 'google-chrome'):
    path = shutil.which(name)
    if path:
      return path
  return None


def client_page(site: str) -> str:
  """The site-relative path of the page documenting tf_reverb.Client."""
  for path in sorted(
    glob.glob(os.path.join(site, '**', '*.html'), recursive=True)
  ):
    with open(path, encoding='utf-8') as f:
      if CLIENT_ANCHOR in f.read():
        return os.path.relpath(path, site)
  raise AssertionError(f'no page of {site} documents tf_reverb.Client')


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def serve(site: str) -> Iterator[str]:
  """Serves `site` over HTTP on loopback; yields its base URL."""
  port = _free_port()
  server = subprocess.Popen(
    [
      sys.executable,
      '-m',
      'http.server',
      str(port),
      '--bind',
      '127.0.0.1',
      '--directory',
      site,
    ],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  base = f'http://127.0.0.1:{port}/'
  try:
    # Ready once it answers (bounded by attempts, not by a deadline).
    for attempt in range(400):
      try:
        with urllib.request.urlopen(base, timeout=30):
          break
      except OSError:
        if server.poll() is not None or attempt == 399:
          raise RuntimeError(f'the HTTP server of {site} does not answer')
        time.sleep(0.05)
    yield base
  finally:
    server.kill()
    server.wait()


def _run_chromium(args, url: str) -> subprocess.CompletedProcess:
  with tempfile.TemporaryDirectory(prefix='tf_reverb_chromium_') as profile:
    return subprocess.run(
      [
        chromium(),
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--no-first-run',
        '--disable-background-networking',
        f'--user-data-dir={profile}',
        *args,
        url,
      ],
      capture_output=True,
      text=True,
      timeout=300,
      check=False,
    )


def rendered_dom(url: str) -> str:
  """The page's DOM after Chromium loaded it and ran its scripts."""
  result = _run_chromium(['--dump-dom', '--virtual-time-budget=5000'], url)
  if result.returncode != 0 or '<html' not in result.stdout:
    raise RuntimeError(
      f'chromium could not render {url}: {result.stderr[-2000:]}'
    )
  return result.stdout


def screenshot(
  url: str, path: str, width: int = 1280, height: int = 900
) -> None:
  """Writes a PNG of the page as Chromium shows it."""
  result = _run_chromium(
    [
      f'--screenshot={path}',
      f'--window-size={width},{height}',
      '--hide-scrollbars',
      '--virtual-time-budget=5000',
    ],
    url,
  )
  if result.returncode != 0 or not os.path.exists(path):
    raise RuntimeError(
      f'chromium took no screenshot of {url}: {result.stderr[-2000:]}'
    )


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('site')
  parser.add_argument('--screenshots', required=True)
  args = parser.parse_args()
  if chromium() is None:
    print(
      'no chromium: bash scripts/setup.sh --docs installs it', file=sys.stderr
    )
    return 1
  os.makedirs(args.screenshots, exist_ok=True)
  with serve(args.site) as base:
    for name, page in (('home', ''), ('client-api', client_page(args.site))):
      path = os.path.join(args.screenshots, f'{name}.png')
      screenshot(base + page, path)
      print(path)
  return 0


if __name__ == '__main__':
  sys.exit(main())
