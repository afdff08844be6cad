#!/usr/bin/env bash
# A single-node Slurm on this machine, for the tests of `tessel run --slurm`
# (scripts/test.sh starts it before the tests and stops it after them).
#   scripts/slurm-local.sh start   wipe its state, start munge, slurmctld and slurmd; wait for the node
#   scripts/slurm-local.sh stop    stop the daemons it started, each by its pid
#   scripts/slurm-local.sh env     print the `export SLURM_CONF=...` that its clients need
# Needs root (slurmd runs jobs as their users) and the Debian packages
# slurm-wlm, slurmctld, slurmd, slurm-client and munge. Everything it writes
# is under $TESSEL_SLURM_DIR (default /tmp/tessel-slurm).
set -euo pipefail

dir=${TESSEL_SLURM_DIR:-/tmp/tessel-slurm}
conf=$dir/slurm.conf

fail() { echo "slurm-local: $*" >&2; exit 1; }

write_config() {
  local host
  host=$(hostname -s)
  # Four GPUs as character devices, so that gres/gpu has files to hand out.
  mkdir -p "$dir/dev"
  for i in 0 1 2 3; do ln -sf /dev/null "$dir/dev/gpu$i"; done
  cat >"$conf" <<CONF
ClusterName=tessel
SlurmctldHost=$host
SlurmUser=slurm
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
MinJobAge=3600
# Start the next task at once, not 2-3 s later: the tests run many tiny tasks.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=200000
GresTypes=gpu
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host CPUs=$(nproc) RealMemory=1000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  cat >"$dir/gres.conf" <<CONF
AutoDetect=off
NodeName=$host Name=gpu File=$dir/dev/gpu[0-3]
CONF
}

start() {
  [ "$(id -u)" -eq 0 ] || fail "needs root (slurmd runs the jobs as their users)"
  for program in munged slurmctld slurmd sinfo; do
    command -v "$program" >/dev/null || [ -x "/usr/sbin/$program" ] ||
      fail "$program is missing: apt-get install slurm-wlm slurmctld slurmd slurm-client munge"
  done
  stop quietly
  rm -rf "$dir"  # a drained node stays drained in the saved state
  mkdir -p "$dir/state" "$dir/spool"
  write_config
  chown -R slurm: "$dir"

  if [ ! -f /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge: /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge
  chown munge: /run/munge
  # A munged running already is someone else's: used, never stopped.
  if ! pgrep -u munge -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
    cp /run/munge/munged.pid "$dir/munged.pid"
  fi

  export SLURM_CONF=$conf
  /usr/sbin/slurmctld -f "$conf" || fail "slurmctld did not start; see $dir/slurmctld.log"
  /usr/sbin/slurmd -f "$conf" || fail "slurmd did not start; see $dir/slurmd.log"
  local state=""
  for _ in $(seq 1 150); do  # 30 s
    state=$(sinfo -h -o %T 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    sleep 0.2
  done
  fail "the node is '${state:-unreachable}', not idle, after 30 s; see $dir/slurmctld.log and $dir/slurmd.log"
}

stop() {
  # Every pid first: a daemon deletes its pid file as it goes.
  local pids=() file pid
  # A pid file a crash left behind may name a pid reused since: only a
  # process of that daemon's name is signalled.
  for file in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -f "$file" ] && pid=$(cat "$file") && [ -n "$pid" ] &&
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "$file" .pid)" ] && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do  # 10 s each
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  [ "${1:-}" = quietly ] || echo "slurm-local: stopped" >&2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
