"""Calibration of the customization probe's line ratio (issue 44): a customization passes on its cost when it adds at
most `max_line_ratio` (2.0, conf/probe/customization.yaml) times the logical lines of the baseline's own
customization of the same kind, measured in the same run.

The figure is a count read from source (no noise: the same source gives the same count), so its false-alarm rate
and power are 0 and 1 by construction on each side of the line; what is calibrated here is where the line falls:
- on synthetic inputs, for every control size from 1 to 30 lines, floor(2 x control) lines pass and one more fails
  (both sides asserted, through the judge);
- on the counts of the recorded quick evaluation (tests/fixtures/verdict/evaluation.json: five real wrappers against
  the baseline's 7 + 7 lines): accelerate (1.0x, 1.0x), fabric and ignite (1.0x, 1.86x) and hf_trainer (1.71x,
  2.00x) pass, lightning (1.71x, 2.86x) fails on its callback. hf_trainer's callback sits exactly on the line: one
  logical line more in its customization (or one fewer in the baseline's) would fail it.
"""
from __future__ import annotations

import json

import pytest
from helpers import CONF, FIXTURES
from omegaconf import OmegaConf

from evalkit.probes.customization import judge as module
from evalkit.probes.evidence import JobEvidence

RATIO = float(OmegaConf.load(CONF / "probe" / "customization.yaml").customization.max_line_ratio)


def cost(lines: int) -> dict:
    return {"lines_added": lines, "wrapper_symbols": [], "hooks_overridden": [], "attributes_set": [], "notes": [],
            "private_touches": []}


@pytest.fixture
def cost_judge(monkeypatch):
    """The judge with both customizations verified in effect, so that only their cost decides:
    (loss lines, callback lines, the baseline's loss lines, the baseline's callback lines) -> result."""
    monkeypatch.setattr(module, "check_loss", lambda job, *a: module.Verification("loss", True, "ok"))
    monkeypatch.setattr(module, "check_callback", lambda job, *a: module.Verification("callback", True, "ok"))
    jobs = [JobEvidence("loss", "r1", "FINISHED", {}), JobEvidence("callback", "r2", "FINISHED", {})]

    def run(loss: int, callback: int, base_loss: int, base_callback: int):
        measured = {"limits": {"stop_at_step": 10, "max_line_ratio": RATIO, "max_private": 0},
                    "sources": {"loss": cost(loss), "callback": cost(callback)},
                    "control": {"trainer": "baseline", "sources": {"loss": cost(base_loss),
                                                                   "callback": cost(base_callback)}, "notes": []}}
        return module.judge(jobs, measured)
    return run


def test_the_line_is_the_configured_two():
    assert RATIO == 2.0


def test_both_sides_of_the_line_for_every_control_size(cost_judge):
    for control in range(1, 31):
        at_line = int(RATIO * control)
        inside = cost_judge(at_line, control, control, control)
        outside = cost_judge(at_line + 1, control, control, control)
        assert inside.passed and not inside.findings, control
        assert not outside.passed and not outside.inconclusive, control
        assert [f.code for f in outside.findings] == ["loss.lines"], control
        assert outside.figures["loss_line_ratio"] > RATIO >= inside.figures["loss_line_ratio"]


def recorded_counts() -> dict[str, dict[str, float]]:
    evaluation = json.loads((FIXTURES / "verdict" / "evaluation.json").read_text())
    return {p["trainer"]: p["figures"] | {"status": p["status"]} for p in evaluation["probes"]
            if p["probe"] == "customization" and p["trainer"] != "baseline"}


def test_the_recorded_wrappers_fall_on_the_side_their_counts_put_them(cost_judge):
    counts = recorded_counts()
    assert sorted(counts) == ["accelerate", "fabric", "hf_trainer", "ignite", "lightning"]
    calls = {}
    for trainer, f in counts.items():
        result = cost_judge(int(f["loss_lines"]), int(f["callback_lines"]), int(f["loss_baseline_lines"]),
                            int(f["callback_baseline_lines"]))
        calls[trainer] = "pass" if result.passed else "fail"
        assert calls[trainer] == f["status"], (trainer, f)       # the recorded run's own call, from its counts alone
    assert calls == {"accelerate": "pass", "fabric": "pass", "hf_trainer": "pass", "ignite": "pass",
                     "lightning": "fail"}
    assert counts["hf_trainer"]["callback_line_ratio"] == RATIO        # on the line: passes (at most 2x)
    hf = counts["hf_trainer"]
    assert not cost_judge(int(hf["loss_lines"]), int(hf["callback_lines"]) + 1, 7, 7).passed
