"""The CPUs a job's ranks run on: how many this process may use (a SLURM job's or a container's share), the
intra-op threads each rank gets, and the cores a timed rank is pinned to. Imports no torch: the controller decides
them before a worker starts, and a probe's caliber names them."""
from __future__ import annotations

import os

from omegaconf import DictConfig

from evalkit import names


def usable_cpus() -> int:
    """The CPUs this process may run on: a SLURM job's or a container's share (its affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_threads(local_ranks: int) -> int:
    """`hardware.threads=0`: the usable CPUs shared by this node's ranks and by the jobs a sweep's launcher runs
    beside this one (joblib's n_jobs), as torchrun shares them between its ranks."""
    side_by_side = max(1, int(os.environ.get(names.SIDE_BY_SIDE_ENV) or 1))
    return max(1, usable_cpus() // (max(1, local_ranks) * side_by_side))


def worker_threads(cfg: DictConfig) -> int:
    """The intra-op threads of each worker: `hardware.threads`, or (0) the usable cores shared by the ranks it
    runs (this node's, with several) and by the jobs its sweep runs beside it (`default_threads`). Every
    arm of a comparison runs with this number, fixed before any wrapper is imported."""
    local = max(1, cfg.distributed.world_size // max(1, cfg.distributed.get("nnodes", 1)))
    return cfg.hardware.threads or default_threads(local)


def pinned_cpus(world_size: int, threads: int) -> list[list[int]] | None:
    """For timed jobs: the CPUs each rank is pinned to, `threads` each, taken from the end of the CPUs this
    process may use, so that the first stays with the controller and the system; None when there are not enough
    (then nothing is pinned). The same CPUs for every job: every arm is timed on the same cores."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    needed = world_size * threads
    if not allowed or needed > len(allowed) or (world_size == 1 and needed == len(allowed)):
        return None      # one rank on every CPU: pinning would change nothing
    chosen = allowed[len(allowed) - needed:]
    return [chosen[r * threads:(r + 1) * threads] for r in range(world_size)]
