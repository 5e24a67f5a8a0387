"""`srun evalkit ...` inside a SLURM allocation: one evalkit per node, its node settings read from SLURM's variables.

Under `srun --nodes=N --ntasks-per-node=1` (N > 1) every node's evalkit gets:
- `distributed.nnodes` = SLURM_STEP_NUM_NODES;
- `distributed.node_rank` = SLURM_PROCID (the task's rank in the step: one task per node);
- `distributed.master_addr` = the first host of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), where rank 0 runs;
- `distributed.master_port` = a port derived from SLURM_JOB_ID and SLURM_STEP_ID (PORT_BASE + the pair modulo
  PORT_SPAN), the same on every node;
- `distributed.shared_dir` = `<distributed.shared_root>/slurm-<job id>.<step id>`, one folder per step on the
  filesystem every node sees.
A setting given on the command line wins over SLURM's. Outside srun, or on one node, nothing changes, and the flags
torchrun users know still work by hand. Several tasks per node are refused: evalkit starts a node's ranks itself.
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping

PORT_BASE, PORT_SPAN = 20000, 10000     # below Linux's ephemeral ports (32768 and up)


class SrunLayoutError(ValueError):
    """srun started several evalkit processes on one node."""


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list: `gpu[03-05,9],cpu1` -> `gpu03`, `a,b` -> `a`, `n1` -> `n1`."""
    depth, first = 0, ""
    for char in nodelist.strip():
        if char == "," and depth == 0:
            break
        depth += {"[": 1, "]": -1}.get(char, 0)
        first += char
    return re.sub(r"\[([^\],\-]+)[^\]]*\]", r"\1", first)


def port_for(job_id: str, step_id: str) -> int:
    return PORT_BASE + (int(job_id) * 31 + int(step_id or 0)) % PORT_SPAN


def srun_settings(env: Mapping[str, str], shared_root: str | None, given: set[str]) -> dict[str, Any]:
    """The `distributed.*` settings SLURM's variables give this process (keys without the prefix), leaving out
    those in `given` (set on the command line); {} outside a multi-node srun step."""
    nodes = int(env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or 1)
    if "SLURM_PROCID" not in env or "SLURM_JOB_ID" not in env or nodes < 2:
        return {}
    tasks = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or nodes)
    if tasks != nodes:
        raise SrunLayoutError(
            f"srun started {tasks} evalkit processes on {nodes} nodes: evalkit starts each node's ranks itself, so it "
            "runs once per node: srun --nodes=N --ntasks-per-node=1 evalkit ... distributed.world_size=<all ranks>")
    job, step = env["SLURM_JOB_ID"], env.get("SLURM_STEP_ID", "0")
    found: dict[str, Any] = {
        "nnodes": nodes, "node_rank": int(env["SLURM_PROCID"]),
        "master_addr": first_host(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"),
        "master_port": port_for(job, step)}
    if shared_root:
        found["shared_dir"] = os.path.join(shared_root, f"slurm-{job}.{step}")
    return {k: v for k, v in found.items() if f"distributed.{k}" not in given}
