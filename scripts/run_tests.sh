#!/usr/bin/env bash
# Runs every test: the C++ tests (Bazel cc_test) and the Python tests
# (pytest). Does its own set-up first. Exits non-zero on any failure; the last
# line is pytest's summary.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export PYTHON_BIN_PATH=$PWD/.venv/bin/python
# A real dm-reverb for the wire-compatibility tests (tests/test_dm_reverb_interop.py).
# Where dm-reverb 0.14 cannot exist (no Python 3.8-3.11, e.g. Debian 13) those
# tests skip with the reason; where it should install but does not, this fails.
# A TF_REVERB_DM_PYTHON set by the caller is used as it is.
if [ -z "${TF_REVERB_DM_PYTHON:-}" ] &&
   ! TF_REVERB_DM_PYTHON=$(bash scripts/setup_dm_reverb.sh); then
  echo "dm-reverb set-up FAILED (scripts/setup_dm_reverb.sh)" >&2
  exit 1
fi
if [ -n "$TF_REVERB_DM_PYTHON" ]; then
  export TF_REVERB_DM_PYTHON
else
  unset TF_REVERB_DM_PYTHON
  TF_REVERB_DM_UNAVAILABLE=$(bash scripts/setup_dm_reverb.sh --why-unavailable)
  export TF_REVERB_DM_UNAVAILABLE=${TF_REVERB_DM_UNAVAILABLE:-dm-reverb 0.14 is not installed}
fi

echo "=== C++ tests (bazel test //...) ==="
bazel test -c opt //... 2>&1 | tail -n 40
cc_status=${PIPESTATUS[0]}

echo "=== Python tests (pytest) ==="
.venv/bin/python -m pytest tests -q -rs -p no:cacheprovider
py_status=$?

if [ "$cc_status" -ne 0 ]; then
  echo "C++ tests FAILED (bazel exit code $cc_status)"
  exit "$cc_status"
fi
exit "$py_status"
