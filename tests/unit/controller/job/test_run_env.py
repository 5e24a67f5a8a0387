"""controller/job/run.py with `trainer.env`: the check before launch, the run's tags and its environment records."""
from __future__ import annotations

import pytest
from fake_envs import fake_env
from helpers import compose_config

from evalkit import names
from evalkit.controller.job import run
from evalkit.controller.job.environment import environment_lock
from evalkit.envs.store import env


@pytest.fixture
def envs(tmp_path, monkeypatch):
    monkeypatch.setenv(names.ENVS_DIR_ENV, str(tmp_path))
    path = fake_env(tmp_path, "pytorch-ignite-0.4.11", requirements=["pytorch-ignite==0.4.11"],
                    resolved={"pytorch-ignite": "0.4.11"})
    site = env(path.name).site_packages / "pytorch_ignite-0.4.11.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: pytorch-ignite\nVersion: 0.4.11\n")
    return tmp_path


def test_a_job_in_an_environment_is_checked_against_it_and_tagged_with_it(envs):
    cfg = compose_config("trainer=ignite", "trainer.env=pytorch-ignite-0.4.11")
    assert run.preflight(cfg) is None
    assert run.run_tags(cfg, None)[names.TRAINER_ENV] == "pytorch-ignite-0.4.11"
    assert run.run_tags(compose_config("trainer=ignite"), None)[names.TRAINER_ENV] is None   # no tag


def test_a_missing_environment_fails_the_job_with_the_command_that_creates_it(envs):
    cfg = compose_config("trainer=ignite", "trainer.env=pytorch-ignite-0.4.9")
    assert run.preflight(cfg) == (f"trainer.env=pytorch-ignite-0.4.9: no such environment in {envs}: create it with "
                                  "`evalkit-env create pytorch-ignite==0.4.9`")


def test_the_lock_of_a_job_in_an_environment_holds_the_environments_versions_first(envs):
    site = env("pytorch-ignite-0.4.11").site_packages
    assert "pytorch-ignite==0.4.11\n" in environment_lock(first=[str(site)])
    assert "pytorch-ignite==0.4.11" not in environment_lock()
