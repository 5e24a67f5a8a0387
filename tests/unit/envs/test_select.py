"""envs/select.py: the interpreter of a job's workers, and the check before launch."""
from __future__ import annotations

import sys

import pytest
from fake_envs import fake_env
from omegaconf import OmegaConf

from evalkit import names
from evalkit.envs.select import env_problem, worker_python


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path))
    fake_env(tmp_path, "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"],
             resolved={"pytorch-ignite": "0.4.11"})
    return tmp_path


def _trainer(name: str, env: str | None, requirements: list[str]):
    return OmegaConf.create({"_target_": f"x.{name}", "name": name, "requirements": requirements, "env": env})


def test_no_env_runs_evalkits_own_interpreter(root):
    assert worker_python(_trainer("ignite", None, ["pytorch-ignite==0.5.5"])) == sys.executable
    assert env_problem(_trainer("ignite", None, ["pytorch-ignite==0.5.5"])) is None


def test_an_env_runs_its_interpreter_when_it_pins_the_trainers_wrapper(root):
    trainer = _trainer("ignite", "pytorch-ignite-0.4.11", ["pytorch_ignite==0.5.5"])
    assert env_problem(trainer) is None
    assert worker_python(trainer) == str(root / "pytorch-ignite-0.4.11" / "bin" / "python")


def test_an_env_of_another_wrapper_or_for_the_baseline_is_refused(root):
    assert env_problem(_trainer("lightning", "pytorch-ignite-0.4.11", ["lightning==2.6.6"])) == (
        "trainer.env=pytorch-ignite-0.4.11 holds pytorch-ignite==0.4.11, not trainer=lightning's wrapper lightning: "
        "create one with `evalkit-env create lightning==<version>`")
    assert "the trainer names no wrapper" in env_problem(_trainer("baseline", "pytorch-ignite-0.4.11", []))
    assert "create it with `evalkit-env create pytorch-ignite==0.4.9`" in \
        env_problem(_trainer("ignite", "pytorch-ignite-0.4.9", ["pytorch-ignite==0.5.5"]))
