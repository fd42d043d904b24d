#!/usr/bin/env bash
# Runs the C++ tests under sanitizers, one pass each:
#   asan  AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer
#         (bazel --config=asan --config=ubsan; any UB report fails the test)
#   tsan  ThreadSanitizer (--config=tsan; server/testing/tsan_absl_shim.cc
#         teaches it Debian's uninstrumented absl::Mutex)
#
#   scripts/run_sanitizers.sh [asan] [tsan] [-- BAZEL_TARGETS...]
#
# Default: both passes over //:tests (every C++ test, the fuzz targets' seed
# corpus replays included). Each pass has a Bazel output base of its
# own (SANITIZER_OUTPUT_ROOT, default ~/.cache/tf_reverb: bazel-asan,
# bazel-tsan), so the sanitizer builds never evict the normal build's cache.
# Prints each pass's wall time; exits 1 if a pass fails (test logs under that
# output base's bazel-testlogs, as Bazel prints), 2 on usage errors.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "[sanitizers] $*" >&2; }

passes=()
targets=()
while (($#)); do
  case "$1" in
    asan|tsan) passes+=("$1"); shift ;;
    --) shift; targets=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "usage: $0 [asan] [tsan] [-- BAZEL_TARGETS...]" >&2; exit 2 ;;
  esac
done
((${#passes[@]})) || passes=(asan tsan)
((${#targets[@]})) || targets=(//:tests)

# gcc's sanitizer runtimes (libasan, libubsan, libtsan) come with g++.
APT_PACKAGES=(
  bazel-bootstrap libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libsnappy-dev libzstd-dev libgtest-dev libgmock-dev libabsl-dev pkg-config g++
)
missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

OUTPUT_ROOT=${SANITIZER_OUTPUT_ROOT:-$HOME/.cache/tf_reverb}
# Sanitized tests run several times slower: generous per-size timeouts.
# --symlink_prefix=/: no bazel-* convenience symlinks, which would point the
# checkout's bazel-bin/bazel-testlogs at a sanitizer output base.
COMMON=(--keep_going --symlink_prefix=/ --test_timeout=300,900,2700,3600
        --test_env=UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        --test_env=ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
        --test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)

failed=()
summary=()
for pass in "${passes[@]}"; do
  case "$pass" in
    asan) configs=(--config=asan --config=ubsan) ;;
    tsan) configs=(--config=tsan) ;;
  esac
  log "pass $pass: bazel test ${configs[*]} ${targets[*]} (output base $OUTPUT_ROOT/bazel-$pass)"
  start=$SECONDS
  status=0
  bazel --output_base="$OUTPUT_ROOT/bazel-$pass" test "${configs[@]}" "${COMMON[@]}" \
    "${targets[@]}" || status=$?
  elapsed=$((SECONDS - start))
  if ((status == 0)); then
    summary+=("$pass: passed in ${elapsed} s")
  else
    summary+=("$pass: FAILED (bazel exit $status) after ${elapsed} s")
    failed+=("$pass")
  fi
done
for line in "${summary[@]}"; do log "$line"; done
((${#failed[@]} == 0)) || exit 1
