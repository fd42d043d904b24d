#!/usr/bin/env bash
# Idempotent: a separate virtualenv (.venv-dm-reverb) with dm-reverb 0.14
# (TensorFlow 2.15, Python <= 3.11) for the wire-compatibility tests. Prints
# the path of its python.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-dm-reverb
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import reverb" 2>/dev/null; then
  echo "[setup] installing dm-reverb 0.14 into $VENV for interop tests" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q "dm-reverb[tensorflow]==0.14.0" >&2
fi
echo "$PWD/$VENV/bin/python"
