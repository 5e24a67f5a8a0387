"""A defaults-mode arm at another release than the quick start its adapter follows says so beside every judged cell
(issue 45): 'quick start of 2.6.6 followed; 2.7.0 installed'. Synthetic records, no process."""
from __future__ import annotations

from evalkit import names
from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.dimensions import NOT_RUN


def _verdict(installed: str):
    runs = records([ArmPlan("baseline"), ArmPlan("lightning", mode="defaults", probes={"stability": 1.0}),
                    ArmPlan("lightning")])
    for run in runs:
        if run.tags.get(names.TRAINER) == "lightning":
            run.tags[names.WRAPPER_VERSION] = installed
            if run.tags.get(names.MODE) == "defaults":
                run.tags[names.QUICK_START_VERSION] = "2.6.6"
    return build_verdict(runs, VerdictOptions())


def test_another_release_than_the_cited_one_is_said_beside_every_defaults_cell():
    verdict = _verdict("2.7.0")
    (defaults,) = [r for r in verdict.rows if r.key.mode == "defaults"]
    judged = {d: r for d, r in defaults.dimensions.items() if r.status != NOT_RUN}
    assert judged and all(r.figure.endswith("quick start of 2.6.6 followed; 2.7.0 installed") for r in judged.values())
    (aligned,) = [r for r in verdict.rows if r.key.mode == "aligned"]
    assert not any("quick start" in r.figure for r in aligned.dimensions.values())


def test_the_cited_release_installed_adds_nothing():
    (defaults,) = [r for r in _verdict("2.6.6").rows if r.key.mode == "defaults"]
    assert not any("quick start" in r.figure for r in defaults.dimensions.values())
