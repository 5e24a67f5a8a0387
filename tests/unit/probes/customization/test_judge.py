"""The customization probe's judge on synthetic evidence: every way a callback can miss (never, per micro-batch,
before the step, per epoch, a wrong value, no stop), and the cost limits (lines, private touches, a source that
could not be measured is never 0 lines)."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.probes.customization.checks import check_callback
from evalkit.probes.customization.judge import judge
from evalkit.probes.customization.plan import PARAM_NORM
from evalkit.probes.evidence import JobEvidence

STOP, MAX = 10, 16


def callback_job(calls: list[int], steps: int = STOP, value=lambda s: float(np.linalg.norm(np.full(3, s))),
                 status: str = "FINISHED") -> JobEvidence:
    job = JobEvidence("callback", "cb-run", status, {"train": {"max_steps": MAX}})
    job.steps = [{"step": s} for s in range(1, steps + 1)]
    job.params = {s: np.full(3, float(s)) for s in range(1, steps + 1)}
    job.values = [{"call": i, "step": s, "name": PARAM_NORM, "value": value(s)} for i, s in enumerate(calls, 1)]
    return job


def codes(verification) -> list[str]:
    return [f.code for f in verification.findings]


def test_one_report_after_each_step_and_a_stop_at_the_asked_step_is_verified():
    v = check_callback(callback_job(list(range(1, STOP + 1))), STOP)
    assert v.verified and v.findings == [] and v.figures == {"callback_calls": 10, "callback_steps_run": 10}


def test_a_callback_that_never_fires_and_never_stops_training():
    v = check_callback(callback_job([], steps=MAX), STOP)
    assert codes(v) == ["callback.never_fired", "callback.stop"]
    assert v.findings[1].title == "training did not stop when the callback asked"


def test_per_micro_batch_before_the_step_and_per_epoch_are_told_apart():
    per_micro = check_callback(callback_job([s for s in range(1, STOP + 1) for _ in (0, 1)]), STOP)
    assert codes(per_micro) == ["callback.per_micro_batch"]
    assert per_micro.findings[0].size.startswith("up to 2 reports per step (20 in 10 steps)")
    before = check_callback(callback_job(list(range(0, STOP))), STOP)
    assert codes(before) == ["callback.before_step"]
    per_epoch = check_callback(callback_job([8], steps=MAX), STOP)
    assert codes(per_epoch) == ["callback.missed_steps", "callback.stop"]
    assert "none after steps 1, 2, 3" in per_epoch.findings[0].size


def test_a_wrong_value_and_a_late_stop():
    wrong = check_callback(callback_job(list(range(1, STOP + 1)), value=lambda s: 1.0), STOP)
    assert codes(wrong) == ["callback.wrong_value"]
    late = check_callback(callback_job(list(range(1, STOP + 2)), steps=STOP + 1), STOP)
    assert codes(late) == ["callback.stop"] and late.findings[0].title == "training stopped late"


def test_a_failed_run_fails_its_customization():
    v = check_callback(callback_job([], status="FAILED"), STOP)
    assert not v.verified and codes(v) == ["callback.run_failed"]


def cost(lines: int, private: int = 0, notes=()) -> dict:
    return {"lines_added": lines, "wrapper_symbols": ["w.Callback"], "hooks_overridden": [],
            "attributes_set": [], "notes": list(notes),
            "private_touches": [{"kind": "attribute", "name": f"_x{i}", "line": i} for i in range(private)]}


CONTROL = {"loss": cost(7), "callback": cost(7)}     # the baseline's own customizations, as measured beside


def measured(loss: dict, callback: dict, control: dict | None = CONTROL, **limits) -> dict:
    return {"limits": {"stop_at_step": STOP, "max_line_ratio": 2.0, "max_private": 0, **limits},
            "sources": {"loss": loss, "callback": callback},
            **({"control": {"trainer": "baseline", "sources": control, "notes": []}} if control is not None else {})}


def test_the_cost_limits_are_the_configured_ones():
    good = callback_job(list(range(1, STOP + 1)))
    passing = judge([good], measured(cost(5), cost(7)))
    assert passing.inconclusive and passing.figures["callback_lines"] == 7   # the loss job did not run
    private = judge([good], measured(cost(5, private=1), cost(7)))
    assert [f.code for f in private.findings] == ["private"] and private.figures["private_touches"] == 1
    assert judge([good], measured(cost(5, private=1), cost(7), max_private=1)).findings == []


def test_a_source_that_could_not_be_parsed_is_not_measured_as_zero_lines():
    result = judge([callback_job(list(range(1, STOP + 1)))],
                   measured(cost(0, notes=["SyntaxError: invalid syntax (line 3)"]), cost(7)))
    assert "loss_lines" not in result.figures and result.inconclusive
    assert any("cost was not measured: SyntaxError" in n for n in result.notes)
    assert result.headline.startswith("loss ?, callback 7 lines")


@pytest.fixture
def both_jobs_verified(monkeypatch):
    """The judge on both customizations verified in effect (their checks are the tests above), so that only their
    cost decides: (loss lines, callback lines, the control's sources, limits) -> result."""
    from evalkit.probes.customization import judge as module

    monkeypatch.setattr(module, "check_loss", lambda job, *a: module.Verification("loss", True, "ok"))
    monkeypatch.setattr(module, "check_callback", lambda job, *a: module.Verification("callback", True, "ok"))
    jobs = [JobEvidence("loss", "r1", "FINISHED", {}), JobEvidence("callback", "r2", "FINISHED", {})]
    return lambda loss, callback, control=CONTROL, **limits: judge(jobs, measured(cost(loss), cost(callback), control,
                                                                                 **limits))


def test_the_line_budget_is_relative_to_the_baselines_own_lines_for_the_same_customization(both_jobs_verified):
    """Issue 28 (e): at most max_line_ratio x the control's lines, the control measured in the same probe run."""
    at_limit = both_jobs_verified(14, 7)                      # 2.00x the baseline's 7: within
    assert at_limit.passed and at_limit.figures["loss_line_ratio"] == 2.0
    assert at_limit.figures["loss_baseline_lines"] == 7 and at_limit.figures["callback_line_ratio"] == 1.0
    over = both_jobs_verified(15, 7)                          # 2.14x
    (finding,) = over.findings
    assert finding.code == "loss.lines" and not over.passed and not over.inconclusive
    assert finding.title == "the loss customization adds 15 logical lines, 2.14x the baseline's 7 for the same " \
                            "customization"
    assert finding.size == "limit 2x the baseline's lines, measured in this run (probe.customization.max_line_ratio)"
    assert both_jobs_verified(15, 7, max_line_ratio=3.0).passed
    doubled = both_jobs_verified(15, 7, control={"loss": cost(8), "callback": cost(7)})
    assert doubled.passed                                     # the same 15 lines, against a control of 8
    assert "| loss | yes: ok | 15 | 8 (1.88x) |" in doubled.sections[0]
    line = next(n for n in over.notes if n.startswith("threshold max_line_ratio = 2.0: "))
    assert "relative to the control measured in this probe run" in line
    assert any(n.startswith("threshold max_private = 0: ") for n in over.notes)


def test_without_the_baselines_lines_the_cost_cannot_pass(both_jobs_verified):
    no_control = both_jobs_verified(7, 7, control=None)
    assert no_control.inconclusive and not no_control.passed
    assert no_control.notes[0].startswith("no control for the lines of loss, callback: the baseline's own "
                                          "customization of the same kind was not measured in this run")
    broken = both_jobs_verified(7, 7, control={"loss": cost(0, notes=["SyntaxError"]), "callback": cost(7)})
    assert broken.inconclusive and "no control for the lines of loss:" in broken.notes[0]
    assert any("the baseline's loss customization's cost was not measured: SyntaxError" in n for n in broken.notes)
