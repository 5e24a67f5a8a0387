"""`srun evalkit ...`: the node settings SLURM's variables give one evalkit per node (controller/job/srun.py)."""
from __future__ import annotations

import pytest

from evalkit.controller.job.srun import SrunLayoutError, first_host, port_for, srun_settings

STEP = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURM_PROCID": "1", "SLURM_NODEID": "1",
        "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NNODES": "4",
        "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_NODELIST": "gpu[05-08]"}


@pytest.mark.parametrize("nodelist,first", [("gpu[03-05,9],cpu1", "gpu03"), ("a,b", "a"), ("n1", "n1"),
                                            ("rack1-n[3-4]", "rack1-n3"), ("x[10,2]", "x10")])
def test_the_first_host_of_a_slurm_host_list(nodelist, first):
    assert first_host(nodelist) == first


def test_one_evalkit_per_node_gets_every_node_setting_from_the_step():
    found = srun_settings(STEP, "/shared/evalkit", set())
    assert found == {"nnodes": 2, "node_rank": 1, "master_addr": "gpu07", "master_port": port_for("4242", "3"),
                     "shared_dir": "/shared/evalkit/slurm-4242.3"}
    assert 20000 <= found["master_port"] < 30000 and port_for("4242", "4") != found["master_port"]


def test_the_command_line_wins_and_without_a_shared_root_no_folder_is_made_up():
    found = srun_settings(STEP, None, {"distributed.master_port", "distributed.master_addr"})
    assert found == {"nnodes": 2, "node_rank": 1}


def test_outside_srun_or_on_one_node_nothing_changes():
    assert srun_settings({}, "/shared", set()) == {}
    assert srun_settings({**STEP, "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "1"}, "/shared", set()) == {}
    assert srun_settings({k: v for k, v in STEP.items() if k != "SLURM_PROCID"}, "/shared", set()) == {}


def test_several_tasks_per_node_are_refused_with_the_srun_line_that_works():
    with pytest.raises(SrunLayoutError, match=r"srun started 8 evalkit processes on 2 nodes.*--ntasks-per-node=1"):
        srun_settings({**STEP, "SLURM_STEP_NUM_TASKS": "8"}, "/shared", set())
