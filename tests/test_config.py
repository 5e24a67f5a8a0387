"""Composition: typos and wrong types fail at compose time with Hydra's message; every target binds."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from conftest import run_evalkit
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from hydra.utils import get_class, get_method
from omegaconf.errors import ConfigKeyError, ValidationError

from evalkit.config import register_configs

CONF = Path(__file__).resolve().parents[1] / "conf"
register_configs()


def _compose(*overrides: str):
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=list(overrides))


def test_defaults_compose():
    cfg = _compose()
    assert cfg.trainer.name == "baseline" and cfg.task.name == "mlp_regression" and cfg.precision.name == "fp32"


@pytest.mark.parametrize("override,exc", [("train.max_stepz=3", ConfigCompositionException),
                                          ("train.max_steps=many", ConfigCompositionException),
                                          ("precision=fp8", ConfigCompositionException)])
def test_bad_overrides_fail_at_compose_time(override, exc):
    with pytest.raises(exc) as info:
        _compose(override)
    cause = info.value.__cause__ or info.value
    assert isinstance(cause, (ConfigKeyError, ValidationError, Exception))


def test_typo_on_the_command_line_names_the_key_and_exits_nonzero(workdir):
    proc = run_evalkit(workdir, "train.max_stepz=3")
    assert proc.returncode != 0
    assert "max_stepz" in proc.stderr and "not in" in proc.stderr
    assert not (workdir / "mlflow.db").exists()          # nothing started, nothing half-recorded


def test_cfg_job_prints_the_composed_config(workdir):
    proc = run_evalkit(workdir, "--cfg", "job", "seed=7")
    assert proc.returncode == 0, proc.stderr
    assert "seed: 7" in proc.stdout and "max_steps:" in proc.stdout


@pytest.mark.parametrize("yaml", sorted((CONF / "trainer").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_trainer_target_binds_the_adapter_signature(yaml):
    cfg = _compose(f"trainer={yaml.stem}")
    cls = get_class(cfg.trainer._target_)
    params = inspect.signature(cls).parameters
    assert "mode" in params and "options" in params
    for method in ("versions", "fit", "effective_config"):
        assert callable(getattr(cls, method))


@pytest.mark.parametrize("yaml", sorted((CONF / "task").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_task_target_binds(yaml):
    cfg = _compose(f"task={yaml.stem}")
    assert list(inspect.signature(get_method(cfg.task._target_)).parameters) == ["cfg", "seed"]
