#!/usr/bin/env bash
# Sets up, then runs every test. Extra arguments go to `meson test`
# (e.g. a suite name: scripts/test.sh simulation).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec meson test -C build --print-errorlogs "$@"
