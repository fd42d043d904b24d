#!/usr/bin/env bash
# Lint and format checks of the whole tree, with the pinned tools the set-up
# installs into .venv: ruff (Python: ruff.toml) and clang-format (C++:
# .clang-format, Google style).
#
#   bash scripts/lint.sh         check; exits non-zero naming what is off
#   bash scripts/lint.sh --fix   apply the formatters and ruff's safe fixes
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUFF=$ROOT/.venv/bin/ruff
CLANG_FORMAT=$ROOT/.venv/bin/clang-format
for tool in "$RUFF" "$CLANG_FORMAT"; do
  [ -x "$tool" ] || { echo "no $tool: run scripts/setup.sh first" >&2; exit 1; }
done
FIX=0
case "${1:-}" in
  --fix) FIX=1 ;;
  "") ;;
  *) echo "lint.sh: unknown argument $1 (--fix is the only one)" >&2; exit 2 ;;
esac

# The tree's C++ sources, tracked or new, that exist (not bazel-* outputs,
# ignored files, the fuzz corpora, nor files deleted but not yet committed).
mapfile -t cpp < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' |
  sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
status=0
if [ "$FIX" -eq 1 ]; then
  "$RUFF" check --fix . || status=1
  "$RUFF" format . || status=1
  "$CLANG_FORMAT" -i "${cpp[@]}" || status=1
  exit "$status"
fi
"$RUFF" check . || { echo "ruff check: FAILED"; status=1; }
"$RUFF" format --check . || { echo "ruff format: FAILED (bash scripts/lint.sh --fix formats)"; status=1; }
if "$CLANG_FORMAT" --dry-run -Werror "${cpp[@]}" 2>/tmp/tf_reverb_clang_format.$$; then
  echo "clang-format: ${#cpp[@]} files formatted"
else
  grep -E '^[^ ].*: (error|warning):' /tmp/tf_reverb_clang_format.$$ | cut -d: -f1 | sort -u | head -20
  echo "clang-format: FAILED (bash scripts/lint.sh --fix formats)"
  status=1
fi
rm -f /tmp/tf_reverb_clang_format.$$
exit "$status"
