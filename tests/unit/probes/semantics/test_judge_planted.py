"""The semantic probe's judge on the recorded evidence of every planted wrong semantics (issue 10's variants:
tests/planted/planted_loop.py, recorded by scripts/record_probe_fixtures.py into tests/fixtures/semantics/planted/).

Each recording is what the probe's judge read in a real `evalkit probe=semantics` run of one variant; judged here
again, it must name the variant's finding at its first step, explained by an alternative semantics; the correct
planted loop yields nothing, and passes. A loop whose evidence falls short (semantics_runs.SEMANTICS_INCONCLUSIVE,
issue 28: its optimizer bypasses torch's optimizer hooks) is inconclusive, with what is missing, never a pass.
tests/e2e/test_probe_semantics.py trains one variant of each family live and checks that its result still equals
the recording's."""
from __future__ import annotations

import json

import pytest
from semantics_runs import (
    RECORDED_SEMANTICS,
    SEMANTICS_INCONCLUSIVE,
    SEMANTICS_PLANTED,
    SEMANTICS_SETTINGS,
    assert_semantic_finding,
    assert_semantic_inconclusive,
    recorded_evidence,
    semantics_live_groups,
)

from evalkit.probes.semantics.judge import judge


def judged(variant: str) -> dict:
    return json.loads(judge(recorded_evidence(RECORDED_SEMANTICS / f"{variant}.json.gz")).to_json())


def test_every_planted_variant_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in RECORDED_SEMANTICS.glob("*.json.gz")}
    assert recorded == set(SEMANTICS_PLANTED) | set(SEMANTICS_INCONCLUSIVE) | {"none"}, \
        "run: python scripts/record_probe_fixtures.py"


def test_the_correct_planted_loop_yields_nothing():
    result = judged("none")
    assert result["passed"] and result["findings"] == [] and not result["inconclusive"]
    # the SGD, AdamW and short-epoch jobs
    assert result["figures"]["steps_checked"] == result["figures"]["steps_asked"] == 30


def test_windows_carried_across_epochs_show_on_every_step_of_the_short_epoch_job():
    """Epochs of 2 micro-batches, windows of 3: the carried layout differs from the careful loop's on every step
    of the short-epoch job (its windows hold 3 micro-batches from two epochs, not 2 from one), not only at the
    main job's epoch ends."""
    (finding,) = [f for f in judged("window.short_carried")["findings"] if f["code"] == "window.short_carried"]
    assert finding["job"] == "ws1-noclip, ws1-shortepoch", finding
    jobs = {j.name: j for j in recorded_evidence(RECORDED_SEMANTICS / "window.short_carried.json.gz")}
    (short,) = [f for f in judge([jobs["ws1-shortepoch"]]).findings if f.code == "window.short_carried"]
    assert short.first_step == 1 and short.size == f"micro-batches per step {[3] * 10}", short.line()


@pytest.mark.parametrize("variant", sorted(SEMANTICS_INCONCLUSIVE))
def test_a_planted_loop_without_evidence_is_inconclusive_never_a_pass(variant):
    jobs = recorded_evidence(RECORDED_SEMANTICS / f"{variant}.json.gz")
    assert [j.name for j in jobs] == ["ws1-noclip", "ws1-clip"]      # the clip job ran too
    assert all(job.status == "FINISHED" for job in jobs), variant
    result = judged(variant)
    assert_semantic_inconclusive(result, variant)
    assert "[ws1-noclip, ws1-clip]" in result["notes"][0] and "global optimizer hooks" in result["notes"][0]
    assert result["figures"]["steps_checked"] == 0 and result["figures"]["steps_asked"] == 20


@pytest.mark.parametrize("variant", sorted(SEMANTICS_PLANTED))
def test_each_planted_wrong_semantics_is_named_with_its_first_step(variant):
    jobs = recorded_evidence(RECORDED_SEMANTICS / f"{variant}.json.gz")
    assert jobs and all(job.status == "FINISHED" and job.steps for job in jobs), variant   # real evidence
    assert_semantic_finding(judged(variant), variant)


def test_the_e2e_tier_trains_one_variant_of_each_family_live():
    live = [v for _, variants in semantics_live_groups() for v in variants]
    families = [v.split(".")[0] for v in live]
    assert sorted(families) == sorted({v.split(".")[0] for variants, _ in SEMANTICS_SETTINGS for v in variants})
    assert len(families) == 14 and "ddp.grad_summed" in live and "lr.per_micro_batch" in live
    assert set(SEMANTICS_INCONCLUSIVE) <= set(live)
