#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 or 13: system packages, a virtualenv
# with the Python requirements, and the Bazel build of the native parts. Quick
# when everything is already in place. The same package names serve both.
#
#   bash scripts/setup.sh          what both README commands need
#   bash scripts/setup.sh --docs   also Debian's chromium, for the browser
#                                  test of the documentation site (the test
#                                  command passes it)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DOCS_BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --docs) DOCS_BROWSER=1 ;;
    *) echo "setup.sh: unknown argument $arg (--docs is the only one)" >&2; exit 2 ;;
  esac
done

log() { echo "[setup] $*" >&2; }

APT_PACKAGES=(
  bazel-bootstrap libgrpc++-dev protobuf-compiler-grpc protobuf-compiler
  libprotobuf-dev libsnappy-dev libzstd-dev zlib1g-dev libgtest-dev libgmock-dev
  libabsl-dev pkg-config g++ python3-venv python3-dev openssl
  prometheus-cpp-dev prometheus iproute2
)
[ "$DOCS_BROWSER" -eq 1 ] && APT_PACKAGES+=(chromium)
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

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $($PYTHON --version)"
  $PYTHON -m venv .venv
fi
VENV_PY=$ROOT/.venv/bin/python

STAMP=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  log "installing Python requirements"
  "$VENV_PY" -m pip install -q --upgrade pip
  "$VENV_PY" -m pip install -q -r requirements.txt
  echo "$want" > "$STAMP"
fi

# Test-only extras, each installed when its pinned version is missing: Ray
# for tf_reverb.ray and tests/test_ray_cluster.py (the optional extra
# tf_reverb[ray]; a release with wheels for Python 3.11 and 3.13),
# kubernetes-validate for tests/test_kubernetes_manifests.py, the
# documentation site's tools (scripts/build_docs.sh: MkDocs, its Material
# theme, mkdocstrings) and the linters the test command runs (ruff,
# clang-format; pinned, since their verdicts change between releases).
# JAX (CPU) for tf_reverb.jax and its tests (the extra tf_reverb[jax]), and
# PyTorch for tf_reverb.torch (tf_reverb[torch]) on Python 3.11 only: there
# pip takes torch 2.13.0's CPU build from local disk, elsewhere it would
# download a multi-GB CUDA build, so Python 3.13 goes without it and the
# PyTorch tests skip there, saying why.
PINNED=(ray==2.50.1 kubernetes-validate==1.37.0 mkdocs==1.6.1
  mkdocs-material==9.8.2 mkdocstrings==1.0.8 mkdocstrings-python==2.0.11
  ruff==0.17.6 clang-format==23.1.5 jax==0.10.2 jaxlib==0.10.2)
if "$VENV_PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  PINNED+=(torch==2.13.0)
fi
for pinned in "${PINNED[@]}"; do
  name=${pinned%%==*}
  # Without the local version label: torch's CPU build is 2.13.0+cpu.
  have=$("$VENV_PY" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)
  if [ "${have%%+*}" != "${pinned##*==}" ]; then
    log "installing $pinned"
    "$VENV_PY" -m pip install -q "$pinned"
  fi
done

export PYTHON_BIN_PATH=$VENV_PY
# The native build runs here first, outside pip: setuptools' editable install
# reports a failing build command as a warning and carries on, so a broken
# build would otherwise end in "ready". build_native streams Bazel's output,
# keeps it in build/native_build.log and, when the build fails, ends with the
# failing targets and the first compiler errors; set-up stops there.
log "building native parts (Bazel; the first build takes about 10 minutes)"
if ! "$VENV_PY" -c '
import sys, setup
try:
  setup.build_native()
  setup.generate_protos()
except setup.NativeBuildError:
  sys.exit(1)  # its summary is already printed, below Bazel output
'; then
  log "FAILED: the native build did not complete (see above; Bazel's whole output: build/native_build.log)"
  exit 1
fi
# The editable install also puts the `import reverb` start-up hook
# (tf_reverb_as_reverb.pth) into site-packages; reinstall where it is missing.
SITE_PACKAGES=$("$VENV_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$VENV_PY" -m pip show -q tf_reverb >/dev/null 2>&1 ||
   [ ! -f "$SITE_PACKAGES/tf_reverb_as_reverb.pth" ]; then
  log "installing tf_reverb (editable)"
  "$VENV_PY" -m pip install -q --no-build-isolation --no-deps -e .
fi
# Never "ready" without a core that imports, a server binary that runs and
# kernels that load into the installed TensorFlow.
if ! "$VENV_PY" scripts/check_install.py >&2; then
  log "FAILED: the installed tf_reverb is incomplete (see above)"
  exit 1
fi
log "ready: $VENV_PY"
