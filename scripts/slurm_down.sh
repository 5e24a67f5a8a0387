#!/usr/bin/env bash
# Stops the test cluster scripts/slurm_up.sh started (its daemons, from their pid files under $SLURM_ROOT).
ROOT=${SLURM_ROOT:-/tmp/evalkit-slurm}
PIDS=("$ROOT"/slurmd-n1.pid "$ROOT"/slurmd-n2.pid "$ROOT"/slurmctld.pid "$ROOT"/slurmdbd.pid "$ROOT"/db/mariadbd.pid
      "$ROOT"/munge/munged.pid)
for pid in "${PIDS[@]}"; do [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null; done
sleep 2
for pid in "${PIDS[@]}"; do [ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null; rm -f "$pid"; done
exit 0
