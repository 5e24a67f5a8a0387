"""The performance probe's judge on synthetic jobs with a known truth (no process runs)."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance import judge as perf
from evalkit.probes.performance.measure import JobTiming, compare_width, fit_cost, machine_drift
from evalkit.probes.performance.plan import job_name, parse_name, plan_jobs


def job(width: int, repeat: int, arm: str, step_ms: float, mem_mib: float = 40.0, status: str = "FINISHED"):
    summary = {"step_time_median_s": step_ms / 1000, "samples_per_s": 32_000 / step_ms,
               "peak_mem_bytes": mem_mib * 2**20, "import_rss_bytes": 300 * 2**20,
               "startup_torch_imported_s": 1.5, "startup_wrapper_imported_s": 1.6 + (arm == "wrapper"),
               "startup_first_forward_s": 2.5 + (arm == "wrapper"), "startup_first_step_s": 2.6 + (arm == "wrapper")}
    return JobEvidence(job_name(width, repeat, arm), f"run-{width}-{repeat}-{arm}", status, {},
                       summary=summary if status == "FINISHED" else {})


def jobs_for(truth, widths=(256, 1024), repeats=5, noise=0.01, seed=0, mem=(40.0, 40.0)):
    """Baseline step b(w) = w / 100 ms; wrapper = truth(b) with multiplicative noise on each job."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(repeats):
        for w in widths:
            base = w / 100
            for arm, ms in (("baseline", base), ("wrapper", truth(base))):
                mib = mem[arm == "wrapper"] * (1 + 0.01 * rng.standard_normal())
                out.append(job(w, r, arm, ms * (1 + noise * rng.standard_normal()), mib))
    return out


def test_the_plan_alternates_the_arms_and_times_each_width():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"probe": {"repeats": 3, "widths": [64, 128], "steps": 40},
                            "observe": {"warmup_steps": 5}, "hardware": {"threads": 0, "device": "cpu"}})
    jobs = plan_jobs(cfg)
    assert [j.name for j in jobs][:8] == ["h64-r0-baseline", "h64-r0-wrapper", "h128-r0-baseline",
                                          "h128-r0-wrapper", "h64-r1-wrapper", "h64-r1-baseline",
                                          "h128-r1-wrapper", "h128-r1-baseline"]
    assert len(jobs) == 12
    baseline = jobs[0].overrides
    assert baseline["trainer"] == "baseline" and "trainer" not in jobs[1].overrides
    assert baseline["train.max_steps"] == 45 and baseline["observe.profile"] == "timing"
    assert baseline["task.hidden"] == 64 and baseline["train.val_every"] == 0 and baseline["hardware.threads"] == 1
    assert parse_name("h128-r1-wrapper") == (128, 1, "wrapper")


def test_an_identical_copy_passes_and_is_not_reported_slower():
    result = perf.judge(jobs_for(lambda b: b))
    assert result.status == "pass", result.notes
    assert result.figures["h1024/ratio_low"] < 1.0 < result.figures["h1024/ratio_high"]
    assert "ms/step" in result.headline and "@h1024" in result.headline


def test_a_fixed_and_a_proportional_cost_are_recovered_by_the_fit():
    truth = lambda b: b + 0.4 + 0.05 * b   # noqa: E731 - 0.4 ms per step plus 5 % of the step
    result = perf.judge(jobs_for(truth, widths=(128, 512, 2048), noise=0.005))
    fixed, prop = result.figures["added_ms_per_step"], result.figures["added_proportional"]
    assert fixed == pytest.approx(0.4, abs=0.15) and prop == pytest.approx(0.05, abs=0.02)
    assert result.figures["added_ms_per_step_low"] < 0.4 < result.figures["added_ms_per_step_high"]
    assert result.figures["added_fraction_at_100ms"] == pytest.approx(0.054, abs=0.02)


def test_a_wrapper_a_third_slower_fails_its_budget():
    result = perf.judge(jobs_for(lambda b: 1.33 * b))
    assert result.status == "fail"
    assert "above the budget" in result.notes[0] and result.figures["h1024/ratio_low"] > 1.2


def test_training_memory_beyond_its_budget_fails_and_the_import_footprint_does_not_count():
    result = perf.judge(jobs_for(lambda b: b, mem=(40.0, 60.0)))
    assert result.status == "fail" and "training memory" in result.notes[0]
    assert "training memory 1.5" in result.headline and "MiB" in result.headline
    assert result.figures["h1024/mem_ratio"] == pytest.approx(1.5, rel=0.05)
    assert "300" in result.sections[2]       # the import footprint, reported apart


def test_noisy_timings_are_reported_unstable_not_judged():
    result = perf.judge(jobs_for(lambda b: 1.5 * b, noise=0.3, seed=3))
    assert result.status == "inconclusive"
    assert "the largest width, where the probe decides) is not stable" in result.reason
    assert result.headline.startswith("timing unstable:")
    assert any("spread" in n for n in result.notes)
    assert result.figures["h1024/stable"] == 0.0


def test_one_repeat_is_not_judged_and_the_cell_says_so():
    result = perf.judge(jobs_for(lambda b: b, repeats=1))
    assert result.status == "inconclusive" and result.headline == "timing not measured @h1024"


def test_the_machine_drifting_is_absorbed_by_the_pairs_but_a_drifting_ratio_is_unstable():
    timings = [JobTiming.of(j) for j in jobs_for(lambda b: b, widths=(256,), noise=0.0)]
    for t in timings:
        t.step_ms *= 1 + 0.10 * t.repeat           # the machine slows 10 % per repeat, both arms alike
    width = compare_width(256, timings)
    assert width.stable and machine_drift(width.pairs) == pytest.approx(0.4)
    for t in timings:
        if t.arm == "wrapper":
            t.step_ms *= 1 + 0.06 * t.repeat       # the wrapper alone slows: its ratio drifts
    assert any("drifted" in p for p in compare_width(256, timings).problems)


def test_too_few_repeats_and_failed_jobs_are_said():
    jobs = jobs_for(lambda b: b, repeats=2)
    jobs[1] = job(256, 0, "wrapper", 1.0, status="FAILED")
    result = perf.judge(jobs)
    assert result.status == "inconclusive"
    assert any("job h256-r0-wrapper failed" in n for n in result.notes)
    assert any("fewer than 3" in n for n in result.notes)


def test_one_width_takes_the_whole_difference_as_a_fixed_cost():
    timings = [JobTiming.of(j) for j in jobs_for(lambda b: b + 0.3, widths=(512,), noise=0.002)]
    fit = fit_cost([compare_width(512, timings)])
    assert fit.proportional is None and fit.fixed.estimate == pytest.approx(0.3, abs=0.05)


def test_start_up_milestones_are_reported_per_arm():
    result = perf.judge(jobs_for(lambda b: b))
    assert result.figures["startup/wrapper_imported_s/added"] == pytest.approx(1.0)
    assert "first step" in result.sections[2]
