#!/usr/bin/env bash
# The main job on the embedded default: sets up, then simulates
# experiments/quickstart.toml, stores it in results/quickstart.db and prints
# the report. Extra arguments go to `tessel run` (e.g. --set workload.seed=2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/runners/cli/tessel run experiments/quickstart.toml "$@"
