"""Ranks start as each wrapper's documentation starts them (issue 43): the variables of evalkit's `torchrun` launcher
are those a real `torchrun` gives its ranks, and real jobs of the two Accelerate-backed wrappers record what their
launch gave each rank and what the wrapper made of it: one undistributed process at one rank (no one-process DDP),
two MULTI_CPU ranks alike at world size 2 (the Trainer under mpirun, Accelerate under `accelerate launch`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import effective_config, job_runs, ok, run_evalkit

from evalkit import launchers, names
from evalkit.controller.launch.workers import free_port

pytestmark = pytest.mark.smoke

DUMP = "import json, os, sys; json.dump(dict(os.environ), open(os.path.join(sys.argv[1], os.environ['RANK']), 'w'))"
# Set by torchrun, not by evalkit's launcher, for its reason (launchers.LAUNCHERS['torchrun'].departure); evalkit's
# own values (the job's id, its folder) and OMP_NUM_THREADS, which evalkit's worker group sets for every launcher.
TORCHRUN_ONLY = {"TORCHELASTIC_USE_AGENT_STORE"}
OWN_VALUES = {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}


def test_evalkits_torchrun_ranks_get_what_a_real_torchrun_sets(tmp_path):
    script, port = tmp_path / "dump.py", free_port()
    script.write_text(DUMP)
    base = {k: v for k, v in os.environ.items() if k not in launchers.ALL_VARIABLES and k != "OMP_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(port), str(script), str(tmp_path)], env=base, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in range(2):
        real = json.loads((tmp_path / str(rank)).read_text())
        real = {k: v for k, v in real.items() if base.get(k) != v and k != "OMP_NUM_THREADS"}
        ours = launchers.rank_environment({}, "torchrun", launchers.Slot(
            rank, rank, 2, 2, 0, 1, "127.0.0.1", port, "job", False, error_file="errors"))
        ours = {k: v for k, v in ours.items() if not k.startswith("EVALKIT_")}
        assert set(real) - set(ours) == TORCHRUN_ONLY
        assert set(ours) - set(real) == set()
        assert {k: v for k, v in real.items() if k not in TORCHRUN_ONLY | OWN_VALUES} == \
            {k: v for k, v in ours.items() if k not in OWN_VALUES}


JOB = ["task.n_train=64", "task.n_val=16", "task.hidden=8", "train.batch_size=8", "train.max_steps=3",
       "train.val_every=0", "observe.warmup_steps=0"]


def launch_records(client, run) -> list[dict]:
    folder = client.download_artifacts(run.info.run_id, names.SPOOL_ARTIFACT_DIR)
    world = int(run.data.tags[names.WORLD_SIZE])
    return [json.load(open(os.path.join(folder, names.launch_file(r)))) for r in range(world)]


@pytest.mark.parametrize("world", [1, 2])
def test_accelerate_and_the_trainer_train_alike_under_their_documented_launch(tmp_path, world):
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    ok(run_evalkit(tmp_path, "trainer=accelerate,hf_trainer", "trainer.mode=defaults",
                   f"distributed={'ddp' if world > 1 else 'none'}", *JOB, multirun=True))
    client, runs = job_runs(tmp_path)
    runs = [run for run in runs if run.data.tags[names.ROLE] == names.ROLE_JOB]     # not the sweep's parent
    assert len(runs) == 2
    for run in runs:
        trainer, launch = run.data.tags[names.TRAINER], run.data.tags[names.LAUNCH]
        records = launch_records(client, run)
        state = effective_config(client, run)
        state = state.get("accelerator", state)
        if world == 1:
            assert launch == ("accelerate" if trainer == "accelerate" else "python")
            assert not {"RANK", "LOCAL_RANK", "WORLD_SIZE", "PMI_SIZE"} & set(records[0])
            assert state["distributed_type"] == "DistributedType.NO", trainer
        else:
            assert launch == ("accelerate" if trainer == "accelerate" else "mpirun")
            assert [r["PMI_RANK"] for r in records] == ["0", "1"] and "RANK" not in records[0]
            assert (state["distributed_type"], state["num_processes"]) == ("DistributedType.MULTI_CPU", 2), trainer
