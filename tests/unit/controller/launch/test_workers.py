"""controller/launch/workers.py and nodes.start_ranks without processes: which interpreter starts a job's workers
(`trainer.env`: the wrapper's environment's, evalkit's own otherwise)."""
from __future__ import annotations

import sys

import pytest
from fake_envs import fake_env
from helpers import compose_config

from evalkit import names
from evalkit.controller.job import nodes
from evalkit.controller.launch import workers


@pytest.fixture
def started(monkeypatch):
    commands = []
    monkeypatch.setattr(workers.subprocess, "Popen", lambda cmd, **kw: commands.append(cmd))
    return commands


def test_workers_start_with_the_interpreter_they_are_given(tmp_path, started):
    workers.WorkerGroup(str(tmp_path), str(tmp_path), workers.Placement(2, threads=1, python="/envs/x/bin/python"))
    workers.WorkerGroup(str(tmp_path), str(tmp_path), workers.Placement(1, threads=1))
    assert started == [["/envs/x/bin/python", "-m", "evalkit.worker", str(tmp_path)]] * 2 + \
        [[sys.executable, "-m", "evalkit.worker", str(tmp_path)]]


@pytest.mark.parametrize("env", [None, "pytorch-ignite-0.4.11"])
def test_a_jobs_ranks_run_the_interpreter_of_its_trainer_env(tmp_path, monkeypatch, env):
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path / "envs"))
    fake_env(tmp_path / "envs", "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"],
             resolved={"pytorch-ignite": "0.4.11"})
    given = []
    monkeypatch.setattr(nodes, "WorkerGroup", lambda job_dir, log_dir, placement, warm: given.extend([placement,
                                                                                                     warm]))
    cfg = compose_config("trainer=ignite", f"trainer.env={env or 'null'}")
    nodes.start_ranks(cfg, str(tmp_path), "run", cuda=False, threads=1)
    placement, warm = given
    assert placement.python == (str(tmp_path / "envs" / env / "bin" / "python") if env else sys.executable)
    assert warm.modules == ("ignite.engine", "ignite.handlers", "ignite.metrics", "ignite.distributed")
