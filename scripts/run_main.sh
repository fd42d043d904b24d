#!/usr/bin/env bash
# The main job: set up, then run the server binary and a client round trip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/server_roundtrip.py "$@"
