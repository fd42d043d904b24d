#!/usr/bin/env bash
# Builds and tests this checkout on another Debian release, in a chroot that
# debootstrap makes: what the README's set-up meets on a bare machine of that
# release (its GCC, gRPC, protobuf, abseil and Python), without a second
# machine. scripts/run_tests.sh runs it for the supported Debian the host is
# not (Debian 13 on a Debian 12 host, Debian 12 on a Debian 13 host).
#
#   bash scripts/debian_chroot.sh [--suite trixie|bookworm] [--fresh] [-- COMMAND]
#
# The chroot starts as a user's bare machine (debootstrap's minimal base plus
# python3, git, sudo and ca-certificates) and is kept in a cache,
# $TF_REVERB_CHROOT_CACHE (default ~/.cache/tf_reverb/chroots/<suite>), so
# later runs reuse its packages, .venv and Bazel cache; a missing or
# half-made one is made again, --fresh discards it first. The checkout's
# files as they are now (committed or not, untracked ones included, ignored
# ones not) are copied to /root/tf_reverb inside it. Then, inside, COMMAND
# runs (default: the checks below) and the exit status is COMMAND's:
#
#   the README's set-up (scripts/setup.sh: apt, .venv, the Bazel build and its
#   post-install check), the C++ tests (bazel test //...), and a pytest subset
#   that imports the package and runs a server round trip, the insert and
#   sample ops in a tf.function, the datasets and the server binary.
#
# Needs root (or sudo) to debootstrap, mount and chroot; where that is not
# possible it exits 3 and says why (scripts/run_tests.sh reports it as a
# skip). Mounts live in a private mount namespace (unshare), so they vanish
# with the run; processes left in the chroot (Bazel's server) are killed by
# pid at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SUITE=trixie
FRESH=0
COMMAND=()
while (($#)); do
  case "$1" in
    --suite) SUITE=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --) shift; COMMAND=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "debian_chroot.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$SUITE" in
  bookworm|trixie) ;;
  *) echo "debian_chroot.sh: --suite must be bookworm (Debian 12) or trixie (Debian 13), not $SUITE" >&2; exit 2 ;;
esac

log() { echo "[chroot $SUITE] $*" >&2; }

# The pytest subset run inside (a few minutes): import, round trip, ops in
# tf.function, datasets, the server binary.
PYTEST_SUBSET=(
  tests/test_import_isolation.py
  tests/test_server_client.py
  tests/test_tf_client.py
  tests/test_datasets.py
  tests/test_server_binary.py
)
if ((${#COMMAND[@]} == 0)); then
  COMMAND=(bash -c "bash scripts/setup.sh &&
    echo '=== C++ tests on Debian $SUITE (bazel test //...) ===' &&
    bazel test -c opt //... 2>&1 | tail -n 25 && test \${PIPESTATUS[0]} -eq 0 &&
    echo '=== pytest subset on Debian $SUITE ===' &&
    .venv/bin/python -m pytest -q -rs -p no:cacheprovider --disable-warnings ${PYTEST_SUBSET[*]}")
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! sudo -n true 2>/dev/null; then
    echo "a Debian $SUITE chroot needs root or password-less sudo (debootstrap, mount, chroot); this user has neither" >&2
    exit 3
  fi
  SUDO="sudo -n"
fi
if ! $SUDO unshare --mount --propagation private true 2>/dev/null; then
  echo "a Debian $SUITE chroot needs a private mount namespace (unshare --mount), which this machine refuses" >&2
  exit 3
fi

if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
  log "installing debootstrap"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
fi

CACHE=${TF_REVERB_CHROOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tf_reverb/chroots}
CHROOT=$CACHE/$SUITE
MIRROR=${TF_REVERB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
$SUDO mkdir -p "$CACHE"
# One run per chroot at a time (a second would check out over the first's tree).
exec 9>>"$CACHE/$SUITE.lock"
if ! flock -n 9; then
  log "waiting for another run in this chroot to finish"
  flock 9
fi

# Processes whose root is the chroot (Bazel's server, a stray test server).
kill_chroot_processes() {
  local pid root
  for pid in /proc/[0-9]*; do
    root=$($SUDO readlink "$pid/root" 2>/dev/null) || continue
    [ "$root" = "$CHROOT" ] && $SUDO kill -9 "${pid#/proc/}" 2>/dev/null || true
  done
}

if ((FRESH)) || [ ! -f "$CHROOT/.tf_reverb_chroot_complete" ]; then
  kill_chroot_processes
  $SUDO rm -rf "$CHROOT" "$CHROOT.partial"
  log "debootstrap $SUITE from $MIRROR into $CHROOT (about a minute)"
  if ! $SUDO debootstrap --variant=minbase \
      --include=ca-certificates,git,python3,sudo "$SUITE" "$CHROOT.partial" \
      "$MIRROR" > "$CACHE/$SUITE-debootstrap.log" 2>&1; then
    tail -n 20 "$CACHE/$SUITE-debootstrap.log" >&2
    log "debootstrap FAILED (log: $CACHE/$SUITE-debootstrap.log)"
    exit 1
  fi
  $SUDO touch "$CHROOT.partial/.tf_reverb_chroot_complete"
  $SUDO mv "$CHROOT.partial" "$CHROOT"
fi

# A snapshot of the working tree as a commit (a scratch index, so the user's
# staging area is untouched), pushed into the chroot's copy and checked out
# there; ignored files inside (.venv, Bazel's symlinks, build outputs) stay.
SRC=/root/tf_reverb
index=$(mktemp)
trap 'rm -f "$index"' EXIT
GIT_INDEX_FILE=$index git read-tree HEAD
GIT_INDEX_FILE=$index git add -A
tree=$(GIT_INDEX_FILE=$index git write-tree)
snapshot=$(git commit-tree "$tree" -p HEAD -m "working tree for the $SUITE chroot")
if [ ! -d "$CHROOT$SRC/.git" ]; then
  $SUDO git init -q "$CHROOT$SRC"
fi
$SUDO git -C "$CHROOT$SRC" config core.sharedRepository false
git push -q --force "$CHROOT$SRC" "$snapshot:refs/tf_reverb/snapshot"
$SUDO git -C "$CHROOT$SRC" -c advice.detachedHead=false checkout -q --force --detach refs/tf_reverb/snapshot
$SUDO git -C "$CHROOT$SRC" clean -q -fd

# What every installed Debian has and debootstrap's minimal bookworm lacks:
# /etc/hosts naming localhost (without it "localhost:PORT" never resolves).
if [ ! -s "$CHROOT/etc/hosts" ]; then
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' |
    $SUDO tee "$CHROOT/etc/hosts" >/dev/null
fi
# The host's network settings are the chroot's: its resolver, the local CAs
# it trusts (a proxy's own CA, where one re-signs TLS) and its proxy variables.
$SUDO cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
$SUDO mkdir -p "$CHROOT/usr/local/share/ca-certificates"
$SUDO rm -f "$CHROOT/usr/local/share/ca-certificates/"host-*.crt
for ca in /usr/local/share/ca-certificates/*.crt; do
  [ -f "$ca" ] && $SUDO cp "$ca" "$CHROOT/usr/local/share/ca-certificates/host-$(basename "$ca")"
done
$SUDO chroot "$CHROOT" update-ca-certificates >/dev/null 2>&1 || true
PASSED_ENV=(PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
            PIP_CERT=/etc/ssl/certs/ca-certificates.crt
            REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
            SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!name:-}" ] && PASSED_ENV+=("$name=${!name}")
done
trap 'rm -f "$index"; kill_chroot_processes' EXIT
log "running in $CHROOT$SRC: ${COMMAND[*]:0:2}..."
status=0
# The caller's environment stays outside; inside is a login as root.
$SUDO unshare --mount --propagation private -- /bin/bash -c '
  set -e
  chroot_dir=$1; shift
  passed_env=("${@:2:$1}"); shift $(($1 + 1))
  mount -t proc proc "$chroot_dir/proc"
  mount --rbind /sys "$chroot_dir/sys"
  mount --rbind /dev "$chroot_dir/dev"
  exec chroot "$chroot_dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "${passed_env[@]}" \
    /bin/bash -c "cd '"$SRC"' && \"\$@\"" chroot-command "$@"
' unshare-mounts "$CHROOT" "${#PASSED_ENV[@]}" "${PASSED_ENV[@]}" "${COMMAND[@]}" || status=$?
# apt's downloaded packages are not needed again (the EXIT trap then stops
# what still runs inside: Bazel's server).
$SUDO rm -rf "$CHROOT/var/cache/apt/archives/"*.deb
log "exit status $status"
exit "$status"
