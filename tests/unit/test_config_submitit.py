"""Sweeps through Hydra's submitit launcher: `submitit_local` runs a real sweep here (each job in a process of
its own, whose output submitit sends to files), and `evalkit_slurm` is composed and turned into the sbatch script
it would submit, with a stand-in `sbatch` (no SLURM needed, nothing submitted)."""
from __future__ import annotations

import pytest
from helpers import compose_config

from evalkit.config import register_configs

pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                    reason="the submitit extra is not installed: pip install -e '.[submitit]'")
register_configs()

SLURM = ["hydra/launcher=evalkit_slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4",
         "hydra.launcher.timeout_min=120"]
SECRET = "s3cret-not-in-any-file"


def test_evalkit_slurm_composes_the_submitit_slurm_launcher_with_the_settings_given(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", SECRET)
    from omegaconf import OmegaConf

    launcher = compose_config(*SLURM, hydra=True).hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher.partition, launcher.gpus_per_node, launcher.timeout_min) == ("gpu", 4, 120)
    assert launcher.tasks_per_node == 1 and launcher.nodes == 1    # evalkit's controller starts the ranks
    assert launcher.cpus_per_task >= 1 and launcher.mem_gb >= 1
    assert launcher.additional_parameters == {"export": "ALL"}       # the tracking variables reach the jobs
    assert SECRET not in OmegaConf.to_yaml(launcher, resolve=True) and "MLFLOW" not in OmegaConf.to_yaml(launcher)
    plain = compose_config("hydra/launcher=evalkit_slurm", hydra=True)
    assert plain.hydra.launcher.partition is None                                      # refused at launch
