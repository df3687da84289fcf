#!/usr/bin/env bash
# Stops the cluster scripts/slurm/up.sh started (by its PID files, never by process name) and
# deletes its directory. Safe to run when no cluster is up.
dir=${MECHLAB_SLURM_DIR:-/tmp/mechlab-slurm}
export SLURM_CONF=$dir/slurm.conf

# PID 1 here reaps orphans late, and kill -0 succeeds on a zombie: look at the state instead.
exited() { local state; state=$(ps -o stat= -p "$1" 2>/dev/null) || return 0; [[ $state == Z* ]]; }
stop_pidfile() {
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do exited "$pid" && return 0; sleep 0.1; done
  echo "slurm down: $1 ($pid) ignored SIGTERM for 10 s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

# Jobs first, so that no slurmstepd outlives slurmd.
if [ -f "$dir/slurmctld.pid" ] && [ -f "$SLURM_CONF" ]; then
  scancel --partition=debug 2>/dev/null || true
  for _ in $(seq 100); do
    [ -z "$(squeue -h 2>/dev/null)" ] && break
    sleep 0.1
  done
fi
stop_pidfile "$dir/slurmd.pid"
stop_pidfile "$dir/slurmctld.pid"
stop_pidfile "$dir/munge/munged.pid"

# Last resort (slurmd died with jobs running): processes holding files of this cluster open are
# its orphaned steps; slurmstepd ignores SIGTERM, so they and their children get SIGKILL.
descendants() { echo "$1"; local child; for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do descendants "$child"; done; }
for fd in /proc/[0-9]*/fd/*; do
  target=$(readlink "$fd" 2>/dev/null) || continue
  case $target in "$dir"/*) pid=${fd#/proc/}; echo "${pid%%/*}" ;; esac
done 2>/dev/null | sort -u | while read -r pid; do
  { [ "$pid" = $$ ] || exited "$pid"; } && continue
  for p in $(descendants "$pid"); do
    echo "slurm down: killing stray process $p ($(ps -o args= -p "$p"))" >&2
    kill -KILL "$p" 2>/dev/null
  done
done
rm -rf "$dir"
