"""Every pass rests on evidence (issue 28): the semantic probe's judge on recorded baseline runs
(tests/fixtures/semantics/baseline.json) with part of their evidence taken away. Each gap alone, with no finding,
makes the probe inconclusive with what is missing (and where) and how to get it, never a pass; a finding still
fails it. The recorded planted loop whose optimizer bypasses torch's optimizer hooks is judged in
test_judge_planted.py (`semantics_runs.SEMANTICS_INCONCLUSIVE`)."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.probes import evidence
from evalkit.probes.semantics import judge as judge_module
from evalkit.probes.semantics.judge import HOOKS, judge
from evalkit.probes.semantics.oracle import (
    CLIP_QUANTILE,
    Caliber,
    GradientOracle,
    ObservedStep,
    clip_norm_for,
    expected_update,
    observed_micro_ids,
    oracle_run_norms,
)


def replant_unclipped(job: evidence.JobEvidence) -> None:
    """The parameters rewritten as if every step had applied the expected unclipped update (float32 as recorded)."""
    oracle, rows = GradientOracle(job.config), {r["step"]: r for r in job.steps}
    theta = oracle.theta0
    for k in sorted(job.params):
        grads = {r: [oracle.micro_grad(theta, b) for b in micro] for r, micro in observed_micro_ids(job, k).items()}
        step = ObservedStep(k, float(rows[k]["lr"]), theta, theta, grads)
        theta = (theta + expected_update(step, None)).astype(np.float32).astype(np.float64)
        job.params[k] = theta


def assert_inconclusive(result, *words: str) -> str:
    """Inconclusive, not passed, no finding; its reason (the first note) and headline name each of `words`."""
    assert result.status == "inconclusive" and not result.passed and result.findings == [], result.notes[:3]
    assert result.reason.startswith("inconclusive: the evidence a pass requires is missing: "), result.reason
    for word in words:
        assert word in result.reason, (word, result.reason)
    assert result.headline.startswith("0 findings on missing evidence: ")
    assert result.figures["evidence_gaps"] >= 1
    return result.reason


def test_the_recorded_baseline_passes_on_full_evidence(recorded):
    result = judge(list(recorded.values()))
    assert result.status == "pass" and result.figures["evidence_gaps"] == 0 and result.headline == ""
    assert result.figures["steps_checked"] == result.figures["steps_asked"] == 50
    assert "a pass requires every planned job run (the clip job too)" in result.notes[0]
    for name in ("ws1-clip", "ws2-clip"):              # clipping changed most updates: it was tested
        binds = result.series[name]["clip_binds"]
        assert sum(binds) >= 5, (name, binds)


def test_no_step_observed_is_inconclusive_with_the_optimizer_hooks_named(jobs):
    for job in jobs.values():
        job.steps, job.micro, job.params = [], {0: []}, {}
    result = judge(list(jobs.values()))
    reason = assert_inconclusive(result, "no optimizer step was observed", "ws1-noclip, ws1-clip, ws2-noclip, ws2-clip")
    assert "global optimizer hooks" in reason
    assert any(HOOKS in note and "step a torch.optim.Optimizer" in note for note in result.notes)
    assert result.figures["steps_checked"] == 0 and result.figures["steps_asked"] == 50


def test_parameters_not_recorded_is_inconclusive(jobs):
    jobs["ws2-noclip"].params = {}
    assert_inconclusive(judge(list(jobs.values())), "no parameters recorded", "[ws2-noclip]")


def test_some_parameters_missing_is_inconclusive_with_the_first_step(jobs):
    del jobs["ws1-noclip"].params[7]                    # steps 7 and 8 lose their before or after
    assert_inconclusive(judge(list(jobs.values())), "parameters not recorded at 2 step(s) (first: step 7)")


def test_lr_not_recorded_is_inconclusive(jobs):
    for row in jobs["ws1-clip"].steps:
        row["lr"] = None
    assert_inconclusive(judge(list(jobs.values())), "LR not recorded at 10 step(s) (first: step 1)", "[ws1-clip]")


def test_unattributed_samples_are_inconclusive_not_a_data_order_finding(jobs):
    for job in jobs.values():                          # observe.sample_ids off: every micro-batch's ids are []
        for rows in job.micro.values():
            for m in rows:
                m["ids"] = []
    result = judge(list(jobs.values()))
    assert_inconclusive(result, "micro-batches without sample ids")
    assert any("data order and windows not checked" in note for note in result.notes)


def test_one_unattributed_sample_is_enough(jobs):
    jobs["ws2-clip"].micro[1][4]["ids"][0] = -1
    assert_inconclusive(judge(list(jobs.values())), "micro-batches without sample ids", "[ws2-clip]")


def test_no_micro_batch_records_is_inconclusive(jobs):
    jobs["ws1-noclip"].micro = {0: []}
    assert_inconclusive(judge(list(jobs.values())), "no micro-batch records")


def test_a_clip_that_changes_no_update_is_inconclusive(jobs):
    """A clip norm above every window's gradient: the clip job cannot tell clipped from unclipped."""
    job = jobs["ws1-clip"]
    job.config["train"]["grad_clip"] = 1e3
    replant_unclipped(job)                             # consistent with the (never binding) clip at 1e3
    result = judge(list(jobs.values()))
    assert_inconclusive(result, "clipping at 1000 changed no checked update", "[ws1-clip]")
    assert not any(result.series["ws1-clip"]["clip_binds"])


def test_a_clip_job_the_plan_left_out_is_inconclusive(jobs, monkeypatch):
    """The plan runs no clip job when the job without clipping gives no norm (oracle.clip_norm_for is None)."""
    monkeypatch.setattr(judge_module, "clip_norm_for", lambda job: None)
    del jobs["ws2-clip"]
    assert_inconclusive(judge(list(jobs.values())), "ws2-clip not run (ws2-noclip gave no clipping norm)")


def test_a_job_without_clipping_alone_is_not_missing_its_clip_job(jobs):
    """probe.clip=[false]: the plan asked for no clip job (the clip norm was there to choose)."""
    assert judge([jobs["ws1-noclip"]]).status == "pass"


def test_a_finding_fails_whatever_evidence_is_missing(jobs):
    jobs["ws2-noclip"].params = {}
    for row in jobs["ws1-noclip"].steps:
        row["lr"] *= 2
    result = judge(list(jobs.values()))
    assert result.status == "fail" and not result.inconclusive and result.headline == ""
    assert result.findings[0].code.startswith("lr.") or result.findings[0].code.startswith("unexplained")
    assert result.notes[0].startswith("besides the findings, the evidence a pass requires is missing: ")
    assert "no parameters recorded (no update checked) [ws2-noclip]" in result.notes[0]


def test_the_clip_norm_binds_from_the_clip_jobs_own_start(recorded):
    """The clip job's norm: the lowest decile of the windows' largest partial sums along the oracle's own run at the
    clip job's seed (the job without clipping's + 1), not of the job without clipping's run (another seed)."""
    free = recorded["ws1-noclip"]
    norm = clip_norm_for(free)
    seed = free.config["seed"] + 1
    norms = oracle_run_norms({**free.config, "seed": seed})
    partial = [n.largest_partial for n in norms if n.largest_partial is not None]
    assert norm == pytest.approx(float(np.percentile(partial, CLIP_QUANTILE)))
    # low enough that what a window has accumulated before its last micro-batch exceeds it on most windows (so
    # clipping per micro-batch shows), and the whole window's gradient on most steps
    assert sum(p > norm for p in partial) >= 0.8 * len(partial) and sum(n.window > norm for n in norms) >= 8
    assert recorded["ws1-clip"].config["seed"] == seed
    assert Caliber.of(recorded["ws1-clip"].config).grad_clip == pytest.approx(norm, rel=1e-5)
    assert clip_norm_for(evidence.JobEvidence("ws1-noclip", "r", "FAILED", {})) is None
