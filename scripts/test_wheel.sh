#!/usr/bin/env bash
# Proof of the binary wheel on clean environments.
#
#   scripts/test_wheel.sh [--all | --tf "2.15 2.21"] [--wheel dist/X.whl]
#                         [--python 3.X | --all-pythons] [--no-notf] [--keep]
#
# The venvs are of PYTHON (default python3), or with --python 3.X of that
# CPython (scripts/find_python.sh), and the wheel is the newest
# dist/tf_reverb-*-cp3X-*.whl of that Python unless --wheel names one.
# --all-pythons proves each Python's newest wheel in dist/ in turn (3.10 to
# 3.13; a Python without a wheel fails) and ends with a line per Python.
#
# For each TensorFlow minor in the list (default: the oldest and the newest
# the wheel has kernels for, e.g. 2.15 and 2.21; --all: every one it has
# kernels for) it creates a fresh venv
# under .wheel-build/smoke-venvs/cp3X-tfX (recreated every run; the pip cache is
# reused), pip-installs only the wheel and tensorflow-cpu==X.*, and from a
# scratch directory outside the checkout runs tests/wheel/smoke.py (import
# without TF, reverb_server round trip, TFClient in tf.function,
# TrajectoryDataset, TFStructuredWriter, checkpoint/restore) and
# tests/wheel/check_libs.py (no installed .so or binary resolves to the
# system's gRPC/protobuf/absl/snappy/zstd or other non-base libraries). One
# more venv, "notf", gets the wheel alone and runs the TF-free checks
# (--no-notf leaves it out). Prints one result line per environment and a
# closing "N passed, M failed"; exits non-zero on any failure. Venvs are
# deleted after a passing run unless --keep; a failing one is kept to look at.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TF_VERSIONS=""
ALL=0
WHEEL=""
NOTF=1
KEEP=0
PYTHON_MINOR=""
ALL_PYTHONS=0
PASSTHROUGH=()
for arg in "$@"; do
  case "$arg" in --all|--no-notf|--keep) PASSTHROUGH+=("$arg") ;; esac
done
while (($#)); do
  case "$1" in
    --all) ALL=1 ;;
    --tf) TF_VERSIONS=$2; shift ;;
    --tf=*) TF_VERSIONS=${1#--tf=} ;;
    --wheel) WHEEL=$2; shift ;;
    --wheel=*) WHEEL=${1#--wheel=} ;;
    --no-notf) NOTF=0 ;;
    --keep) KEEP=1 ;;
    --python) PYTHON_MINOR=$2; shift ;;
    --python=*) PYTHON_MINOR=${1#--python=} ;;
    --all-pythons) ALL_PYTHONS=1 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "test_wheel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ "$ALL_PYTHONS" -eq 1 ]; then
  if [ -n "$PYTHON_MINOR" ] || [ -n "$WHEEL" ] || [ -n "$TF_VERSIONS" ]; then
    echo "test_wheel.sh: --all-pythons takes none of --python, --wheel, --tf" >&2
    exit 2
  fi
  status=0
  summary=()
  for minor in $(bash "$ROOT/scripts/find_python.sh" --supported); do
    t0=$(date +%s)
    if out=$(bash "$0" --python "$minor" "${PASSTHROUGH[@]}"); then
      echo "$out"
      summary+=("Python $minor: $(tail -n 1 <<<"$out") ($(( $(date +%s) - t0 ))s)")
    else
      rc=$?
      echo "$out"
      [ "$status" -eq 0 ] && status=$rc
      summary+=("Python $minor: FAILED, $(tail -n 1 <<<"$out") ($(( $(date +%s) - t0 ))s)")
    fi
  done
  echo "=== wheel smoke, every Python ==="
  printf '%s\n' "${summary[@]}"
  exit "$status"
fi

if [ -n "$PYTHON_MINOR" ]; then
  PYTHON=$(bash "$ROOT/scripts/find_python.sh" "$PYTHON_MINOR") || exit 2
else
  PYTHON=${PYTHON:-python3}
fi
PY_TAG=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
if [ -z "$WHEEL" ]; then
  # The newest wheel in dist/ for this Python.
  WHEEL=$(ls -t "$ROOT"/dist/tf_reverb-*-"$PY_TAG"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$WHEEL" ]; then
    echo "test_wheel.sh: no dist/tf_reverb-*-$PY_TAG-*.whl; build one with" \
         "scripts/build_wheel.sh --python ${PY_TAG:2:1}.${PY_TAG:3} or pass --wheel" >&2
    exit 2
  fi
fi
WHEEL=$(realpath -m "$WHEEL")
[ -f "$WHEEL" ] || { echo "test_wheel.sh: $WHEEL not found" >&2; exit 2; }
if [ -z "$TF_VERSIONS" ]; then
  # The TF minors of the wheel's kernel libraries (libtf_reverb_ops_tf2_15.so).
  KERNEL_TF=$("$PYTHON" - "$WHEEL" <<'EOF'
import re, sys, zipfile
found = set()
for name in zipfile.ZipFile(sys.argv[1]).namelist():
  match = re.search(r'libtf_reverb_ops_tf(\d+)_(\d+)\.so$', name)
  if match:
    found.add((int(match[1]), int(match[2])))
print(' '.join(f'{major}.{minor}' for major, minor in sorted(found)))
EOF
)
  if [ -z "$KERNEL_TF" ]; then
    echo "test_wheel.sh: $WHEEL holds no TF kernel library" >&2
    exit 2
  fi
  read -r -a kernels <<<"$KERNEL_TF"
  if [ "$ALL" -eq 1 ] || [ "${#kernels[@]}" -eq 1 ]; then
    TF_VERSIONS=$KERNEL_TF
  else
    TF_VERSIONS="${kernels[0]} ${kernels[-1]}"
  fi
fi

VENVS=$ROOT/.wheel-build/smoke-venvs
mkdir -p "$VENVS"
SCRATCH=$(mktemp -d /tmp/tf_reverb_wheel_smoke.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
cp "$ROOT/tests/wheel/smoke.py" "$ROOT/tests/wheel/check_libs.py" "$SCRATCH/"

log() { echo "[test_wheel] $*" >&2; }
now() { date +%s; }

log "wheel $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1)), Python $("$PYTHON" --version 2>&1)"
# Informational (the ldd check below decides): the wheel's platform tag as
# auditwheel sees it, where scripts/build_wheel.sh installed it (.venv).
if [ -x "$ROOT/.venv/bin/python" ] && "$ROOT/.venv/bin/python" -m auditwheel --version >/dev/null 2>&1; then
  "$ROOT/.venv/bin/python" -m auditwheel show "$WHEEL" 2>&1 | sed 's/^/[auditwheel] /' >&2 || true
elif command -v auditwheel >/dev/null 2>&1; then
  auditwheel show "$WHEEL" 2>&1 | sed 's/^/[auditwheel] /' >&2 || true
fi

RESULTS=()
passed=0
failed=0

# run_env NAME TF_REQUIREMENT(empty: no TF): one fresh venv, its result line.
run_env() {
  local name=$1 tf_requirement=$2
  local venv=$VENVS/$PY_TAG-$name logfile=$VENVS/$PY_TAG-$name.log
  local status=PASS detail="" t0 t1 t2 t3
  rm -rf "$venv"
  : > "$logfile"
  t0=$(now)
  "$PYTHON" -m venv "$venv" >>"$logfile" 2>&1
  local requirements=("$WHEEL")
  [ -n "$tf_requirement" ] && requirements+=("$tf_requirement")
  log "$name: pip install $(basename "$WHEEL") ${tf_requirement}"
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        --no-input "${requirements[@]}" >>"$logfile" 2>&1; then
    RESULTS+=("$(printf '%-12s FAIL  pip install failed (see %s)' "$PY_TAG-$name" "$logfile")")
    failed=$((failed + 1))
    return 0
  fi
  t1=$(now)
  local versions
  versions=$("$venv/bin/python" - <<'EOF' 2>>"$logfile"
import importlib.metadata as m
def v(name):
  try:
    return m.version(name)
  except m.PackageNotFoundError:
    return '-'
print(f"tensorflow-cpu {v('tensorflow-cpu')}, protobuf {v('protobuf')}, "
      f"numpy {v('numpy')}, grpcio {v('grpcio')}")
EOF
)
  # The venvs live under the checkout (.wheel-build/, outside git): forbid
  # its source package, which only a leaked sys.path would import.
  local smoke_args=(--forbid-path "$ROOT/tf_reverb")
  [ -z "$tf_requirement" ] && smoke_args+=(--no-tf)
  local smoke_out smoke_status=0
  # From the scratch directory: nothing of the checkout is on sys.path.
  smoke_out=$(cd "$SCRATCH" && env -u PYTHONPATH PATH="$venv/bin:$PATH" \
      "$venv/bin/python" smoke.py "${smoke_args[@]}" 2>&1) || smoke_status=$?
  echo "$smoke_out" >>"$logfile"
  t2=$(now)
  local libs_out libs_status=0
  libs_out=$(cd "$SCRATCH" && "$venv/bin/python" check_libs.py 2>&1) || libs_status=$?
  echo "$libs_out" >>"$logfile"
  t3=$(now)
  local smoke_line libs_line
  smoke_line=$(awk '/^smoke: /{line=$0} END{print line}' <<<"$smoke_out")
  libs_line=$(awk '/^libs: /{line=$0} END{print line}' <<<"$libs_out")
  if [ "$smoke_status" -ne 0 ] || [ "$libs_status" -ne 0 ]; then
    status=FAIL
    # awk reads all its input: no SIGPIPE under pipefail.
    detail=" | $(awk '/^FAIL / && n++ < 3 {printf "%s; ", substr($0, 1, 160)}' <<<"$smoke_out")"
    detail+="$(awk '/^FAIL / && n++ < 1 {sub(/^FAIL .*\//, ""); printf "%s", substr($0, 1, 120)}' <<<"$libs_out")"
  fi
  RESULTS+=("$(printf '%-12s %s  %s; %s; install %ss smoke %ss libs %ss; %s%s' \
      "$PY_TAG-$name" "$status" "${smoke_line:-smoke: no summary}" \
      "${libs_line:-libs: no summary}" $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) \
      "$versions" "$detail")")
  if [ "$status" = PASS ]; then
    passed=$((passed + 1))
    [ "$KEEP" -eq 1 ] || rm -rf "$venv"
  else
    failed=$((failed + 1))
    log "$name failed; venv kept at $venv, log at $logfile"
  fi
  log "${RESULTS[-1]}"
}

start=$(now)
if [ "$NOTF" -eq 1 ]; then
  run_env notf ""
fi
for tf in $TF_VERSIONS; do
  run_env "tf$tf" "tensorflow-cpu==$tf.*"
done

echo "=== wheel smoke: $(basename "$WHEEL") ($(( $(now) - start ))s) ==="
printf '%s\n' "${RESULTS[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
