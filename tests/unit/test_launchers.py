"""Each trainer's ranks get exactly the variables its documented launcher sets (issue 43), compared with the
launcher's own code where it can be imported: Accelerate's `prepare_simple_launcher_cmd_env`, Lightning's
`_SubprocessScriptLauncher`; torchrun is run for real in tests/smoke/test_launch_as_documented.py. And the wrappers
decide their process state from them as under the real launcher: no distributed wrap at one rank."""
from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
import yaml
from helpers import REPO
from omegaconf import OmegaConf

from evalkit import launchers
from evalkit.config import _launch_problems

TRAINERS = sorted(p.stem for p in (REPO / "src" / "evalkit" / "conf" / "trainer").glob("*.yaml"))
PORT = 29617


def launch_of(trainer: str) -> dict:
    return yaml.safe_load(Path(REPO / "src" / "evalkit" / "conf" / "trainer" / f"{trainer}.yaml").read_text())["launch"]


def slot(rank: int, world: int, cuda: bool = False) -> launchers.Slot:
    return launchers.Slot(rank, rank, world, world, 0, 1, "127.0.0.1", PORT, "job1", cuda)


def environment(trainer: str, rank: int, world: int, base: dict | None = None) -> dict[str, str]:
    name = launchers.chosen(launch_of(trainer), world, cuda=False)
    return launchers.rank_environment(base or {}, name, slot(rank, world))


def launcher_part(env: dict[str, str]) -> dict[str, str]:
    """What a launcher set: evalkit's own view of the rank left out."""
    return {k: v for k, v in env.items() if not k.startswith("EVALKIT_")}


@pytest.mark.parametrize("trainer", TRAINERS)
def test_every_trainer_names_its_documented_launchers_and_cites_the_page(trainer):
    launch = launch_of(trainer)
    assert launch["source"].startswith("https://"), f"{trainer}: the page that launches it"
    assert launchers.problem(launch, 2) is None
    assert launchers.LAUNCHERS[launch["one"]].name in ("python", "accelerate"), \
        f"{trainer}: one process is started by python or by the wrapper's own launcher, never torchrun"


@pytest.mark.parametrize("trainer", [t for t in TRAINERS if launch_of(t)["one"] == "python"])
def test_one_rank_under_python_gets_no_launcher_variable_even_when_inherited(trainer):
    inherited = {"PATH": "/bin", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "h",
                 "TORCHELASTIC_RUN_ID": "x", "PMI_SIZE": "4", "ACCELERATE_USE_CPU": "true", "NODE_RANK": "1"}
    env = environment(trainer, 0, 1, inherited)
    assert launcher_part(env) == {"PATH": "/bin"}
    assert launchers.rank_of(env) == (0, 0, 1)


@pytest.fixture
def no_accelerate_config(tmp_path, monkeypatch):
    """Accelerate's launcher reads a default config file under HF_HOME: none here, as on a fresh machine."""
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    for name in launchers.ALL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def accelerate_launch_env(argv: list[str]) -> dict[str, str]:
    """The variables `accelerate launch <argv> train.py` adds to the caller's environment (Accelerate's own code;
    its MULTI_CPU config's mpirun named as Intel MPI's, which is not installed here)."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as accelerate_launch

    args, _, _ = _validate_launch_command(launch_command_parser().parse_args([*argv, "train.py"]))
    with mock.patch.object(accelerate_launch, "_get_mpirun_args", return_value=("mpirun", "-f", "-n", "-ppn", "")):
        _, env = accelerate_launch.prepare_simple_launcher_cmd_env(args)
    return {k: v for k, v in env.items() if os.environ.get(k) != v}


@pytest.mark.parametrize("world", [1, 2])
def test_accelerate_ranks_get_what_accelerate_launch_sets(no_accelerate_config, world):
    argv = ["--cpu"] + (["--num_processes", "2", "--num_machines", "1", "--mpirun_hostfile", "hosts",
                         "--main_process_port", str(PORT)] if world > 1 else [])
    expected = accelerate_launch_env(argv)
    expected.pop("OMP_NUM_THREADS")            # evalkit's: every arm with the same threads (a declared departure)
    for rank in range(world):
        got = launcher_part(environment("accelerate", rank, world))
        mpi = {k: got.pop(k) for k in ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS") if k in got}
        assert got == expected
        assert mpi == ({"PMI_RANK": str(rank), "PMI_SIZE": "2", "MPI_LOCALRANKID": str(rank),
                        "MPI_LOCALNRANKS": "2"} if world > 1 else {})


class _Starts:
    """A stand-in for the subprocess module: records the environment of every process it is asked to start."""

    def __init__(self):
        self.envs: list[dict[str, str]] = []

    def __getattr__(self, name):
        return self._start

    def _start(self, command, env=None, cwd=None):
        self.envs.append(dict(env))
        return mock.Mock()


@pytest.mark.parametrize("trainer", ["lightning", "fabric"])
def test_lightning_ranks_get_what_lightnings_own_launcher_sets(trainer, monkeypatch):
    """`python train.py` with Trainer(devices=2) / Fabric(devices=2): Lightning's launcher sets MASTER_ADDR,
    MASTER_PORT, NODE_RANK, LOCAL_RANK and WORLD_SIZE in rank 0 and starts rank 1 with a copy."""
    pytest.importorskip("lightning")
    from lightning.fabric.plugins.environments import LightningEnvironment
    from lightning.fabric.strategies.launchers import subprocess_script

    for name in launchers.ALL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_PORT", str(PORT))
    before = dict(os.environ)
    starts = _Starts()
    monkeypatch.setattr(subprocess_script, "subprocess", starts)
    launcher = subprocess_script._SubprocessScriptLauncher(LightningEnvironment(), num_processes=2, num_nodes=1)
    launcher._call_children_scripts()
    rank0 = {k: v for k, v in os.environ.items() if before.get(k) != v or k == "MASTER_PORT"}
    rank1 = {k: v for k, v in starts.envs[0].items() if before.get(k) != v or k == "MASTER_PORT"}
    assert launcher_part(environment(trainer, 0, 2)) == rank0
    assert launcher_part(environment(trainer, 1, 2)) == rank1


def test_mpirun_ranks_are_read_by_accelerate_as_the_ranks_evalkit_started():
    """The Trainer's CPU page: Intel MPI's mpirun; Accelerate's state (the Trainer's) reads its variables."""
    pytest.importorskip("accelerate")
    from accelerate.utils.environment import get_cpu_distributed_information

    for rank in range(2):
        env = launcher_part(environment("hf_trainer", rank, 2))
        assert env["MASTER_ADDR"] == "127.0.0.1"
        with mock.patch.dict(os.environ, env, clear=True):
            info = get_cpu_distributed_information()
        assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (rank, 2, rank, 2)


@pytest.mark.parametrize("trainer,world,expected", [
    ("accelerate", 1, "NO"), ("hf_trainer", 1, "NO"),           # no one-process DDP (issue 43)
    ("accelerate", 2, "MULTI_CPU"), ("hf_trainer", 2, "MULTI_CPU")])
def test_accelerate_backed_wrappers_decide_their_process_state_as_under_the_documented_launch(trainer, world,
                                                                                               expected):
    """Accelerate's `PartialState._prepare_backend` (the Trainer's too, with use_cpu=True) under each rank's
    variables: one rank trains undistributed, two join as MULTI_CPU, for both wrappers alike."""
    pytest.importorskip("accelerate")
    from accelerate.state import PartialState

    cpu = trainer == "hf_trainer" or None      # Accelerator() in defaults reads ACCELERATE_USE_CPU from the launch
    with mock.patch.dict(os.environ, launcher_part(environment(trainer, 0, world)), clear=True):
        from accelerate.utils import parse_flag_from_env

        cpu = cpu or parse_flag_from_env("ACCELERATE_USE_CPU")
        _, kind = PartialState._prepare_backend(None, cpu=cpu)
    assert kind.value == expected


def test_torchrun_at_one_rank_stays_available_by_name_and_gives_the_one_process_ddp():
    """`trainer.launch.one=torchrun` is what evalkit did before: Accelerate then wraps one process in DDP."""
    pytest.importorskip("accelerate")
    from accelerate.state import PartialState

    env = launcher_part(launchers.rank_environment({}, "torchrun", slot(0, 1)))
    with mock.patch.dict(os.environ, env, clear=True):
        _, kind = PartialState._prepare_backend(None, cpu=True)
    assert kind.value == "MULTI_CPU"


def test_lightning_joins_the_ranks_and_spawns_none():
    pytest.importorskip("lightning")
    from lightning.fabric.plugins.environments import LightningEnvironment, TorchElasticEnvironment

    with mock.patch.dict(os.environ, launcher_part(environment("lightning", 1, 2)), clear=True):
        assert LightningEnvironment().creates_processes_externally
        assert not TorchElasticEnvironment.detect()
    with mock.patch.dict(os.environ, launcher_part(environment("lightning", 0, 1)), clear=True):
        assert not LightningEnvironment().creates_processes_externally


@pytest.mark.parametrize("launch,world,says", [
    ({"one": "python", "many": "python"}, 2, "trainer.launch.many='python' starts one process"),
    ({"one": "pyhton", "many": "torchrun"}, 1, "trainer.launch.one='pyhton' is not a launcher; choose one of "
                                               "accelerate, lightning, mpirun, python, torchrun"),
    ({"one": "python", "many": "torchrun", "many_cuda": "python"}, 2, "trainer.launch.many_cuda='python'")])
def test_a_launch_that_cannot_start_the_ranks_is_refused_naming_the_fix(launch, world, says):
    cfg = OmegaConf.create({"trainer": {"launch": launch}, "distributed": {"world_size": world}})
    problems = _launch_problems(cfg)
    assert len(problems) == 1 and problems[0].startswith(says)


def test_every_launcher_variable_is_removed_from_what_a_rank_inherits():
    for name, launcher in launchers.LAUNCHERS.items():
        for cuda in (False, True):
            assert set(launcher.variables(slot(1, 2, cuda))) <= launchers.ALL_VARIABLES, name


# What `srun --nodes=1 --ntasks=1` gave its task on the test cluster (scripts/slurm_up.sh), the evalkit controller:
# the variables by which wrappers decide they run under SLURM.
SRUN_TASK = {"SLURM_JOB_ID": "8", "SLURM_JOBID": "8", "SLURM_JOB_NAME": "evalkit", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NTASKS": "1", "SLURM_NPROCS": "1",
             "SLURM_TASKS_PER_NODE": "1", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_NNODES": "1",
             "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "n1", "SLURM_STEP_NODELIST": "n1", "PMI_FD": "7",
             "PMIX_RANK": "0", "HOME": "/root"}


@pytest.mark.parametrize("trainer", TRAINERS)
def test_a_rank_started_inside_a_slurm_job_is_not_one_of_slurms_tasks(trainer):
    env = environment(trainer, 1, 2, base=SRUN_TASK)
    own = launcher_part(environment(trainer, 1, 2))                 # what the documented launcher sets itself
    assert {k: v for k, v in env.items() if k.startswith(launchers.SCHEDULER_PREFIXES)} == \
           {k: v for k, v in own.items() if k.startswith(launchers.SCHEDULER_PREFIXES)}, trainer
    assert env["HOME"] == "/root" and env[launchers.RANK_ENV] == "1"


def test_lightning_inside_a_slurm_job_joins_evalkits_ranks_not_slurms_task():
    """Lightning's SLURMEnvironment, first of the environments it detects, would make every rank the SLURM task's
    global rank 0 (rank 1 then failed to host the rendezvous: EADDRINUSE, on the test cluster)."""
    pytest.importorskip("lightning")
    from lightning.fabric.plugins.environments import LightningEnvironment, SLURMEnvironment

    with mock.patch.dict(os.environ, SRUN_TASK, clear=True):
        assert SLURMEnvironment.detect()                            # what the controller's own process sees
    with mock.patch.dict(os.environ, launcher_part(environment("lightning", 1, 2, base=SRUN_TASK)), clear=True):
        assert not SLURMEnvironment.detect()
        assert LightningEnvironment().local_rank() == 1 and LightningEnvironment().creates_processes_externally


def test_ignite_inside_a_slurm_job_reads_evalkits_rank_not_slurms_task():
    pytest.importorskip("ignite")
    from ignite.distributed.comp_models.native import _NativeDistModel

    with mock.patch.dict(os.environ, launcher_part(environment("ignite", 1, 2, base=SRUN_TASK)), clear=True):
        model = _NativeDistModel.__new__(_NativeDistModel)
        model._ext_local_rank = None
        model._identify_local_rank()                               # under SLURM: LOCAL_RANK = SLURM_LOCALID
        assert model._local_rank == 1 and os.environ["LOCAL_RANK"] == "1"
