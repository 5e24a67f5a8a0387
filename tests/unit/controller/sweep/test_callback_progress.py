"""Long commands say where they are: a sweep counts its jobs and estimates the time left; evalkit-eval prints
its plan before it starts."""
from __future__ import annotations

import pytest

from evalkit.controller.sweep.callback import planned_jobs, progress_line
from evalkit.presets import QUICK
from evalkit.quick import plan_text


@pytest.fixture
def multirun_config():
    from hydra import compose, initialize_config_module

    from evalkit.config import register_configs

    register_configs()

    def make(*overrides):
        """The composed config as a multirun's callbacks see it: the sweep's overrides under hydra.overrides."""
        with initialize_config_module("evalkit.conf", version_base=None):
            cfg = compose("config", return_hydra_config=True)
        cfg.hydra.overrides.task = list(overrides)
        return cfg
    return make


def test_the_sweep_knows_how_many_jobs_its_overrides_make(multirun_config):
    assert planned_jobs(multirun_config("seed=0,1,2", "trainer=baseline,lightning", "train.max_steps=5")) == 6
    assert planned_jobs(multirun_config("seed=0")) == 1
    assert planned_jobs(multirun_config("seed=range(4)", "trainer=baseline,fabric")) == 8


def test_progress_counts_failures_and_estimates_the_time_left():
    assert progress_line("s1", 3, 12, 0, 30.0) == "[evalkit] sweep s1: 3/12 jobs done in 30 s, about 90 s left"
    assert progress_line("s1", 12, 12, 1, 120.4) == "[evalkit] sweep s1: 12/12 jobs done (1 failed) in 120 s"
    assert progress_line("s1", 2, None, 0, 5.0) == "[evalkit] sweep s1: 2 jobs done in 5 s"


def test_the_quick_evaluation_states_its_plan():
    # per probe its preset's seconds per job (beside the probe), each sweep its start, measured (quick.py)
    assert plan_text(12, {"semantics": (10, 40), "performance": (5, 30)}, QUICK) == (
        "12 training jobs (~42 s), semantics 10 runs / 40 jobs (~37 s), performance 5 runs / 30 jobs (~2 min), "
        "then the verdict: about 4 min in all")
    assert plan_text(6, {}, QUICK) == "6 training jobs (~21 s), then the verdict: about 41 s in all"
    # the quick evaluation of 2026-12-06 16:41, six wrappers, performance and semantics in both modes: 12 min 26 s
    # measured (training 72 s, semantics 86, performance 328, consistency 19, functional 28, stability 63,
    # customization 12, maintenance 124)
    assert plan_text(21, {"semantics": (12, 96), "performance": (12, 72), "consistency": (6, 24),
                          "functional": (6, 42), "stability": (6, 78), "customization": (6, 12),
                          "maintenance": (6, 18)}, QUICK) == (
        "21 training jobs (~72 s), semantics 12 runs / 96 jobs (~87 s), performance 12 runs / 72 jobs (~6 min), "
        "consistency 6 runs / 24 jobs (~20 s), functional 6 runs / 42 jobs (~29 s), stability 6 runs / 78 jobs "
        "(~63 s), customization 6 runs / 12 jobs (~13 s), maintenance 6 runs / 18 jobs (~2 min), then the verdict: "
        "about 13 min in all")


def test_each_preset_plans_every_probe_with_its_own_settings():
    from evalkit.presets import QUICK, THOROUGH, plan_for, probe_overrides
    from evalkit.quick import probe_jobs

    assert probe_overrides("performance", plan_for(QUICK, "performance"), ["lightning", "fabric"], ["x=1"]) == [
        "probe=performance", "trainer=lightning,fabric", "trainer.mode=aligned,defaults",
        "probe.performance.depths=[2,32]", "probe.performance.time_limit_s=12", "x=1"]
    assert probe_jobs(QUICK, ["semantics", "performance"], 5) == {"semantics": (10, 80), "performance": (10, 60)}
    assert plan_for(QUICK, "no-such-probe").modes == ("aligned", "defaults")
    assert "probe.switches=[bf16_mixed,fp16_mixed,ws2]" in plan_for(THOROUGH, "consistency").settings
    assert len(THOROUGH.tasks) == 3 and THOROUGH.seeds > QUICK.seeds
    # stability: quick at world size 1 in aligned mode, no long run; thorough adds the long run, both modes
    assert probe_overrides("stability", plan_for(QUICK, "stability"), ["fabric"], []) == [
        "probe=stability", "trainer=fabric", "trainer.mode=aligned", "probe.world_sizes=[1]"]
    assert "probe.long_steps=3000" in plan_for(THOROUGH, "stability").settings
    assert plan_for(THOROUGH, "stability").modes == plan_for(THOROUGH, "functional").modes == ("aligned", "defaults")


def test_evalkit_eval_quiet_hands_quiet_to_every_sweep_and_prints_no_progress(monkeypatch, capsys):
    from evalkit import quick
    from evalkit.verdict import cli as verdict_cli

    commands = []
    monkeypatch.setattr(quick, "run_sweep", lambda overrides: commands.append(overrides) or 0)
    monkeypatch.setattr(verdict_cli, "main", lambda argv: 0)
    assert quick.main(["--quiet", "--trainers", "baseline", "--seeds", "1", "--probes", "none"]) == 0
    (sweep,) = commands
    assert "tracking.progress=quiet" in sweep and sweep[-1] == "hydra/hydra_logging=disabled"
    assert "evalkit-eval:" not in capsys.readouterr().err           # no plan, no "training done", no "judging"
    commands.clear()
    assert quick.main(["--plain", "--trainers", "baseline", "--seeds", "1", "--probes", "none"]) == 0
    assert "tracking.progress=plain" in commands[0] and "hydra/hydra_logging=disabled" not in commands[0]
    assert "evalkit-eval: plan:" in capsys.readouterr().err
