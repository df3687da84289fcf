#!/usr/bin/env bash
# A throw-away one-node SLURM cluster for tests, every file of it under one directory
# ($MECHLAB_SLURM_DIR, default /tmp/mechlab-slurm): a private munged, slurmctld and slurmd, started
# by hand (no systemd). Needs root and Debian's slurmctld slurmd slurm-client munge.
#   scripts/slurm/up.sh && export SLURM_CONF=${MECHLAB_SLURM_DIR:-/tmp/mechlab-slurm}/slurm.conf
# docs/slurm.md explains the configuration; scripts/slurm/down.sh stops it.
set -euo pipefail
dir=${MECHLAB_SLURM_DIR:-/tmp/mechlab-slurm}
ctld_port=${MECHLAB_SLURM_CTLD_PORT:-6817}
slurmd_port=${MECHLAB_SLURM_SLURMD_PORT:-6818}
fail() { echo "slurm up: $*" >&2; exit 1; }

for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo ss; do
  command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install slurmctld slurmd slurm-client munge)"
done
[ -e "$dir/slurmctld.pid" ] && fail "$dir holds a running cluster; stop it with scripts/slurm/down.sh"
for port in "$ctld_port" "$slurmd_port"; do
  # the daemons fork before binding: a port clash would only show in their logs
  [ -z "$(ss -Hltn "sport = :$port")" ] || fail "TCP port $port is taken (another cluster?)"
done
rm -rf "$dir"
mkdir -p "$dir"/{munge,state,spool,log}
chmod 0755 "$dir" "$dir/munge" # munged refuses directories others may write

# munge with its own key and socket (Debian's key belongs to the munge user, not root)
mungekey --create --keyfile="$dir/munge/munge.key"
chmod 0400 "$dir/munge/munge.key"
munged --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

# The node line is what slurmd detects: a claim above it would leave the node invalid.
hardware=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ *UpTime=.*//')
cat >"$dir/slurm.conf" <<CONF
ClusterName=mechlab
SlurmctldHost=localhost
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
NodeName=localhost $hardware State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N localhost

# Ready when the node is idle and a first job has run (the first scheduling pass comes ~3 s late).
for _ in $(seq 100); do
  [ "$(sinfo -h -N -o %T 2>/dev/null)" = idle ] && break
  sleep 0.1
done
if [ "$(sinfo -h -N -o %T 2>/dev/null)" != idle ]; then
  sinfo -N -o '%N %T %E' >&2 || true
  tail -n 5 "$dir"/log/*.log >&2 || true
  fail "the node did not become idle"
fi
probe=$(sbatch --parsable -o /dev/null --wrap true)
for _ in $(seq 300); do
  if [ -z "$(squeue -h -j "$probe" 2>/dev/null)" ]; then
    echo "slurm up: cluster ready in $dir (export SLURM_CONF=$SLURM_CONF)"
    exit 0
  fi
  sleep 0.1
done
fail "the probe job $probe did not finish within 30 s"
