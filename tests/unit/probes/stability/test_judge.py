"""The stability probe's judge on synthetic evidence: the resume comparison's verdicts, the error items, and the
leak detector's false-positive rate and power on synthetic memory series with a known slope."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.stability.items import error_at_step, refused_damaged
from evalkit.probes.stability.judge import expected_resume_point, judge
from evalkit.probes.stability.longrun import judge_long_run, slope
from evalkit.probes.stability.resume import BIT_FOR_BIT, FAILED, WITHIN_TOLERANCE, compare

STEPS = 24


def run(name: str, steps: range, *, status: str = "FINISHED", reason: str = "", lr=lambda s: 1e-3 / s,
        loss=lambda s: 1.0 / s, params=lambda s: np.full(3, float(s)), start_params: int | None = None,
        config: dict | None = None) -> JobEvidence:
    job = JobEvidence(name, f"{name}-run-id", status, config or {"train": {"max_steps": STEPS, "ckpt_every": 6}},
                      {"evalkit.failure_reason": reason} if reason else {})
    job.steps = [{"step": s, "lr": lr(s), "loss": loss(s), "rng": s} for s in steps]
    job.micro = {0: [{"step": s, "ids": [2 * s, 2 * s + 1]} for s in steps]}
    job.params = {s: params(s) for s in steps}
    if start_params is not None:
        job.params[start_params] = params(start_params)
    return job


REFERENCE = run("reference", range(1, STEPS + 1))


def test_an_identical_resume_is_bit_for_bit_and_a_tiny_difference_within_tolerance():
    same = compare(REFERENCE, run("resume", range(7, STEPS + 1), start_params=6), 6, STEPS)
    assert same.verdict == BIT_FOR_BIT and same.ok and same.resumed_at == 6
    close = compare(REFERENCE, run("resume", range(7, STEPS + 1), loss=lambda s: 1.0 / s * (1 + 1e-7),
                                   start_params=6), 6, STEPS)
    assert close.verdict == WITHIN_TOLERANCE and close.ok


def test_a_fresh_start_an_earlier_checkpoint_and_a_failed_resume_fail():
    fresh = compare(REFERENCE, run("resume", range(1, STEPS + 1)), 6, STEPS)
    assert not fresh.ok and "started again from step 1" in fresh.text()
    earlier = compare(REFERENCE, run("resume", range(1 + 6, STEPS + 1)), 12, STEPS)
    assert not earlier.ok and "latest complete checkpoint was of step 12 (work lost)" in earlier.text()
    failed = compare(REFERENCE, run("resume", range(0), status="FAILED", reason="CorruptCheckpoint: x"), 6, STEPS)
    assert failed.verdict == FAILED and "the resume failed: CorruptCheckpoint: x" in failed.text()


def test_weights_not_restored_are_named_before_anything_else():
    wrong = compare(REFERENCE, run("resume", range(7, STEPS + 1), start_params=6,
                                   params=lambda s: np.full(3, float(s) + (0.5 if s == 6 else 0))), 6, STEPS)
    assert wrong.diverged_at == 7 and "model state lost" in wrong.text()


def test_the_resume_point_follows_the_fault_and_the_cadence():
    killed = run("kill", range(1, 10), status="FAILED", config={"train": {"ckpt_every": 6},
                                                              "faults": {"kill_after_step": 9}})
    assert expected_resume_point(killed) == 6
    killed.config["faults"] = {"kill_after_step": 18}
    assert expected_resume_point(killed) == 18
    killed.config["faults"] = {"kill_in_save_after_step": 9}      # the checkpoint of step 12 was being written
    assert expected_resume_point(killed) == 6


def test_errors_must_end_the_run_loudly_with_the_records_kept():
    shown = run("oom", range(1, 5), status="FAILED", reason="OutOfMemoryError: out of memory (injected)")
    assert error_at_step(shown, 5, ("out of memory",), "oom")[0]
    assert not error_at_step(run("oom", range(1, STEPS + 1)), 5, ("out of memory",), "oom")[0]
    hidden = run("oom", range(1, 5), status="FAILED", reason="worker exited with code 1")
    assert "not in the failure reason" in error_at_step(hidden, 5, ("out of memory",), "oom")[1]
    lost = run("oom", range(1, 3), status="FAILED", reason="out of memory")
    assert "records kept up to step 2, not 4" in error_at_step(lost, 5, ("out of memory",), "oom")[1]


def test_a_damaged_checkpoint_must_be_refused():
    assert refused_damaged(run("c", range(0), status="FAILED", reason="CorruptCheckpoint"), "truncated")[0]
    ok, text = refused_damaged(run("c", range(13, STEPS + 1)), "flipped")
    assert not ok and text == "loaded the flipped checkpoint and trained steps 13..24 on it"


def test_a_fault_that_never_fired_is_not_exercised_not_passed():
    killed = run("kill-in-save", range(1, STEPS + 1), config={"train": {"ckpt_every": 6},
                                                            "faults": {"kill_in_save_after_step": 9}})
    result = judge([REFERENCE, killed])
    assert result.inconclusive and "kill_during_write: not exercised" in result.notes[-1]


# ------------------------------------------------------------------ the leak detector on synthetic series
def _memory_job(slope_kib_per_step: float, rng: np.random.Generator, steps: int = 3000) -> JobEvidence:
    job = run("long-run", range(1, steps + 1), config={"train": {"max_steps": steps}})
    at = np.arange(30, steps + 1, 30)
    noise = rng.normal(0, 64 * 1024, len(at)) + rng.choice([0, 4096 * 4], len(at))   # pages come and go
    rss = 400e6 + slope_kib_per_step * 1024 * at + noise
    job.memory = [{"step": int(s), "rss": float(r), "log_bytes": 5000.0} for s, r in zip(at, rss)]
    return job


@pytest.mark.parametrize("truth,flagged_at_most,flagged_at_least", [(0.0, 0.05, 0.0), (0.3, 0.05, 0.0),
                                                                     (2.0, 1.0, 0.95), (300.0, 1.0, 1.0)])
def test_the_leak_detector_false_positive_rate_and_power(truth, flagged_at_most, flagged_at_least):
    """No leak or a slope under the tolerance (1 MiB per 1,000 steps): flagged in at most 5 % of 200 runs; a leak
    of 2 KiB a step (twice the tolerance) in at least 95 %."""
    rng = np.random.default_rng(7)
    flagged = np.mean([not judge_long_run(_memory_job(truth, rng), 1024.0, 100.0).ok for _ in range(200)])
    assert flagged_at_least <= flagged <= flagged_at_most


def test_slope_units_and_interval():
    s = slope([0, 1000, 2000, 3000, 4000], [0, 1024, 2048, 3072, 4096])
    assert s.per_1k == pytest.approx(1.0) and s.low == pytest.approx(1.0) and s.high == pytest.approx(1.0)
    assert slope([1, 2], [1, 2]) is None


def test_an_interrupted_run_that_left_the_reference_before_the_kill_is_not_blamed_on_the_resume():
    killed = run("kill", range(1, 10), status="FAILED", params=lambda s: np.full(3, float(s) + (0.1 if s >= 4 else 0)))
    out = compare(REFERENCE, run("resume", range(7, STEPS + 1), start_params=6), 6, STEPS, killed)
    assert not out.ok and out.diverged_at == 4 and out.causes[-1].startswith("not reproducible")
    killed = run("kill-between", range(1, 10), status="FAILED", reason="worker killed by SIGKILL",
                 params=lambda s: np.full(3, float(s) + (0.1 if s >= 4 else 0)),
                 config={"train": {"max_steps": STEPS, "ckpt_every": 6}, "faults": {"kill_after_step": 9}})
    result = judge([REFERENCE, killed, run("resume-between", range(7, STEPS + 1), start_params=6)])
    assert result.inconclusive and "kill_between: not exercised" in result.notes[-1]   # not a fail of the wrapper
    same = run("kill", range(1, 10), status="FAILED")
    assert compare(REFERENCE, run("resume", range(7, STEPS + 1), start_params=6), 6, STEPS, same).ok
