#!/usr/bin/env bash
# Sets tessel up on Debian 12: installs the packages it needs (only those
# missing, with sudo unless run as root), then configures and builds it in
# ./build. Safe to run again; it then only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ meson ninja-build pkg-config
  libboost-dev libssl-dev libtomlplusplus-dev libcli11-dev doctest-dev libsqlite3-dev nlohmann-json3-dev libglpk-dev
  gnuplot-nox
  slurm-wlm slurmctld slurmd slurm-client munge
  pybind11-dev python3-dev python3-venv python3-mesonpy python3-pandas python3-matplotlib python3-pytest
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} > 0)); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Quiet when all goes well; the whole output when something breaks.
run_quietly() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "setup: failed: $*" >&2
    exit 1
  fi
  rm -f "$log"
}
if [ ! -f build/build.ninja ]; then
  run_quietly meson setup build
fi
run_quietly ninja -C build
