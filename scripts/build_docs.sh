#!/usr/bin/env bash
# The documentation site (mkdocs.yml, docs/): built with MkDocs, its Material
# theme and mkdocstrings (the API reference, from the docstrings).
#
#   bash scripts/build_docs.sh                build into site/ with --strict: a
#                                             broken link or anchor, a missing
#                                             reference target or page fails it
#   bash scripts/build_docs.sh serve          serve it at http://127.0.0.1:8000
#   bash scripts/build_docs.sh screenshots    build, then refresh the pictures
#                                             docs/screenshots/{home,client-api}.png
#                                             with headless Chromium
#
# Needs the set-up (scripts/setup.sh: .venv with the site's tools, the server
# binary, whose --help makes the flags page). tests/test_docs.py builds the
# site the same way and checks its links, its API reference and how a
# browser renders it; every Python block of the pages runs there too.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MKDOCS=$ROOT/.venv/bin/mkdocs
if [ ! -x "$MKDOCS" ]; then
  echo "no $MKDOCS: run scripts/setup.sh first" >&2
  exit 1
fi
case "${1:-build}" in
  build) exec "$MKDOCS" build --strict --clean -d "$ROOT/site" ;;
  serve) exec "$MKDOCS" serve --strict -a 127.0.0.1:8000 ;;
  screenshots)
    "$MKDOCS" build --strict --clean -d "$ROOT/site"
    exec "$ROOT/.venv/bin/python" "$ROOT/tests/docs_browser.py" "$ROOT/site" \
      --screenshots "$ROOT/docs/screenshots" ;;
  *) echo "build_docs.sh: unknown command $1 (build, serve or screenshots)" >&2; exit 2 ;;
esac
