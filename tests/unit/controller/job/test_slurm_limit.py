"""A SLURM job's time limit named as the cause of a killed worker (controller/job/slurm_limit.py),
from squeue's answer."""
from __future__ import annotations

import subprocess

import pytest

from evalkit.controller.job import slurm_limit
from evalkit.controller.job.slurm_limit import seconds, time_limit_note


@pytest.mark.parametrize("text,value", [("1:00", 60), ("1:02:03", 3723), ("2-00:00:01", 172801), ("45", 45),
                                        ("UNLIMITED", None), ("", None)])
def test_slurm_times_in_seconds(text, value):
    assert seconds(text) == value


def squeue_says(answer: str):
    def run(cmd, **kwargs):
        assert cmd[:4] == ["squeue", "-h", "-j", "77"]
        return subprocess.CompletedProcess(cmd, 0, stdout=answer + "\n", stderr="")
    return run


def test_a_job_that_used_its_time_is_said_to_have_reached_slurms_limit(monkeypatch):
    monkeypatch.setattr(slurm_limit.shutil, "which", lambda name: "/usr/bin/squeue")
    env = {"SLURM_JOB_ID": "77"}
    assert time_limit_note(env, squeue_says("1:00|1:04")) == (
        "SLURM's time limit of 1:00 was reached (SLURM job 77: hydra.launcher.timeout_min, sbatch --time)")
    assert time_limit_note(env, squeue_says("1:00|0:40")) != ""            # signalled within the grace
    assert time_limit_note(env, squeue_says("10:00|0:40")) == ""           # time left: another cause
    assert time_limit_note(env, squeue_says("UNLIMITED|5:00")) == ""
    assert time_limit_note({}, squeue_says("1:00|1:04")) == ""             # not a SLURM job
