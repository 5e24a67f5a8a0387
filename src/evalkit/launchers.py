"""How a wrapper's documentation starts its processes, and the environment each rank gets from it.

A wrapper reads its launcher's variables to decide what it is: Accelerate and the transformers Trainer wrap one
process in DDP when they see torch elastic variables, Lightning spawns its own ranks unless it sees `LOCAL_RANK`,
Accelerate joins MPI ranks on CPU. So evalkit starts each rank with exactly the variables the documented launcher
gives it, and none of any other launcher (inherited ones are removed). Each trainer's YAML names its launchers
(`trainer.launch`: one rank, several ranks, several ranks on CUDA); a run records the launcher's name (tag
`evalkit.launch`) and every rank's variables (`evalkit/launch_rank<r>.json`).

Pure: no torch, no wrapper; the tests compare each launcher with the code of the real one (torchrun run for real,
Accelerate's and Lightning's launch functions imported).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

# evalkit's own view of a rank, whatever the launcher says (a wrapper may rewrite RANK & co. in its process)
RANK_ENV = "EVALKIT_RANK"
LOCAL_RANK_ENV = "EVALKIT_LOCAL_RANK"
WORLD_SIZE_ENV = "EVALKIT_WORLD_SIZE"
LAUNCH_ENV = "EVALKIT_LAUNCH"


@dataclass(frozen=True)
class Slot:
    """One rank's place in the job, as a launcher sees it."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    nnodes: int
    master_addr: str
    master_port: int
    run_id: str
    cuda: bool
    error_file: str = ""      # torchrun: where torch's @record writes a rank's error (TORCHELASTIC_ERROR_FILE)


@dataclass(frozen=True)
class Launcher:
    name: str
    command: str             # what the documentation types, {n}: the ranks
    ranks: str               # "one" (one process only) | "any"
    variables: Callable[[Slot], dict[str, str]]
    departure: str = ""      # where evalkit's start differs from the launcher's, and why


def _torchrun(s: Slot) -> dict[str, str]:
    """torch 2.13's LocalElasticAgent._start_workers and torch.distributed.run, as `torchrun` sets them."""
    return {
        "RANK": str(s.rank), "GROUP_RANK": str(s.node_rank), "ROLE_RANK": str(s.rank), "ROLE_NAME": "default",
        "LOCAL_WORLD_SIZE": str(s.local_world_size), "WORLD_SIZE": str(s.world_size),
        "GROUP_WORLD_SIZE": str(s.nnodes), "ROLE_WORLD_SIZE": str(s.world_size),
        "MASTER_ADDR": s.master_addr, "MASTER_PORT": str(s.master_port),
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": s.run_id,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "LOCAL_RANK": str(s.local_rank), "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        **({"TORCHELASTIC_ERROR_FILE": s.error_file} if s.error_file else {}),
    }


def _lightning(s: Slot) -> dict[str, str]:
    """Lightning 2.6's `_SubprocessScriptLauncher._call_children_scripts` (`Trainer(devices=N)` or
    `Fabric(devices=N)` + `fabric.launch()` under `python train.py`): what every rank's environment holds once the
    launcher has run, rank 0's included."""
    return {"MASTER_ADDR": s.master_addr, "MASTER_PORT": str(s.master_port), "NODE_RANK": str(s.node_rank),
            "LOCAL_RANK": str(s.local_rank), "WORLD_SIZE": str(s.world_size)}


def _mpi(s: Slot) -> dict[str, str]:
    """Intel MPI's `mpirun` (Hydra): the rank variables Accelerate's `get_cpu_distributed_information` reads."""
    return {"PMI_RANK": str(s.rank), "PMI_SIZE": str(s.world_size), "MPI_LOCALRANKID": str(s.local_rank),
            "MPI_LOCALNRANKS": str(s.local_world_size)}


def _mpirun(s: Slot) -> dict[str, str]:
    """transformers' CPU page: `export MASTER_ADDR=...`, then `mpirun -n N ... python train.py --use_cpu`."""
    return {**_mpi(s), "MASTER_ADDR": s.master_addr, "MASTER_PORT": str(s.master_port)}


def _accelerate_common(s: Slot) -> dict[str, str]:
    """What Accelerate 1.16's launchers (`prepare_simple_launcher_cmd_env`, `prepare_multi_gpu_env`) set for a
    default config: no mixed precision, no dynamo (a script's own Accelerator arguments win over them)."""
    return {"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_DYNAMO_BACKEND": "NO",
            "ACCELERATE_DYNAMO_MODE": "default", "ACCELERATE_DYNAMO_USE_FULLGRAPH": "False",
            "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": "False"}


def _accelerate(s: Slot) -> dict[str, str]:
    """`accelerate launch` with the config `accelerate config` writes for the machine: on CUDA with several ranks
    `--multi_gpu` (torchrun underneath, `prepare_multi_gpu_env`); on CPU the simple launcher with `--cpu`
    (`prepare_simple_launcher_cmd_env`), under the MULTI_CPU config's `mpirun` when there are several ranks."""
    if s.cuda and s.world_size > 1:
        return {**_torchrun(s), **_accelerate_common(s)}
    env = {**_accelerate_common(s), "ACCELERATE_USE_CPU": str(not s.cuda)}
    if not s.cuda:
        env.update({"KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "1"})
    if s.world_size > 1:
        env.update({**_mpi(s), "MASTER_ADDR": s.master_addr, "MASTER_PORT": str(s.master_port)})
    return env


LAUNCHERS: dict[str, Launcher] = {launcher.name: launcher for launcher in (
    Launcher("python", "python train.py", "one", lambda s: {}),
    Launcher("torchrun", "torchrun --nproc_per_node {n} train.py", "any", _torchrun,
             departure="the ranks are evalkit's processes, started without torchrun's agent (evalkit watches them): "
                       "no TORCHELASTIC_USE_AGENT_STORE (rank 0 hosts the rendezvous store the agent would), "
                       "TORCHELASTIC_RUN_ID the job's id"),
    Launcher("lightning", "python train.py  # Trainer(devices={n}) / Fabric(devices={n}).launch(): Lightning starts "
             "the other ranks", "any", _lightning,
             departure="evalkit starts every rank itself, rank 0 with the variables Lightning's launcher sets in it, "
                       "so Lightning joins them and spawns nothing (evalkit owns each rank's hooks, records and "
                       "exit)"),
    Launcher("mpirun", "mpirun -n {n} python train.py  # MASTER_ADDR exported, as the transformers CPU page",
             "any", _mpirun,
             departure="Intel MPI's rank variables without MPI itself; MASTER_PORT a free port (the page leaves "
                       "Accelerate's 29500: evalkit's jobs run side by side)"),
    Launcher("accelerate", "accelerate launch [--cpu] [--num_processes {n}] train.py", "any", _accelerate,
             departure="several ranks on CPU: Intel MPI's rank variables without MPI itself; MASTER_PORT a free "
                       "port; OMP_NUM_THREADS evalkit's (every arm the same threads)"),
)}

# Every variable any launcher sets: removed from a rank's inherited environment before its own launcher's are set.
ALL_VARIABLES = frozenset(
    set(_torchrun(Slot(0, 0, 2, 2, 0, 1, "", 0, "", False, error_file="-")))
    | set(_lightning(Slot(0, 0, 2, 2, 0, 1, "", 0, "", False)))
    | set(_accelerate(Slot(0, 0, 2, 2, 0, 1, "", 0, "", False)))
    | {"TORCHELASTIC_USE_AGENT_STORE",   # torchrun's, not evalkit's (no agent), removed all the same
       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
       "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"})


# A scheduler's task variables: a rank evalkit starts inside a SLURM job is not one of SLURM's tasks (the evalkit
# controller is), yet wrappers read them as theirs: Lightning's SLURMEnvironment (from SLURM_NTASKS) makes every
# rank global rank 0, Ignite (from SLURM_JOB_ID) takes SLURM_PROCID and SLURM_LOCALID for RANK and LOCAL_RANK.
# Removed from every rank, as a launcher's are, so a wrapper sees the launch its documentation describes; the ranks
# run inside the job's allocation all the same (its CPUs, memory and GPUs are the process's, not variables).
SCHEDULER_PREFIXES = ("SLURM_", "PMI_", "PMIX_")


def inherited_launch(name: str) -> bool:
    """Whether an inherited variable belongs to a launcher or a scheduler, and so never reaches a rank as is."""
    return name in ALL_VARIABLES or name.startswith(SCHEDULER_PREFIXES)


def names() -> list[str]:
    return sorted(LAUNCHERS)


def chosen(launch: dict | None, world_size: int, cuda: bool) -> str:
    """The launcher's name a trainer's `launch` names for this many ranks on this device (None: a trainer that
    names none, plain `python` at one rank and torchrun at several)."""
    launch = launch or {}
    if world_size <= 1:
        return launch.get("one") or "python"
    if cuda and launch.get("many_cuda"):
        return launch["many_cuda"]
    return launch.get("many") or "torchrun"


def problem(launch: dict, world_size: int) -> str | None:
    """Why this launch cannot start these ranks (an unknown name; one process only, at several ranks), or None."""
    for key in ("one", "many", "many_cuda"):
        name = launch.get(key)
        if name and name not in LAUNCHERS:
            return f"trainer.launch.{key}={name!r} is not a launcher; choose one of {', '.join(names())}"
    if world_size <= 1:
        return None
    for key in ("many", "many_cuda"):
        name = launch.get(key)
        if name and LAUNCHERS[name].ranks == "one":
            several = ", ".join(n for n in names() if LAUNCHERS[n].ranks != "one")
            return (f"trainer.launch.{key}={name!r} starts one process, and distributed.world_size={world_size}: set "
                    f"trainer.launch.{key} to the launcher the wrapper's documentation uses for several processes "
                    f"({several})")
    return None


def rank_environment(base: dict[str, str], launcher: str, slot: Slot) -> dict[str, str]:
    """`base` without any launcher's or scheduler's variables, plus `launcher`'s for `slot` and evalkit's own view
    of the rank."""
    env = {k: v for k, v in base.items() if not inherited_launch(k)}
    env.update(LAUNCHERS[launcher].variables(slot))
    env.update({RANK_ENV: str(slot.rank), LOCAL_RANK_ENV: str(slot.local_rank),
                WORLD_SIZE_ENV: str(slot.world_size), LAUNCH_ENV: launcher})
    return env


def received(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The launcher variables this process holds (read by a worker at its start, before a wrapper rewrites any),
    a scheduler's included (none, as evalkit starts a rank: a record that shows one shows a leak)."""
    environ = os.environ if environ is None else environ
    keep = ALL_VARIABLES | {RANK_ENV, LOCAL_RANK_ENV, WORLD_SIZE_ENV, LAUNCH_ENV, "OMP_NUM_THREADS"}
    return {k: environ[k] for k in sorted(environ) if k in keep or k.startswith(SCHEDULER_PREFIXES)}


def rank_of(environ: dict[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, local rank, world size) as evalkit launched this process."""
    environ = os.environ if environ is None else environ
    return (int(environ.get(RANK_ENV, 0)), int(environ.get(LOCAL_RANK_ENV, 0)),
            int(environ.get(WORLD_SIZE_ENV, 1)))
