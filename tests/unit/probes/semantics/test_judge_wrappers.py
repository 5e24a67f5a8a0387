"""The semantic probe's judge on recorded runs of a real wrapper (tests/fixtures/semantics/wrappers/): Ignite's
quick start (`create_supervised_trainer`, defaults mode) cannot clip, so a run asking for clipping trains unclipped
(its adapter reports the deviation `clip.not_applied`: the recordings' effective configs were given their deviations'
codes by hand when the effective config became typed, their texts as recorded). Recorded with
`evalkit probe=semantics trainer=ignite trainer.mode=defaults probe.world_sizes=[1]` (pytorch-ignite 0.5.5), the
evidence taken from the probe run's `probe/semantics_evidence.json`:
- ignite.defaults.json.gz: the clip job at the norm the plan chooses now (oracle.clip_norm_for): the unapplied clip
  is a finding, `clip.not_applied`, with Ignite's own way to align it;
- ignite.defaults.quartile_clip.json.gz: the clip job at the plan's former norm (the lower quartile of the job
  without clipping's gradient norms, another seed): clipping would have changed none of the 3 updates Ignite's
  LR leaves nonzero, so the unapplied clip went unseen (the README's table had no clipping finding for Ignite); the
  judge now says the clip job's evidence is missing (issue 28) instead of letting clipping pass."""
from __future__ import annotations

import json

from helpers import FIXTURES
from semantics_runs import recorded_evidence

from evalkit.probes.semantics.judge import judge

WRAPPERS = FIXTURES / "semantics" / "wrappers"


def judged(name: str) -> dict:
    return json.loads(judge(recorded_evidence(WRAPPERS / f"{name}.json.gz")).to_json())


def test_ignite_quick_start_asked_to_clip_trains_unclipped_and_the_probe_names_it():
    result = judged("ignite.defaults")
    found = {f["code"]: f for f in result["findings"]}
    # judged from what each step saw (issue 29): its shuffled loader keeps each epoch's 1-sample last batch, and its
    # accumulation counts the global iteration, so windows run across epoch ends
    assert set(found) == {"lr.per_micro_batch", "order.shuffled", "clip.not_applied", "batch.partial",
                          "window.spans_epochs"}, sorted(found)
    assert found["window.spans_epochs"]["first_step"] == 4 and found["batch.partial"]["first_step"] == 4
    clip = found["clip.not_applied"]
    assert clip["job"] == "ws1-clip" and clip["first_step"] == 1 and clip["explained_by"]
    assert "clip_grad_norm_" in clip["knob"] and "create_supervised_trainer cannot clip" in clip["knob"]
    assert "has no gradient clipping" in clip["declared"]           # the adapter's own words, quoted
    assert "update 0.00x" not in clip["size"]                       # steps at LR 0 scale nothing
    assert sum(result["series"]["ws1-clip"]["clip_binds"]) == 3      # Ignite's LR is 0 after step 3
    assert result["figures"]["evidence_gaps"] == 0 and not result["inconclusive"]


def test_at_the_former_clip_norm_the_unapplied_clip_is_missing_evidence_not_a_pass():
    jobs = recorded_evidence(WRAPPERS / "ignite.defaults.quartile_clip.json.gz")
    result = judged("ignite.defaults.quartile_clip")
    assert "clip.not_applied" not in {f["code"] for f in result["findings"]}
    assert not any(result["series"]["ws1-clip"]["clip_binds"])
    clip = next(j for j in jobs if j.name == "ws1-clip").config["train"]["grad_clip"]
    assert result["notes"][0].startswith("besides the findings, the evidence a pass requires is missing: ")
    assert f"clipping at {clip:.6g} changed no checked update" in result["notes"][0]
    assert result["figures"]["evidence_gaps"] == 1


def test_poutyne_quick_start_lr_per_epoch_is_matched_past_max_steps_and_labelled_as_evalkits_setting():
    """Poutyne's quick start (poutyne.defaults.json.gz, recorded with `evalkit probe=semantics trainer=poutyne
    trainer.mode=defaults`, poutyne 1.19.0) has no scheduler: evalkit hands its per-step schedule to Poutyne's
    per-epoch LambdaLR callback, and Poutyne stops only at an epoch's end (12 steps for max_steps=10). The LR was
    once `unexplained.lr`: the epochs of the two steps past max_steps were unknown (issue 43). Now each step's LR is
    the schedule at its epoch, and the declared deviation says the pairing is evalkit's, not the page's."""
    from evalkit.contract.effective import EVALKITS_SETTING

    result = judged("poutyne.defaults")
    found = {f["code"]: f for f in result["findings"]}
    assert "unexplained.lr" not in found and "steps.extra" in found
    lr = found["lr.per_epoch"]
    assert lr["explained_by"][0] == "the scheduler stepped once per epoch (its count = epochs completed)"
    assert lr["declared"].startswith(f"{EVALKITS_SETTING}: defaults: the quick start has no scheduler")
    assert len(lr["evidence"]["steps"]) == 12


POUTYNE_PAGE = "https://poutyne.org/model.html#poutyne.Model.to"
NOT_JUDGED = f"ws2 not judged (documented-unsupported: {POUTYNE_PAGE})"


def refused_at_ws2() -> list:
    """Poutyne's ws2 jobs as recorded: refused as documented-unsupported, citing Model.to's page."""
    return [j for j in recorded_evidence(WRAPPERS / "poutyne.defaults.json.gz") if j.name.startswith("ws2")]


def test_poutynes_semantics_cell_names_world_size_2_it_did_not_judge():
    """Issue 44: Poutyne refuses world size 2 (documented): its cell read `fail (6 findings: ...)` or, with its ws1
    jobs passing, `pass (0 findings)`, with no word that world size 2 was never judged."""
    from probe_runs import verdict_cell

    result = judged("poutyne.defaults")
    assert result["headline"] == f"6 findings at ws1; {NOT_JUDGED}"
    assert result["figures"]["world_sizes_not_judged"] == 1 and result["figures"]["ws2_not_judged"] == 1
    ws1 = [j for j in recorded_evidence(FIXTURES / "semantics" / "baseline.json") if j.world_size == 1]
    passing = json.loads(judge(ws1 + refused_at_ws2()).to_json())
    assert passing["passed"] and passing["headline"] == f"0 findings at ws1; {NOT_JUDGED}"
    assert verdict_cell("semantics", passing, "poutyne").cell() == f"pass (0 findings at ws1; {NOT_JUDGED})"


def test_a_refusal_of_world_size_2_citing_no_page_of_poutynes_docs_is_poutynes_finding():
    from dataclasses import replace

    from evalkit import names

    ws1 = [j for j in recorded_evidence(FIXTURES / "semantics" / "baseline.json") if j.world_size == 1]
    readme = [replace(j, tags={**j.tags, names.FAILURE_REASON: j.failure_reason.replace(
        POUTYNE_PAGE, "see the README")}) for j in refused_at_ws2()]
    result = judge(ws1 + readme)
    assert not result.passed and {f.code for f in result.findings} == {"job.failed"}
    assert "citation not a page of poutyne's docs: see the README" in result.findings[0].size
    assert result.headline == "2 findings; ws2: citation not a page of poutyne's docs: see the README"
    assert result.figures["world_sizes_not_judged"] == 0
