"""The performance probe's judge on synthetic evidence with a known truth (no process runs): exact outcomes for an
identical copy, a slower one, a failed job, memory, evidence without turns."""
from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance import judge as perf
from evalkit.probes.performance.plan import job_name, parse_name, plan_jobs

STEP_MS = {2: 1.3, 8: 3.4, 32: 11.0}
STEPS = {2: 15, 8: 6, 32: 4}
CONFIG = {"probe": {"performance": {"budget": 0.05, "memory_budget": 0.10, "max_rounds": 512}}}


def job(depth: int, arm: str, blocks: list[float], mem_mib: float = 40.0, status: str = "FINISHED",
        reason: str = "", config: dict = CONFIG) -> JobEvidence:
    summary = {"turns": {"steps_per_block": STEPS[depth], "blocks_s": blocks, "warmup_step_s": 0.001},
               "peak_mem_bytes": mem_mib * 2**20, "import_rss_bytes": 300 * 2**20,
               "startup_torch_imported_s": 1.5, "startup_wrapper_imported_s": 1.6 + (arm == "wrapper"),
               "startup_first_forward_s": 2.5 + (arm == "wrapper"), "startup_first_step_s": 2.6 + (arm == "wrapper")}
    tags = {"evalkit.failure_reason": reason} if reason else {}
    return JobEvidence(job_name(depth, arm), f"run-{depth}-{arm}", status, config, tags,
                       summary=summary if status == "FINISHED" else {})


def jobs_for(proportional=0.0, fixed_ms=0.0, rounds=128, noise=0.05, seed=0, mem=(40.0, 40.0), config=CONFIG,
             **status):
    rng = np.random.default_rng(seed)
    machine = np.exp(np.cumsum(0.03 * rng.standard_normal(rounds)))
    out = []
    for depth, step in STEP_MS.items():
        k = STEPS[depth]
        base = k * step / 1000 * machine * np.exp(noise * rng.standard_normal(rounds))
        wrap = k * (step * (1 + proportional) + fixed_ms) / 1000 * machine * np.exp(noise * rng.standard_normal(rounds))
        out.append(job(depth, "baseline", list(base), mem[0], config=config, **status.get(f"d{depth}-baseline", {})))
        out.append(job(depth, "wrapper", list(wrap), mem[1], config=config, **status.get(f"d{depth}-wrapper", {})))
    return out


def test_the_plan_runs_a_baseline_and_a_wrapper_job_per_size():
    cfg = OmegaConf.create({"probe": {"performance": {"depths": [8, 2], "hidden": 256}},
                            "observe": {"warmup_steps": 5}, "hardware": {"threads": 0, "device": "cpu"}})
    jobs = plan_jobs(cfg)
    assert [j.name for j in jobs] == ["d2-baseline", "d2-wrapper", "d8-baseline", "d8-wrapper"]
    baseline = jobs[0].overrides
    assert baseline["trainer"] == "baseline" and "trainer" not in jobs[1].overrides
    assert baseline["task.depth"] == 2 and baseline["task.hidden"] == 256 and baseline["observe.profile"] == "timing"
    assert baseline["train.val_every"] == 0 and baseline["hardware.threads"] == 1
    assert baseline["train.max_steps"] > 100_000          # a cap: the turn table ends the jobs
    assert parse_name("d32-wrapper") == (32, "wrapper")


def test_an_identical_copy_passes():
    result = perf.judge(jobs_for())
    assert result.status == "pass", result.notes
    assert result.figures["d32/ratio_low"] < 1.0 < result.figures["d32/ratio_high"]
    assert "of a 100 ms step" in result.headline and "128 rounds" in result.headline


def test_a_copy_ten_percent_slower_fails_with_its_cost():
    result = perf.judge(jobs_for(proportional=0.10))
    assert result.status == "fail", result.notes
    assert "budget 5%" in result.notes[0] and result.figures["added_fraction_low"] > 0.05
    assert result.figures["d32/added_ms"] == pytest.approx(1.1, rel=0.25)


def test_a_fixed_cost_that_a_real_model_hides_passes():
    result = perf.judge(jobs_for(fixed_ms=0.6))
    assert result.status == "pass", result.notes
    assert result.figures["d2/ratio"] > 1.3 and result.figures["added_ms_per_step"] == pytest.approx(0.6, abs=0.25)


def test_the_same_fixed_cost_fails_at_the_step_time_of_the_users_model():
    """probe.performance.reference_step_ms: 0.6 ms a step is 0.6 % of a 100 ms step, 12 % of a 5 ms one."""
    config = {"probe": {"performance": {**CONFIG["probe"]["performance"], "reference_step_ms": 5.0}}}
    result = perf.judge(jobs_for(fixed_ms=0.6, config=config))
    assert result.status == "fail", result.notes
    assert "of a 5 ms step" in result.headline and "+0.6" in result.headline and "ms/step" in result.headline
    assert result.figures["reference_step_ms"] == 5.0 and result.figures["added_fraction"] > 0.05


def test_a_cost_on_the_budget_is_inconclusive_with_the_rounds_it_would_need():
    result = perf.judge(jobs_for(proportional=0.05, rounds=32))
    assert result.status == "inconclusive"
    assert "rounds in all" in result.notes[0] or "sits on the budget" in result.notes[0]


def test_a_failed_wrapper_job_fails_the_probe_with_its_reason():
    result = perf.judge(jobs_for(**{"d8-wrapper": {"status": "FAILED", "reason": "RuntimeError: boom"}}))
    assert result.status == "fail"
    assert "d8-wrapper FAILED: RuntimeError: boom" in result.notes[0]


def test_a_failed_baseline_job_leaves_it_inconclusive():
    result = perf.judge(jobs_for(**{"d8-baseline": {"status": "FAILED", "reason": "OSError: disk"},
                                   "d8-wrapper": {"status": "FAILED", "reason": "not run: the jobs taking turns"}}))
    assert result.status == "inconclusive" and "d8-baseline failed: OSError: disk" in result.notes[0]


def test_training_memory_beyond_its_budget_fails_and_within_the_noise_of_it_is_undecided():
    result = perf.judge(jobs_for(mem=(40.0, 60.0)))
    assert result.status == "fail" and "training memory at d32" in result.notes[0]
    assert "+20.0 MiB" in result.headline
    undecided = perf.judge(jobs_for(mem=(40.0, 44.5)))     # the budget: +4 MiB; the noise: 2.5 MiB
    assert undecided.status == "inconclusive" and "not decided against" in undecided.notes[-1]
    assert perf.judge(jobs_for(mem=(40.0, 41.0))).status == "pass"


def test_evidence_without_turns_is_inconclusive():
    jobs = jobs_for()
    for j in jobs:
        j.summary.pop("turns")
    result = perf.judge(jobs)
    assert result.status == "inconclusive" and "no blocks" in result.notes[0]


def test_the_start_up_and_the_import_footprint_are_reported():
    result = perf.judge(jobs_for())
    assert result.figures["startup/first_step_s/wrapper"] == pytest.approx(3.6)
    assert any("Start-up" in s and "300" in s for s in result.sections)


def test_a_cell_that_is_not_a_pass_gets_two_profile_jobs_and_their_section():
    from evalkit.probes.catalog import load_probe
    PROBE = load_probe("performance")

    cfg = OmegaConf.create({"probe": {"performance": {"depths": [2, 8, 32], "hidden": 256}},
                            "observe": {"warmup_steps": 5}, "hardware": {"threads": 0, "device": "cpu"}})
    passed = {j.name: j for j in jobs_for()}
    assert PROBE.plan(cfg, passed) == ([], [])
    slow = {j.name: j for j in jobs_for(proportional=0.10)}
    profiles, _ = PROBE.plan(cfg, slow)
    assert [j.name for j in profiles] == ["d32-baseline-profile", "d32-wrapper-profile"]
    assert profiles[1].overrides["observe.call_profile"] == 50 and "trainer" not in profiles[1].overrides
    schedule = PROBE.schedule(cfg, profiles)                 # one block each, one after the other
    assert schedule.block_steps({}) == {j.name: 52 for j in profiles} and schedule.add(0, {}) is not None
    row = {"file": "fakewrap/loop.py", "line": 1, "function": "advance", "calls": 100, "own_s": 0.05,
           "cumulative_s": 0.05}
    for job_, extra in ((profiles[0], []), (profiles[1], [row])):
        slow[job_.name] = JobEvidence(job_.name, "r", "FINISHED", CONFIG,
                                      profile={"steps": 100, "functions": extra, "memory": []})
    assert PROBE.plan(cfg, slow) == ([], [])
    result = perf.judge(list(slow.values()))
    assert result.status == "fail" and "`fakewrap.loop:advance` | +0.500" in result.sections[-1]


def test_a_failed_job_gets_no_profile_jobs():
    from evalkit.probes.catalog import load_probe
    PROBE = load_probe("performance")

    cfg = OmegaConf.create({"probe": {"performance": {"depths": [2, 8, 32], "hidden": 256}},
                            "observe": {"warmup_steps": 5}, "hardware": {"threads": 0, "device": "cpu"}})
    done = {j.name: j for j in jobs_for(**{"d2-wrapper": {"status": "FAILED", "reason": "RuntimeError: boom"}})}
    assert PROBE.plan(cfg, done) == ([], [])


def your_task_jobs(mem: tuple[float, float], rounds: int = 128, seed: int = 1) -> list[JobEvidence]:
    """A team's model timed as configured (one size, `plan.YOURS`): an identical copy, 13.7 ms a step (resnet18)."""
    rng = np.random.default_rng(seed)
    machine = np.exp(np.cumsum(0.03 * rng.standard_normal(rounds)))
    out = []
    for arm, mib in zip(("baseline", "wrapper"), mem):
        blocks = list(2 * 0.0137 * machine * np.exp(0.03 * rng.standard_normal(rounds)))
        evidence = job(2, arm, blocks, mib)
        evidence.name = job_name(0, arm)
        evidence.summary["turns"]["steps_per_block"] = 2
        out.append(evidence)
    return out


def test_on_a_teams_model_the_memory_noise_is_not_calibrated_so_its_difference_is_named_not_judged():
    """Issue 44: identical copies of the baseline on resnet18 differ by -6.0 to +8.4 MiB in training memory (the
    baseline's own 31.6 to 40.0 MiB, 6 runs), far past MEMORY_NOISE_MIB (measured on mlp_regression): 2 of 6 failed on
    memory. On a team's model the memory difference is reported and named as not judged; the time decides."""
    result = perf.judge(your_task_jobs((31.6, 40.0)))
    assert result.status == "pass", (result.headline, result.notes)
    assert "training memory +8.4 MiB @your model not judged" in result.headline
    assert result.figures["memory_not_judged"] == 1.0
    assert any("not judged" in note and "mlp_regression" in note for note in result.notes)
