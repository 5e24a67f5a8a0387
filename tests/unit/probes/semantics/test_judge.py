"""The semantic probe's judge on recorded baseline runs (tests/fixtures/semantics/baseline.json, made by
scripts/record_semantics_fixture.py), and on copies planted in memory with a known wrong semantics: the LR,
ids or records are changed, and the parameters re-simulated from the planted rule with the float64 oracle
(rounded to float32 as recorded), so that exactly one semantics differs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from semantic_plants import codes, only, replant_updates, set_stream

from evalkit.probes import evidence
from evalkit.probes.semantics.explain_order import UNIDENTIFIED_SHUFFLE, _distributed, _random_sampler
from evalkit.probes.semantics.explain_update import Model, predict
from evalkit.probes.semantics.explain_windows import layout_groups
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.oracle import (
    Caliber,
    GradientOracle,
    expected_update,
    expected_windows,
    observed_steps,
)


# ------------------------------------------------------------------ the real baseline
def test_recorded_baseline_has_no_finding(recorded):
    result = judge(list(recorded.values()))
    assert result.passed, [f.line() for f in result.findings]
    assert result.figures["steps_checked"] == 50 and result.figures["jobs"] == 5
    # the float32 loop against the float64 oracle: at most a tenth of the allowance (measured 0.066, ws2-clip,
    # whose clipped updates are small beside the float32 rounding of the parameters)
    for job in recorded.values():
        cal, oracle = Caliber.of(job.config), GradientOracle(job.config)
        for step in observed_steps(job, oracle):
            predicted = expected_update(step, cal.grad_clip)
            assert np.linalg.norm(step.delta - predicted) < 0.1 * step.allowance(predicted), (job.name, step.step)
    assert set(result.series) == set(recorded)
    assert max(abs(s - 1) for s in result.series["ws2-clip"]["update_scale"]) < 1e-4


def test_expected_windows_end_each_epoch_on_a_short_window(recorded):
    ws1 = expected_windows(Caliber.of(recorded["ws1-noclip"].config))
    ws2 = expected_windows(Caliber.of(recorded["ws2-noclip"].config))
    assert [w.size for w in ws1] == [3, 3, 3, 1, 3, 3, 3, 1, 3, 3]
    assert [w.size for w in ws2] == [3, 2] * 5
    # the short-epoch job: each epoch (2 micro-batches) is one short window, a step per epoch
    short = expected_windows(Caliber.of(recorded["ws1-shortepoch"].config))
    assert [(w.size, w.epoch) for w in short] == [(2, e) for e in range(10)]
    assert all(ws2[k].ids[0] != ws2[k].ids[1] for k in range(10))


# ------------------------------------------------------------------ LR
def _plant_lr(job, lr_of) -> None:
    for row in job.steps:
        row["lr"] = lr_of(row["step"])
    replant_updates(job)


@pytest.mark.parametrize("code, first, lr_of", [
    ("lr.per_micro_batch", 2, lambda cal, k: cal.lr_at(sum(3 if (j % 4) else 1 for j in range(1, k)))),
    ("lr.warmup_off_by_one", 1, lambda cal, k: cal.lr_at(k)),
    ("lr.per_epoch", 2, lambda cal, k: cal.lr_at((k - 1) // 4)),
    ("lr.warmup_unit", 1, lambda cal, k: cal.lr_at(k - 1, cal.warmup_steps * 3, cal.max_steps * 3)),
])
def test_lr_semantics_are_named(jobs, code, first, lr_of):
    job = jobs["ws1-noclip"]
    cal = Caliber.of(job.config)
    _plant_lr(job, lambda k: lr_of(cal, k))
    finding = only(judge([job]), code)
    assert finding.first_step == first and finding.explained_by and finding.knob


def test_unknown_lr_is_unexplained_and_a_declared_deviation_is_quoted(jobs):
    job = jobs["ws1-noclip"]
    job.effective = {"deviations": [{"code": "lr", "text": "the LR scheduler is stepped by the wrapper's own rule"}]}
    _plant_lr(job, lambda k: 0.05 * (1.1 if k == 5 else 1.0) * Caliber.of(job.config).factor()(k - 1))
    finding = only(judge([job]), "unexplained.lr")
    assert finding.first_step == 5 and finding.unexplained
    assert finding.declared == "the LR scheduler is stepped by the wrapper's own rule"   # its family, by code


def test_a_deviation_that_is_evalkits_choice_is_labelled_as_evalkits_setting(jobs):
    """Issue 43: where the quick start's page makes no choice (no scheduler on Lightning's or Poutyne's page), the
    pairing evalkit chose is labelled as its own in the finding, not read as the wrapper's behaviour."""
    from evalkit.contract.effective import EVALKITS_SETTING

    for by, label in (("evalkit", f"{EVALKITS_SETTING}: "), ("wrapper", "")):
        job = jobs["ws1-noclip"]
        job.effective = {"deviations": [{"code": "lr", "text": "the schedule stepped by its own rule", "by": by}]}
        factor = Caliber.of(job.config).factor()
        _plant_lr(job, lambda k, factor=factor: 0.05 * (1.1 if k == 5 else 1.0) * factor(k - 1))
        assert only(judge([job]), "unexplained.lr").declared == f"{label}the schedule stepped by its own rule"


ALREADY = {"code": "resume.finished_run_restarts",
           "text": "Engine.run on a state that already reached max_iters starts a new run from iteration 0"}


@pytest.mark.parametrize("deviations, declared", [
    ([ALREADY], ""),                 # "lr" is in "already": words never link a finding to a deviation
    ([ALREADY, {"code": "lr.per_epoch", "text": "the scheduler steps once per epoch"}], ""),   # another lr code
    ([ALREADY, {"code": "lr.warmup_off_by_one", "text": "warm-up one step ahead"}], "warm-up one step ahead"),
])
def test_a_finding_is_matched_to_the_deviation_of_its_code_never_by_words(jobs, deviations, declared):
    job = jobs["ws1-noclip"]
    job.effective = {"deviations": deviations}
    _plant_lr(job, Caliber.of(job.config).lr_at)
    result = judge([job])
    assert only(result, "lr.warmup_off_by_one").declared == declared
    unmatched = [d for d in deviations if d["text"] != declared]
    assert [n for n in result.notes if n.startswith("declared by the adapter, not observed")] == [
        f"declared by the adapter, not observed at this caliber: {d['text']} [{d['code']}]" for d in unmatched]


def test_same_finding_in_two_jobs_is_reported_once(jobs):
    for name in ("ws1-noclip", "ws1-clip"):
        cal = Caliber.of(jobs[name].config)
        _plant_lr(jobs[name], cal.lr_at)
    finding = only(judge([jobs["ws1-noclip"], jobs["ws1-clip"]]), "lr.warmup_off_by_one")
    assert finding.job == "ws1-noclip, ws1-clip"


# ------------------------------------------------------------------ updates
@pytest.mark.parametrize("name, code, first, model", [
    ("ws1-noclip", "loss.window_summed", 1, Model(division="none")),
    ("ws1-noclip", "window.short_underscaled", 4, Model(division="accum")),
    ("ws2-noclip", "ddp.grad_summed", 1, Model(reduce="sum")),
    ("ws1-noclip", "clip.unasked", 1, Model(clip="unasked", norm=0.6)),
    ("ws1-clip", "clip.per_micro_batch", 1, Model(clip="micro_each")),
    ("ws1-noclip", "wd.unasked", 1, Model(decay="coupled", rate=0.05)),
])
def test_update_semantics_are_named(jobs, name, code, first, model):
    job = jobs[name]
    cal = Caliber.of(job.config)
    if model.clip in ("asked", "micro_each"):
        model = replace(model, norm=cal.grad_clip)
    replant_updates(job, lambda s: predict(s, model, cal.grad_accum))
    finding = only(judge([job]), code)
    assert finding.first_step <= first + 1 and not finding.unexplained
    if code == "window.short_underscaled":
        assert "update 0.33x expected at short windows" in finding.size
    if code == "clip.unasked":
        assert "0.6" in finding.explained_by[0]
    if code == "wd.unasked":
        assert "0.05" in finding.explained_by[0]


@pytest.mark.parametrize("name", ["ws1-clip", "ws2-clip"])
def test_clipping_what_has_accumulated_after_each_micro_batch_is_caught_at_the_plans_norm(jobs, name):
    """The plan's clip norm (oracle.clip_norm_for) lies below what most windows have accumulated before their last
    micro-batch: a loop that clips the running sum after every micro-batch, instead of the window once, updates
    differently, and the judge names it."""
    job = jobs[name]
    cal = Caliber.of(job.config)
    replant_updates(job, lambda s: predict(s, Model(clip="micro_running", norm=cal.grad_clip), cal.grad_accum))
    finding = only(judge([job]), "clip.per_micro_batch")
    assert not finding.unexplained and "accumulated gradient clipped" in finding.explained_by[0]


def test_window_summed_size_is_in_words(jobs):
    job = jobs["ws1-noclip"]
    replant_updates(job, lambda s: predict(s, Model(division="none"), 3))
    assert "update 3.00x expected at full windows" in only(judge([job]), "loss.window_summed").size


@pytest.mark.parametrize("name", ["ws1-noclip", "ws2-clip"])
def test_a_scaled_update_stays_unexplained(jobs, name):
    job = jobs[name]
    cal = Caliber.of(job.config)
    replant_updates(job, lambda s: 0.9 * predict(s, Model(norm=cal.grad_clip), cal.grad_accum))
    finding = only(judge([job]), "unexplained.update")
    assert finding.first_step == 1 and finding.explained_by == [] and "0.90x" in finding.size


def test_recorded_params_scaled_without_resimulation_are_not_explained(jobs):
    """The real fp32 trajectory with every update doubled after step 5: unexplained from step 6 on."""
    job = jobs["ws1-noclip"]
    theta = {k: v.copy() for k, v in job.params.items()}
    for k in range(6, 11):
        job.params[k] = job.params[k - 1] + 2 * (theta[k] - theta[k - 1])
    finding = only(judge([job]), "unexplained.update")
    assert finding.first_step == 6


# ------------------------------------------------------------------ order and windows
def test_random_sampler_order_is_identified(jobs):
    job = jobs["ws1-noclip"]
    epochs = _random_sampler(41, 42)
    stream = [epochs(e, 0)[i:i + 4] for e in range(3) for i in range(0, 40, 4)]
    sizes = [w.size for w in expected_windows(Caliber.of(job.config))]
    groups, at = {}, 0
    for k, size in enumerate(sizes, 1):
        groups[k], at = {0: stream[at:at + size]}, at + size
    set_stream(job, groups)
    replant_updates(job)
    finding = only(judge([job]), "order.shuffled")
    assert finding.first_step == 1
    assert any("RandomSampler with a generator seeded 42" in w for w in finding.explained_by)


def test_permuted_ids_are_a_shuffle_no_known_sampler_reproduces(jobs):
    """Every sample still once per epoch, in an order no candidate sampler draws: named as a shuffle whose
    sampler is unidentified (not as nothing: the observation is a permutation)."""
    job = jobs["ws1-noclip"]
    a, b = job.micro[0][3]["ids"], job.micro[0][4]["ids"]        # step 2's first two micro-batches
    a[0], b[0] = b[0], a[0]
    replant_updates(job)
    finding = only(judge([job]), "order.shuffled")
    assert finding.first_step == 2 and finding.explained_by == [UNIDENTIFIED_SHUFFLE]
    assert finding.size == "no known sampler reproduces the order"


def test_distributed_sampler_interleave_and_padding_are_named(jobs):
    job = jobs["ws2-noclip"]
    epochs = _distributed(41, 2, 0, drop_last=False, fixed_epoch=False)
    per_rank = {r: [epochs(e, r)[i:i + 4] for e in range(5) for i in range(0, 21, 4)] for r in (0, 1)}
    groups, at = {}, 0          # 6 micro-batches per epoch (the last of 1 sample): windows 3, 3
    for k in range(1, 11):
        groups[k], at = {r: per_rank[r][at:at + 3] for r in (0, 1)}, at + 3
    set_stream(job, groups)
    replant_updates(job)
    result = judge([job])
    # the loader keeps each epoch's 1-sample last micro-batch: a partial batch besides the order and its padding
    assert codes(result) == ["batch.partial", "order.distributed_interleave", "order.padded"], \
        [f.line() for f in result.findings]
    assert "DistributedSampler(shuffle=True, seed=0, drop_last=False" in result.findings[1].explained_by[0]


def test_two_seeds_with_one_order_is_a_fixed_seed(jobs):
    clip = jobs["ws1-clip"]
    for row, source in zip(clip.micro[0], jobs["ws1-noclip"].micro[0]):
        row["ids"] = list(source["ids"])
    replant_updates(clip)
    result = judge([jobs["ws1-noclip"], clip])
    assert codes(result) == ["order.fixed_seed"], [f.line() for f in result.findings]
    assert "seed 0" in result.findings[0].explained_by[0]


@pytest.mark.parametrize("name, layout, code, first", [
    ("ws1-noclip", "carried", "window.short_carried", 4), ("ws1-noclip", "dropped", "window.short_dropped", 4),
    # epochs shorter than a window: windows cut across epochs differ from the first step on, and on every step
    ("ws1-shortepoch", "carried", "window.short_carried", 1), ("ws1-shortepoch", "leading", "window.first_single", 1),
])
def test_short_window_layouts_are_named(jobs, name, layout, code, first):
    job = jobs[name]
    cal = Caliber.of(job.config)
    from evalkit.probes.semantics.explain_order import samplers
    set_stream(job, layout_groups(cal, samplers(cal)[0], layout, 10, [0]))
    replant_updates(job)
    finding = only(judge([job]), code)
    assert finding.first_step == first


# ------------------------------------------------------------------ records
def test_validation_before_training_is_named(jobs):
    job = jobs["ws1-noclip"]
    job.val.insert(0, {**job.val[0], "step": 0, "batches": 1})
    finding = only(judge([job]), "forward.before_training")
    assert finding.first_step == 0


def test_validation_cadence_in_micro_batches_is_named(jobs):
    job = jobs["ws1-noclip"]
    job.val = [{**job.val[0], "step": k} for k in (1, 2, 4, 6, 8, 9, 10)]   # after micro-batches 4, 8, 12, ...
    finding = only(judge([job]), "val.cadence")
    assert finding.first_step == 1
    assert any("every 4 micro-batches" in w for w in finding.explained_by)


def test_records_checks(jobs):
    job = jobs["ws2-noclip"]
    job.steps = job.steps[:-1]          # the last step gone, its validation (after step 10) left: a cadence finding
    job.micro[1][0]["dtype"] = "bfloat16"
    job.val[0]["train_mode_batches"] = 2
    job.micro[0][0]["train_mode"] = False
    result = judge([job])
    assert sorted(codes(result)) == ["micro.train_mode", "precision.mismatch", "steps.fewer", "val.cadence",
                                     "val.train_mode"]
    cadence = next(f for f in result.findings if f.code == "val.cadence")
    assert cadence.size == "at steps [4, 8, 10] instead of [4, 8, 9]"


def test_a_wrapper_that_changes_the_thread_count_is_a_finding(jobs):
    job = jobs["ws1-noclip"]
    job.config["hardware"]["threads"], job.summary["threads_at_end"] = 2, 1
    finding = only(judge([job]), "threads.changed")
    assert (finding.expected, finding.observed) == (2, 1)
    job.summary["threads_at_end"] = 2
    assert judge([job]).findings == []


def test_failed_job_is_a_finding_with_its_reason(jobs):
    job = jobs["ws2-clip"]
    job.status, job.tags = "FAILED", {**job.tags, "evalkit.failure_reason": "gloo refused"}
    job.tags = {**job.tags, evidence.names.FAILURE_REASON: "gloo refused"}
    finding = only(judge([job]), "job.failed")
    assert "gloo refused" in finding.size


def test_a_documented_refusal_is_no_semantics_finding_but_every_job_refused_is_no_pass(jobs):
    """A wrapper that documents it cannot run world size 2 (Poutyne) has no semantics there to compare: noted, the
    functional column counts it; the jobs it ran are judged; a refusal of another kind is still a finding."""
    reason = ("UnsupportedCombination: world size 2: no multi-process training "
              "[refusal: documented-unsupported, see https://poutyne.org/model.html]")
    poutyne = {"name": "poutyne", "_target_": "evalkit.adapters.poutyne.PoutyneAdapter"}     # its page is of its docs
    refused = {name: replace(job, status="FAILED", tags={**job.tags, evidence.names.FAILURE_REASON: reason},
                             config={**job.config, "trainer": poutyne})
               for name, job in jobs.items() if name.startswith("ws2")}
    result = judge([*(j for n, j in jobs.items() if n.startswith("ws1")), *refused.values()])
    assert "job.failed" not in codes(result) and not result.inconclusive
    assert any("not judged: refused as documented-unsupported" in n and "poutyne.org" in n for n in result.notes)
    nothing = judge(list(refused.values()))
    assert nothing.inconclusive and not nothing.passed and "no job of the truth caliber ran" in nothing.headline
    plain = {n: replace(j, tags={**j.tags, evidence.names.FAILURE_REASON: "UnsupportedCombination: no"})
             for n, j in refused.items()}
    assert "job.failed" in codes(judge(list(plain.values())))


def test_result_serialises_for_the_runner(jobs):
    from evalkit.probes.findings import ProbeResult

    job = jobs["ws1-noclip"]
    replant_updates(job, lambda s: predict(s, Model(division="none"), 3))
    result = judge([job])
    again = ProbeResult.from_json(result.to_json())
    assert [f.code for f in again.findings] == ["loss.window_summed"] and not again.passed
    assert "loss.window_summed" not in result.to_markdown("semantics")     # people read titles, not codes
    assert "summed, not averaged" in result.to_markdown("semantics")
