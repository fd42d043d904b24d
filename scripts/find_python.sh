#!/usr/bin/env bash
# Prints the path of a CPython interpreter of the given minor version:
#
#   bash scripts/find_python.sh 3.12      -> /root/.pyenv/versions/3.12.1/bin/python3.12
#   bash scripts/find_python.sh --supported  -> the minors tf_reverb's wheels
#                                               are built for, one per line
#
# Looks in pyenv's versions folder first (${PYENV_ROOT:-~/.pyenv}/versions,
# the newest patch release of that minor), then for python3.X on PATH.
# Exits 1 with a message naming what to install when there is none.
# scripts/build_wheel.sh and scripts/test_wheel.sh use it for --python and
# --all-pythons.
set -euo pipefail
SUPPORTED="3.10 3.11 3.12 3.13"

case "${1:-}" in
  --supported) tr ' ' '\n' <<<"$SUPPORTED"; exit 0 ;;
  3.[0-9]|3.[0-9][0-9]) minor=$1 ;;
  *) echo "usage: find_python.sh 3.X | --supported (got '${1:-}')" >&2; exit 2 ;;
esac

versions=${PYENV_ROOT:-$HOME/.pyenv}/versions
# The newest patch release: 3.12.10 sorts after 3.12.9 with sort -V.
for dir in $(ls -d "$versions/$minor".* 2>/dev/null | grep -E "/$minor\.[0-9]+$" | sort -V -r); do
  if [ -x "$dir/bin/python$minor" ]; then
    echo "$dir/bin/python$minor"
    exit 0
  fi
done
if command -v "python$minor" >/dev/null 2>&1; then
  command -v "python$minor"
  exit 0
fi
echo "no Python $minor found (neither in $versions nor python$minor on PATH):" \
     "install it, e.g. 'pyenv install $minor' or Debian's python$minor" >&2
exit 1
