#!/usr/bin/env bash
# A one-host SLURM cluster of two nodes for the tests (issue 47): munged, MariaDB and slurmdbd (accounting: sacct,
# which submitit asks for a job's state), slurmctld and two slurmd (n1, n2) on 127.0.0.1, every file under
# $SLURM_ROOT (default /tmp/evalkit-slurm). Needs Debian's slurm-wlm, slurmdbd, mariadb-server and munge
# (`apt-get install -y slurm-wlm slurmdbd mariadb-server munge`, as root), and the node names n1 and n2 resolving to
# 127.0.0.1 (added to /etc/hosts when root and missing). Prints the SLURM_CONF to export; scripts/slurm_down.sh stops
# it.
set -euo pipefail
ROOT=${SLURM_ROOT:-/tmp/evalkit-slurm}
CPUS=${SLURM_NODE_CPUS:-1}
for cmd in munged slurmctld slurmd slurmdbd sinfo sacctmgr mariadbd mariadb-install-db; do
  command -v "$cmd" >/dev/null || {
    echo "slurm_up: $cmd not found: apt-get install -y slurm-wlm slurmdbd mariadb-server munge" >&2; exit 3; }
done
for node in n1 n2; do
  getent hosts "$node" >/dev/null || { [ "$(id -u)" = 0 ] && echo "127.0.0.1 $node" >> /etc/hosts; } || {
    echo "slurm_up: node name $node does not resolve: add '127.0.0.1 n1 n2' to /etc/hosts" >&2; exit 3; }
done
mkdir -p "$ROOT"/{state,log,spool/n1,spool/n2,munge,db}
chmod 700 "$ROOT/munge"
[ -s "$ROOT/munge/munge.key" ] || { dd if=/dev/urandom bs=1 count=1024 of="$ROOT/munge/munge.key" 2>/dev/null; chmod 400 "$ROOT/munge/munge.key"; }
USER_NAME=$(id -un)
cat > "$ROOT/slurm.conf" <<CONF
ClusterName=evalkit
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=16818
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
AuthType=auth/munge
AuthInfo=socket=$ROOT/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool/%n
SlurmctldPidFile=$ROOT/slurmctld.pid
SlurmdPidFile=$ROOT/slurmd-%n.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/filetxt
JobCompLoc=$ROOT/log/jobcomp.txt
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=16819
AccountingStoragePass=$ROOT/munge/munge.socket
JobAcctGatherType=jobacct_gather/none
KillWait=30
MinJobAge=300
SlurmdTimeout=30
InactiveLimit=0
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16821 CPUs=$CPUS RealMemory=${SLURM_NODE_MEM_MB:-4000} State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16822 CPUs=$CPUS RealMemory=${SLURM_NODE_MEM_MB:-4000} State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > "$ROOT/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$ROOT/munge/munge.socket
DbdHost=localhost
DbdPort=16819
SlurmUser=$USER_NAME
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=16806
StorageUser=root
StorageLoc=slurm_acct_db
PidFile=$ROOT/slurmdbd.pid
LogFile=$ROOT/log/slurmdbd.log
CONF
chmod 600 "$ROOT/slurmdbd.conf"
export SLURM_CONF=$ROOT/slurm.conf
munged --key-file="$ROOT/munge/munge.key" --socket="$ROOT/munge/munge.socket" --pid-file="$ROOT/munge/munged.pid" \
  --log-file="$ROOT/munge/munged.log" --seed-file="$ROOT/munge/munged.seed" --force
[ -d "$ROOT/db/mysql" ] || mariadb-install-db --datadir="$ROOT/db" --user="$USER_NAME" --auth-root-authentication-method=normal \
  --skip-test-db >"$ROOT/log/mariadb-install.log" 2>&1
mariadbd --datadir="$ROOT/db" --socket="$ROOT/db/mysql.sock" --port=16806 --bind-address=127.0.0.1 --user="$USER_NAME" \
  --pid-file="$ROOT/db/mariadbd.pid" --log-error="$ROOT/log/mariadb.log" --skip-grant-tables >/dev/null 2>&1 &
for _ in $(seq 30); do [ -S "$ROOT/db/mysql.sock" ] && break; sleep 1; done
SLURM_CONF=$ROOT/slurm.conf slurmdbd     # reads slurmdbd.conf beside SLURM_CONF
for _ in $(seq 30); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
sacctmgr -i add cluster evalkit >/dev/null 2>&1 || true
slurmctld -i
slurmd -N n1
slurmd -N n2
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle && [ "$(sinfo -h -N -o '%T' | grep -c idle)" = 2 ]; then
    echo "export SLURM_CONF=$SLURM_CONF"; exit 0
  fi
  sleep 1
done
echo "slurm_up: the nodes did not come up: see $ROOT/log" >&2; sinfo -N >&2 || true; exit 1
