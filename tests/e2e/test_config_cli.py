"""Composition: typos and wrong types fail at compose time with Hydra's message; every target binds, and each
task's YAML holds exactly its builder's keyword arguments."""
from __future__ import annotations

import pytest
from helpers import run_evalkit

from evalkit.config import register_configs

register_configs()


@pytest.mark.parametrize("overrides,multirun,line", [
    (["train.max_stepz=3"], False, "train.max_stepz is not a setting: did you mean train.max_steps?"),
    # A value only one job of the sweep has: Hydra's sweeper composes it after the sweep's callbacks ran.
    (["seed=0,1", "train.max_steps=2,x"], True,
     "Error merging override train.max_steps=x Value 'x' of type 'str' could not be converted to Integer"),
    (["seed=0,1", "train.lr=[1"], True, "train.lr=[1: no viable alternative at input '[1'"),
])
def test_a_bad_override_is_one_line_naming_it_exit_2_and_nothing_recorded(workdir, overrides, multirun, line):
    proc = run_evalkit(workdir, *overrides, multirun=multirun)
    assert proc.returncode == 2 and proc.stderr == f"evalkit: bad override: {line}\n", proc.stderr
    assert sorted(p.name for p in workdir.iterdir()) == []      # no store, no run or sweep directory


def test_hydra_full_error_still_gives_hydras_stack_trace(workdir):
    proc = run_evalkit(workdir, "train.max_stepz=3", env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "ConfigCompositionException" in proc.stderr


def test_cfg_job_prints_the_composed_config(workdir):
    proc = run_evalkit(workdir, "--cfg", "job", "seed=7")
    assert proc.returncode == 0, proc.stderr
    assert "seed: 7" in proc.stdout and "max_steps:" in proc.stdout


def test_cfg_job_checks_every_value_as_a_run_would_and_exits_2(workdir):
    """issue 45: `--cfg job train.optimizer=adamx` printed the config and exited 0: a sweep could not be checked
    before it ran."""
    proc = run_evalkit(workdir, "--cfg", "job", "train.optimizer=adamx", "+trainer.options.gradient_acumulation=4")
    assert proc.returncode == 2 and "optimizer: adamx" in proc.stdout, proc.stderr
    assert proc.stderr.splitlines() == [
        "evalkit: invalid config: train.optimizer=adamx is not one of adamw, adam, sgd: did you mean "
        "train.optimizer=adam?",
        "evalkit: invalid config: trainer.options.gradient_acumulation is not an option of BaselineAdapter (it would "
        "be ignored): remove it (it takes no options)"]
    assert sorted(p.name for p in workdir.iterdir()) == []


def test_cfg_with_a_sweep_is_one_line_saying_how_to_see_a_sweeps_settings(workdir):
    proc = run_evalkit(workdir, "--cfg", "hydra", "-m", "seed=0,1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("evalkit: only one of --multirun (-m), --cfg (-c)") and "`evalkit --cfg job seed=0`" in line
    assert not list(workdir.glob("multirun*")) and not (workdir / "mlflow.db").exists()
