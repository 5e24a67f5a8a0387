"""The verdict's tests on a recorded evaluation: tests/fixtures/verdict/evaluation.json keeps, per probe, trainer and
mode, what one real quick evaluation's newest probe run recorded (status, headline, reason, figures, findings; five
wrappers, aligned and defaults modes). `recorded_records` turns it back into the run records the store would return:
each probe run as the probe runner logs it, beside synthetic training jobs for the baseline and each aligned wrapper
(defaults mode runs probes only, as in the evaluation)."""
from __future__ import annotations

import json

import pytest
from helpers import FIXTURES

from evalkit import names
from evalkit.analysis.records import RunRecord
from evalkit.analysis.synthetic import ArmPlan, records

EVALUATION = FIXTURES / "verdict" / "evaluation.json"


def probe_record(entry: dict) -> RunRecord:
    """A probe run as the runner logs one: pass metric (unless inconclusive), figures, status/headline/reason tags,
    and its `probe/<dim>.json` read back."""
    dim, status = entry["probe"], entry["status"]
    tags = {names.ROLE: names.ROLE_PROBE, names.PROBE: dim, names.TRAINER: entry["trainer"], names.MODE: entry["mode"],
            names.TASK: "mlp_regression", names.CALIBER: f"{dim}|recorded", names.probe_status(dim): status}
    tags.update({k: v for k, v in ((names.probe_headline(dim), entry["headline"]),
                                   (names.probe_reason(dim), entry["reason"])) if v})
    metrics = {} if status == "inconclusive" else {names.probe_pass(dim): float(status == "pass")}
    metrics.update({f"probe/{dim}/{k}": float(v) for k, v in entry["figures"].items()})
    result = {"dimension": dim, "passed": status == "pass", "inconclusive": status == "inconclusive",
              "findings": entry["findings"], "figures": entry["figures"], "headline": entry["headline"],
              "notes": [entry["reason"]] if status == "inconclusive" and entry["reason"] else []}
    return RunRecord(entry["run_id"], "FINISHED", tags, metrics, probe_results={dim: result})


@pytest.fixture(scope="session")
def evaluation() -> dict:
    return json.loads(EVALUATION.read_text())


@pytest.fixture(scope="session")
def recorded_records(evaluation):
    """`build(drop=())`: the records of the recorded evaluation, without the probe runs `drop` names as
    (probe, trainer, mode)."""
    probes = [p for p in evaluation["probes"] if p["trainer"] != "baseline"]
    aligned = sorted({p["trainer"] for p in probes if p["mode"] == "aligned"})
    jobs = records([ArmPlan("baseline", seeds=(0, 1, 2))] + [ArmPlan(t, seeds=(0, 1, 2)) for t in aligned], n_steps=20)

    def build(drop=()) -> list[RunRecord]:
        return jobs + [probe_record(p) for p in probes if (p["probe"], p["trainer"], p["mode"]) not in set(drop)]

    return build
