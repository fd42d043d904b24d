#!/usr/bin/env bash
# Runs every test: the C++ tests (Bazel cc_test), the include check
# (scripts/check_includes.py), the lint and format check (scripts/lint.sh:
# ruff, clang-format), a smoke run of every fuzz
# target (scripts/fuzz.sh: clang, ASan+UBSan, a fixed number of inputs each),
# the Python tests (pytest; tests/test_docs.py builds the documentation site
# with --strict, runs every Python block of its pages and the README, checks
# its links and opens it in headless Chromium), and the binary wheel's proof (scripts/build_wheel.sh --ends builds a wheel
# with kernels for the oldest and the newest TensorFlow this Python has;
# scripts/test_wheel.sh installs it into fresh venvs with each of them and
# with no TensorFlow, and smoke-tests it from outside the checkout), and the
# other supported Debian in a chroot (scripts/debian_chroot.sh). Does its
# own set-up first. Exits non-zero on any failure; the last lines are the
# summary of each part.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --docs || exit 1
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

echo "=== Includes (scripts/check_includes.py: clang's include-cleaner over every C++ file) ==="
.venv/bin/python scripts/check_includes.py 2>&1 | tail -n 30
includes_status=${PIPESTATUS[0]}

echo "=== Lint (scripts/lint.sh: ruff check, ruff format --check, clang-format) ==="
bash scripts/lint.sh 2>&1 | tail -n 30
lint_status=${PIPESTATUS[0]}

echo "=== Fuzz smoke (scripts/fuzz.sh --runs 20000: each libFuzzer target, ASan+UBSan) ==="
bash scripts/fuzz.sh --runs 20000 2>&1 | tail -n 15
fuzz_status=${PIPESTATUS[0]}

echo "=== Python tests (pytest) ==="
.venv/bin/python -m pytest tests -q -rs -p no:cacheprovider
py_status=$?

echo "=== Binary wheel (scripts/build_wheel.sh --ends, scripts/test_wheel.sh) ==="
wheel_status=0
if wheel=$(bash scripts/build_wheel.sh --ends); then
  bash scripts/test_wheel.sh --wheel "$wheel" || wheel_status=$?
else
  wheel_status=$?
  echo "wheel build FAILED (scripts/build_wheel.sh exit code $wheel_status)"
fi

# The supported Debian this machine is not, in a debootstrapped chroot (cached
# in ~/.cache/tf_reverb/chroots): its set-up from bare, C++ build and tests,
# and a pytest subset. Exit status 3: this machine cannot make a chroot.
. /etc/os-release
case "${VERSION_CODENAME:-}" in
  trixie) other_suite=bookworm other_name="Debian 12" ;;
  *) other_suite=trixie other_name="Debian 13" ;;
esac
echo "=== $other_name ($other_suite chroot: scripts/debian_chroot.sh --suite $other_suite) ==="
other_log=build/debian_chroot_$other_suite.log
mkdir -p build
other_status=0
other_skip=""
bash scripts/debian_chroot.sh --suite "$other_suite" > "$other_log" 2>&1 || other_status=$?
tail -n 40 "$other_log"
if [ "$other_status" -eq 3 ]; then
  other_skip=$(tail -n 1 "$other_log")
  other_status=0
fi

echo "=== Summary ==="
echo "C++ tests: $([ "$cc_status" -eq 0 ] && echo passed || echo "FAILED (bazel exit code $cc_status)")"
echo "Includes: $([ "$includes_status" -eq 0 ] && echo passed || echo "FAILED (scripts/check_includes.py exit code $includes_status)")"
echo "Lint: $([ "$lint_status" -eq 0 ] && echo passed || echo "FAILED (scripts/lint.sh exit code $lint_status)")"
echo "Fuzz smoke: $([ "$fuzz_status" -eq 0 ] && echo passed || echo "FAILED (scripts/fuzz.sh exit code $fuzz_status)")"
echo "Python tests: $([ "$py_status" -eq 0 ] && echo passed || echo "FAILED (pytest exit code $py_status)")"
echo "Wheel: $([ "$wheel_status" -eq 0 ] && echo passed || echo "FAILED (exit code $wheel_status)")"
if [ -n "$other_skip" ]; then
  echo "$other_name: skipped ($other_skip)"
else
  echo "$other_name: $([ "$other_status" -eq 0 ] && echo passed || echo "FAILED (scripts/debian_chroot.sh exit code $other_status)")"
fi
for status in "$cc_status" "$includes_status" "$lint_status" "$fuzz_status" "$py_status" "$wheel_status" "$other_status"; do
  [ "$status" -eq 0 ] || exit "$status"
done
