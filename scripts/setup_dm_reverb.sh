#!/usr/bin/env bash
# Idempotent: a separate virtualenv (.venv-dm-reverb) with dm-reverb 0.14
# (TensorFlow 2.15) for the wire-compatibility tests. Prints the path of its
# python.
#
# dm-reverb 0.14 is published for CPython 3.8-3.11 on Linux x86_64 only. The
# venv is made with $PYTHON if set, else with the first of python3,
# python3.11, python3.10, python3.9, python3.8 that is such a Python. Where
# there is none (Debian 13's only Python is 3.13), it prints nothing, says why
# on stderr and exits 0, and the tests that need dm-reverb skip with that
# reason (`--why-unavailable` prints just the reason, or nothing). Where
# there is one but the install fails, it exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-dm-reverb

supported() {  # Is $1 a Python that dm-reverb 0.14 has wheels for?
  command -v "$1" >/dev/null 2>&1 &&
    "$1" -c 'import sys; sys.exit(not (3, 8) <= sys.version_info[:2] <= (3, 11))' 2>/dev/null
}

python_version() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "missing"
}

PYTHON_FOR_DM=""
REASON=""
if [ "$(uname -m)" != x86_64 ]; then
  REASON="dm-reverb 0.14 is published for Linux x86_64 only, this machine is $(uname -m)"
elif [ -n "${PYTHON:-}" ]; then
  if supported "$PYTHON"; then
    PYTHON_FOR_DM=$PYTHON
  else
    REASON="dm-reverb 0.14 is published for Python 3.8-3.11 only, PYTHON=$PYTHON is $(python_version "$PYTHON")"
  fi
else
  for candidate in python3 python3.11 python3.10 python3.9 python3.8; do
    if supported "$candidate"; then
      PYTHON_FOR_DM=$candidate
      break
    fi
  done
  [ -n "$PYTHON_FOR_DM" ] ||
    REASON="dm-reverb 0.14 is published for Python 3.8-3.11 only and this machine has none (python3 is $(python_version python3))"
fi

if [ "${1:-}" = --why-unavailable ]; then
  [ -n "$REASON" ] && echo "$REASON"
  exit 0
fi

# A venv made earlier (by hand or by a previous run) is used as it is.
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import reverb" 2>/dev/null; then
  echo "$PWD/$VENV/bin/python"
  exit 0
fi
if [ -n "$REASON" ]; then
  echo "[setup] no dm-reverb for the interop tests: $REASON; they skip" >&2
  exit 0
fi
echo "[setup] installing dm-reverb 0.14 into $VENV ($($PYTHON_FOR_DM --version)) for interop tests" >&2
"$PYTHON_FOR_DM" -m venv "$VENV"
"$VENV/bin/pip" install -q "dm-reverb[tensorflow]==0.14.0" >&2
"$VENV/bin/python" -c "import reverb" >&2
echo "$PWD/$VENV/bin/python"
