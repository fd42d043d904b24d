#!/usr/bin/env bash
# Builds the libFuzzer targets of server/fuzz with clang (ASan + UBSan) and
# runs each on a copy of its seed corpus.
#
#   scripts/fuzz.sh [SECONDS]          each target for SECONDS (default 60)
#   scripts/fuzz.sh --runs N           each target for N inputs (CI smoke)
#   ... [TARGET...]                    only these targets (default: all)
#
# Installs the Debian packages it needs (clang, its runtime libraries, the
# C++ build's libraries), idempotently. The clang build has an output base of
# its own (FUZZ_OUTPUT_BASE, default ~/.cache/tf_reverb/bazel-fuzz), so the
# normal gcc build's cache is untouched. Each run works in a fresh directory
# under FUZZ_WORK_DIR (default ${TMPDIR:-/tmp}/tf_reverb_fuzz): corpus/ (the
# seeds plus what the run found; the committed corpus is never modified),
# log, and any crash, leak, OOM or timeout artifact (and libFuzzer's
# slow-unit note, printed but not a failure). Prints, per target, the
# inputs executed, coverage (cov = edges, ft = features, libFuzzer's final
# stats) and the verdict; exits 1 if any target crashed (the artifacts'
# paths are printed), 2 on usage errors.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { echo "[fuzz] $*" >&2; }

TARGETS_ALL=(chunk_codec_fuzzer checkpoint_record_fuzzer structured_writer_config_fuzzer
             signature_fuzzer insert_stream_fuzzer insert_request_fuzzer
             sample_stream_parser_fuzzer)

seconds=60
runs=""
targets=()
while (($#)); do
  case "$1" in
    --runs)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS | --runs N] [TARGET...]" >&2; exit 2; }
      runs=$2; shift 2 ;;
    --runs=*)
      runs=${1#--runs=}
      [[ "$runs" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS | --runs N] [TARGET...]" >&2; exit 2; }
      shift ;;
    -h|--help)
      sed -n '2,19p' "$0"; exit 0 ;;
    *)
      if [[ "$1" =~ ^[0-9]+$ ]]; then
        seconds=$1
      elif [[ " ${TARGETS_ALL[*]} " == *" $1 "* ]]; then
        targets+=("$1")
      else
        echo "$0: unknown target or argument '$1' (targets: ${TARGETS_ALL[*]})" >&2
        exit 2
      fi
      shift ;;
  esac
done
((${#targets[@]})) || targets=("${TARGETS_ALL[@]}")

# Debian 12 and 13: `clang` and `libclang-rt-dev` name the release's default
# clang and its sanitizer/libFuzzer runtimes; the rest is the C++ build's.
APT_PACKAGES=(
  clang libclang-rt-dev bazel-bootstrap libgrpc++-dev protobuf-compiler-grpc
  protobuf-compiler libprotobuf-dev libsnappy-dev libzstd-dev libabsl-dev pkg-config g++
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

OUTPUT_BASE=${FUZZ_OUTPUT_BASE:-$HOME/.cache/tf_reverb/bazel-fuzz}
BAZEL=(bazel --output_base="$OUTPUT_BASE")
build_start=$SECONDS
log "building ${targets[*]} (clang, --config=fuzz, output base $OUTPUT_BASE)"
labels=()
for target in "${targets[@]}"; do labels+=("//server/fuzz:$target"); done
# No bazel-* convenience symlinks: they would point the checkout's bazel-bin
# and bazel-<workspace> at this output base (and `bazel query //...` in the
# main build would then wander into it).
"${BAZEL[@]}" build --config=fuzz --symlink_prefix=/ "${labels[@]}"
BIN=$("${BAZEL[@]}" info --config=fuzz bazel-bin 2>/dev/null)/server/fuzz
log "build took $((SECONDS - build_start)) s"

WORK_ROOT=${FUZZ_WORK_DIR:-${TMPDIR:-/tmp}/tf_reverb_fuzz}
mkdir -p "$WORK_ROOT"
WORK=$(mktemp -d "$WORK_ROOT/run-$(date -u +%Y%m%dT%H%M%SZ)-XXXX")
log "work directory: $WORK"

if [ -n "$runs" ]; then budget=(-runs="$runs"); budget_text="$runs runs"
else budget=(-max_total_time="$seconds"); budget_text="$seconds s"; fi

crashed=()
printf '%-34s %10s %8s %8s %7s  %s\n' target executions cov ft seconds result
for target in "${targets[@]}"; do
  dir=$WORK/$target
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp server/fuzz/corpus/"$target"/* "$dir/corpus/"
  start=$SECONDS
  status=0
  # -timeout: an input that runs longer than that is a hang (a finding).
  (cd "$dir" && "$BIN/$target" "${budget[@]}" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -timeout=60 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" corpus \
      > "$dir/log" 2>&1) || status=$?
  elapsed=$((SECONDS - start))
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  # The last status line ("#N DONE cov: X ft: Y ..." or a pulse before a crash).
  status_line=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  [ -n "$executions" ] || executions=$(sed -En 's/^#([0-9]+).*/\1/p' <<< "$status_line")
  cov=$(sed -En 's/.* cov: ([0-9]+).*/\1/p' <<< "$status_line")
  ft=$(sed -En 's/.* ft: ([0-9]+).*/\1/p' <<< "$status_line")
  # slow-unit-* files are libFuzzer's note of its slowest input (over
  # -report_slow_units), which a starved process on a busy machine produces
  # too: reported, not a failure. A real hang is a timeout-* artifact.
  artifacts=$(find "$dir/artifacts" -type f ! -name 'slow-unit-*' | sort)
  slow=$(find "$dir/artifacts" -type f -name 'slow-unit-*' | sort)
  if ((status != 0)) || [ -n "$artifacts" ]; then
    result="CRASH (exit $status): ${artifacts:-no artifact}; log $dir/log"
    crashed+=("$target")
  else
    result="ok"
  fi
  if [ -n "$slow" ]; then
    result+=" (slowest input $(sed -n 's/^stat::slowest_unit_time_sec: *//p' "$dir/log" | tail -1) s: $slow)"
  fi
  printf '%-34s %10s %8s %8s %7s  %s\n' "$target" "${executions:-?}" "${cov:-?}" "${ft:-?}" \
    "$elapsed" "$result"
done

if ((${#crashed[@]})); then
  log "crashes in: ${crashed[*]} (budget $budget_text each); artifacts and logs under $WORK"
  log "reproduce: $BIN/<target> <artifact>   (or the gcc build: bazel run //server/fuzz:<target> -- <artifact>)"
  exit 1
fi
log "no crash in ${#targets[@]} targets ($budget_text each); work directory $WORK"
