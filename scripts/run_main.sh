#!/usr/bin/env bash
# The main job: set up, then a distributed DQN actor-learner run on CartPole
# over the reverb_server binary (examples/dqn_cartpole.py; arguments pass
# through, e.g. --quick or --resume). --ray [--shards N]: the distributed mode,
# actors and learner as Ray actors over a tf_reverb.ray.ReplayCluster of N
# servers (default 2). --framework torch|jax: PyTorch or JAX agents, no
# TensorFlow imported (default: tensorflow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/dqn_cartpole.py "$@"
