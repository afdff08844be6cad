#!/usr/bin/env bash
# Sets up, then runs every test. Extra arguments go to `meson test`
# (e.g. a suite name: scripts/test.sh simulation).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# A single-node Slurm for the tests of `tessel run --slurm`, stopped however
# the tests end; with TESSEL_REQUIRE_SLURM=1 they fail rather than skip.
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
trap '$sudo scripts/slurm-local.sh stop' EXIT
$sudo scripts/slurm-local.sh start
eval "$(scripts/slurm-local.sh env)"
export TESSEL_REQUIRE_SLURM=1

meson test -C build --print-errorlogs "$@"
