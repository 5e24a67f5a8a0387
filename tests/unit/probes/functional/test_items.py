"""The functional probe's step check (items.step_problem): which recorded step numbers are a problem."""
from __future__ import annotations

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.items import final_metric, step_problem


def job(steps, skipped=0, val=()):
    return JobEvidence("fp16_mixed", "r", "FINISHED", {"train": {"max_steps": 12}}, steps=[{"step": s} for s in steps],
                       summary={"skipped_steps": skipped}, val=[{"step": s, "loss": 0.5} for s in val])


def test_windows_the_grad_scaler_skipped_count_as_taken():
    # resnet18 in fp16: GradScaler's first scale (2**16) overflows, 2 windows skipped, 10 numbered steps of 12
    assert step_problem(job(range(1, 11), skipped=2), 1, 12) == ("", None)


def test_a_job_that_stops_short_without_skipped_windows_is_named():
    assert step_problem(job(range(1, 11)), 1, 12) == ("stopped after step 10 of 12", 10)
    assert step_problem(job(range(1, 10), skipped=2), 1, 12) == ("stopped after step 9 of 12", 9)


def test_a_missing_step_is_still_named_with_skipped_windows():
    assert step_problem(job([1, 2, 4, 5, 6, 7, 8, 9, 10, 11], skipped=1), 1, 12) == ("step(s) 3 not recorded", 3)


def test_the_final_metric_is_the_last_windows_with_skipped_windows():
    assert final_metric(job(range(1, 11), skipped=2, val=(4, 8, 10))) == ("val/loss", 0.5)
    assert final_metric(job(range(1, 11), val=(4, 8, 10))) == ("val/loss", None)      # stopped short: none at 12
