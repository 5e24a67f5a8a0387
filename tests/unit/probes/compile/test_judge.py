"""The compile judge on evidence built here, for the exits its recordings do not take (test_judge_recorded.py judges
the recorded runs): a compiled job that failed, alone or with the baseline's, no compile record, the request
dropped, the timed rounds read as each loop's compiled/eager ratio, and the reasons named."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.probes.compile.judge import judge, reason
from evalkit.probes.evidence import JobEvidence

RECORD = {"frames": 2, "frames_ok": 2, "graphs": 2, "ops_captured": 14, "compile_s": 16.0, "cache": {},
          "graph_breaks": [], "recompiles": [
              {"origin": "wrapper", "message": "Recompiling function forward in a.py:1\n    triggered by the "
                                               "following guard failure(s):\n    - 0/0: GLOBAL_STATE changed: "
                                               "grad_mode \nUser stack trace:\n  evalkit/observe/x.py"}]}


def job(name: str, status: str = "FINISHED", trainer: str = "lightning", compile_record=None, **summary):
    tags = {"evalkit.failure_reason": "RuntimeError: boom"} if status != "FINISHED" else {}
    if compile_record is not None:
        summary["compile"] = compile_record
    return JobEvidence(name, "r", status, {"trainer": {"name": trainer}}, tags=tags,
                       steps=[{"step": 1, "loss": 1.0}], summary=summary)


def test_no_compiled_job_is_inconclusive():
    result = judge([job("truth-eager")])
    assert result.status == "inconclusive" and "did not run" in result.notes[0]


def test_a_compiled_job_that_failed_fails_naming_its_reason():
    result = judge([job("truth-eager"), job("truth-compiled", "FAILED"),
                    job("truth-baseline-compiled", trainer="baseline", compile_record=RECORD)])
    assert result.status == "fail"
    assert [f.code for f in result.findings] == ["compile.failed"]
    assert result.findings[0].size == "RuntimeError: boom"


def test_when_the_baseline_compiled_by_hand_failed_too_compile_itself_does_not_run_here():
    result = judge([job("truth-compiled", "FAILED"), job("truth-baseline-compiled", "FAILED", trainer="baseline")])
    assert result.status == "inconclusive" and "torch.compile does not run on this machine" in result.notes[0]


def test_a_finished_compiled_job_without_a_compile_record_is_inconclusive():
    result = judge([job("truth-compiled")])
    assert result.status == "inconclusive" and "no compile record" in result.notes[0]


def test_a_compile_request_the_wrapper_dropped_fails():
    dropped = {**RECORD, "frames": 0, "frames_ok": 0, "graphs": 0, "recompiles": []}
    result = judge([job("truth-compiled", compile_record=dropped),
                    job("truth-baseline-compiled", trainer="baseline", compile_record=RECORD)])
    assert result.status == "fail" and [f.code for f in result.findings] == ["compile.not_compiled"]
    assert "steps not judged (no eager run)" in result.headline


def test_the_baseline_alone_is_its_own_compiled_reference():
    result = judge([job("truth-compiled", trainer="baseline", compile_record=RECORD)])
    assert result.figures["baseline_compile_s"] == 16.0 and result.figures["recompiles"] == 1


def test_a_cell_names_what_it_did_not_judge():
    result = judge([job("truth-compiled", compile_record=RECORD),
                    job("truth-baseline-compiled", trainer="baseline", compile_record=RECORD)])
    assert "speed not timed" in result.headline
    assert any("run without --quick" in n for n in result.notes)
    assert "recompilation x1: GLOBAL_STATE changed: grad_mode" in result.notes


def test_reasons_are_dynamos_explanation_or_the_guard_that_failed_without_addresses():
    message = ("Graph break in user code at m.py:531\nGraph Break Reason: ...\n  Explanation: Skip inlining function "
               "<function _ResultCollection.log at 0x7fb749ba9440> since it was wrapped")
    assert reason(message) == "Skip inlining function <function _ResultCollection.log> since it was wrapped"
    assert reason(RECORD["recompiles"][0]["message"]) == "GLOBAL_STATE changed: grad_mode"


@pytest.mark.parametrize("slower", [0.5, 1.0, 2.0])
def test_each_loops_compiled_step_over_its_eager_one_from_the_rounds_taken_in_turns(slower):
    rng = np.random.default_rng(0)
    eager_s = 0.02 * (1 + 0.01 * rng.standard_normal(32))
    turns = {"eager": eager_s, "compiled": eager_s * slower * (1 + 0.01 * rng.standard_normal(32))}
    timed = [job(f"timed-{arm}", turns={"steps_per_block": 4, "blocks_s": list(s)}) for arm, s in turns.items()]
    result = judge([job("truth-compiled", compile_record=RECORD),
                    job("truth-baseline-compiled", trainer="baseline", compile_record=RECORD), *timed])
    f = result.figures
    assert f["compiled_over_eager_low"] < slower < f["compiled_over_eager_high"]
    assert f["compiled_over_eager"] == pytest.approx(slower, rel=0.02) and f["rounds"] == 32
    assert f"{f['compiled_over_eager']:.2f}x" in result.headline and "baseline_compiled_over_eager" not in f


def test_without_the_eager_job_what_compiling_changes_is_not_judged_and_the_cell_is_no_pass():
    result = judge([job("truth-compiled", compile_record=RECORD),
                    job("truth-baseline-compiled", trainer="baseline", compile_record=RECORD)])
    assert result.status == "inconclusive"
    assert result.notes[0].startswith("what compiling changes was not judged: the eager job did not finish")
