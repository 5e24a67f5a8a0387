"""The functional probe's judge on synthetic job records: each item's failure planted and named, documented refusals
shown as not claimed and every other refusal failed (a silent substitution in both modes), `logs` shown but never
counted, declared workarounds failing their item; and its plan (phase 1, then the resume from a copy of the
plain job's checkpoints). No process starts: the judge is a pure function of the records."""
from __future__ import annotations

import json
import os

from omegaconf import OmegaConf

from evalkit import names
from evalkit.probes.catalog import load_probe
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.functional.items import ITEMS

PROBE = load_probe("functional")


MAX, EVERY = 12, 4


def job(name: str, *, steps=range(1, MAX + 1), val=(4, 8, 12), ckpts=(4, 8, 12), ckpt_bytes=1000,
        status="FINISHED", reason="", tags=None, effective=None, distributed=None) -> JobEvidence:
    config = {"train": {"max_steps": MAX, "val_every": EVERY, "ckpt_every": EVERY},
              "distributed": distributed or {"name": "none", "world_size": 1, "init_by": "adapter"},
              "trainer": {"name": "wrapper", "docs": ["example.org/wrapper"]}}      # DOCS is a page of its docs
    all_tags = {names.VAL_METRIC: "mse", **({names.FAILURE_REASON: reason} if reason else {}), **(tags or {})}
    evidence = JobEvidence(name, f"run-{name}", status, config, all_tags)
    evidence.steps = [{"step": s, "loss": 1.0 / s, "lr": 1e-3} for s in steps]
    evidence.val = [{"step": s, "loss": 0.3, "mse": 0.3} for s in val]
    evidence.summary = {"last_step": max(steps, default=0),
                        "checkpoints": [{"name": f"step_{s:08d}.pt", "after_step": s, "bytes": ckpt_bytes}
                                        for s in ckpts]}
    evidence.effective = effective or {}
    return evidence


def every_job(**changed) -> list[JobEvidence]:
    """The probe's seven jobs, all as they should be; `changed` replaces some by name."""
    jobs = {"plain": job("plain"), "baseline": job("baseline", ckpt_bytes=500),
            "bf16_mixed": job("bf16_mixed"), "fp16_mixed": job("fp16_mixed"),
            "ws2": job("ws2", distributed={"name": "ddp", "world_size": 2, "init_by": "adapter"}),
            "pg": job("pg", distributed={"name": "ddp", "world_size": 2, "init_by": "evalkit"}),
            "resume": job("resume", steps=range(9, MAX + 1), val=(12,), ckpts=(12,))}
    jobs.update(changed)
    return [j for j in jobs.values() if j is not None]


def judge(jobs) -> ProbeResult:
    result = PROBE.judge(jobs)
    ProbeResult.from_json(result.to_json())          # the stored form round-trips
    assert result.to_markdown("t").count("###") == len(result.sections)
    return result


def rows(result: ProbeResult) -> dict[str, list[str]]:
    """item -> its cells in the report's item table."""
    table = result.sections[0].splitlines()[4:]
    return {cells[0]: cells for cells in ([c.strip() for c in line.split("|")[1:-1]] for line in table)}


def failed(result: ProbeResult) -> dict[str, str]:
    """item -> the reason of each failed item, from its finding."""
    return {f.code.removeprefix("functional."): f.size for f in result.findings}


# ------------------------------------------------------------------ everything there
def test_every_item_passes_and_the_checkpoint_size_is_a_figure_against_the_baselines():
    result = judge(every_job())
    assert result.passed and result.findings == [] and not result.inconclusive
    assert set(rows(result)) == set(ITEMS)
    assert all(r[1] == "pass" for name, r in rows(result).items() if name != "logs")
    assert rows(result)["logs"][1] == "not counted"
    assert result.headline == "9/9 items; checkpoint 2.00x the baseline's"
    assert result.figures["checkpoint_bytes"] == 1000 and result.figures["baseline_checkpoint_bytes"] == 500
    assert result.figures["checkpoint_ratio"] == 2.0 and result.figures["items_total"] == 9
    assert result.figures["items_not_counted"] == 1
    assert "| 12 | step_00000012.pt | 1,000 | 500 | 2.00x |" in result.sections[1]
    cells = rows(result)["checkpoints_at_cadence"]
    assert cells[3:] == ["plain", "run-plain", "evalkit/summary_rank0.json"]      # job, run, file


# ------------------------------------------------------------------ the plain job's items
def test_an_extra_checkpoint_and_a_missing_one_are_named():
    result = judge(every_job(plain=job("plain", ckpts=(4, 8, 10))))
    assert not result.passed
    reason = failed(result)["checkpoints_at_cadence"]
    assert "extra checkpoint after step 10 (step_00000010.pt)" in reason
    assert "no checkpoint kept from after step(s) 12" in reason
    (finding,) = result.findings
    assert finding.title == "does not checkpoint at the asked cadence" and finding.first_step == 10
    assert finding.evidence == {"run_id": "run-plain", "file": "evalkit/summary_rank0.json"}
    assert result.headline.startswith("8/9 items")


def test_a_checkpoint_written_before_training_is_extra():
    result = judge(every_job(plain=job("plain", ckpts=(0, 4, 8, 12))))
    assert "extra checkpoint after step 0" in failed(result)["checkpoints_at_cadence"]


def test_no_checkpoint_listing_fails_and_says_where_it_comes_from():
    plain = job("plain")
    del plain.summary["checkpoints"]
    reason = failed(judge(every_job(plain=plain)))["checkpoints_at_cadence"]
    assert "no checkpoint listing" in reason and "observe.profile=full" in reason


def test_a_missing_validation_and_a_sanity_validation_before_training_are_named():
    result = judge(every_job(plain=job("plain", val=(0, 4, 12))))
    reason = failed(result)["validates_at_cadence"]
    assert reason == "no validation after step(s) 8; validation after step(s) 0 not asked"
    assert result.findings[0].first_step == 0


def test_a_validation_run_twice_at_the_end_is_named():
    reason = failed(judge(every_job(plain=job("plain", val=(4, 8, 12, 12)))))["validates_at_cadence"]
    assert reason == "validated 2x after step 12"


def test_training_past_max_steps_and_stopping_short_fail():
    assert failed(judge(every_job(plain=job("plain", steps=range(1, 14)))))["trains_to_max_steps"] == \
        "trained past max_steps: last step 13, asked 12"
    assert failed(judge(every_job(plain=job("plain", steps=range(1, 11)))))["trains_to_max_steps"] == \
        "stopped after step 10 of 12"


def test_a_failed_plain_job_fails_its_items_with_its_reason():
    plain = job("plain", steps=range(1, 6), status="FAILED", reason="RuntimeError: boom")
    result = judge(every_job(plain=plain))
    reasons = failed(result)
    assert reasons["trains_to_max_steps"] == "not shown: plain ended FAILED: RuntimeError: boom"
    assert {"validates_at_cadence", "checkpoints_at_cadence", "exports_final_metrics"} <= set(reasons)
    assert "logs" not in reasons and rows(result)["logs"][1] == "not counted"
    assert any(n == "job(s) plain did not finish: RuntimeError: boom" for n in result.notes)


def test_logs_read_evalkits_own_records_so_they_are_shown_and_never_counted():
    """Issue 28: no item that cannot fail counts toward a pass. evalkit's hooks record each step's loss and LR
    whatever the wrapper does, so `logs` is out of the count, said in its row and the notes, whatever it reads."""
    plain = job("plain")
    plain.steps[6]["loss"] = None
    result = judge(every_job(plain=plain))
    cells = rows(result)["logs"]
    assert cells[1] == "not counted" and "no finite loss at step(s) 7" in cells[2]
    assert cells[2].startswith("evalkit's own records (hooks on the loss and the optimizer), not the wrapper's: "
                               "not counted")
    assert "logs" not in failed(result) and result.figures["items_total"] == 9
    assert any(n.startswith("logs: shown, not counted in the items") for n in result.notes)


def test_the_wrappers_own_output_is_a_figure_not_a_requirement():
    plain = job("plain")
    plain.memory = [{"step": 4, "log_bytes": 0}, {"step": 12, "log_bytes": 698}]
    result = judge(every_job(plain=plain))
    assert result.passed and result.figures["log_bytes"] == 698
    assert "the wrapper's own output: 698 bytes" in rows(result)["logs"][2]


def test_a_non_finite_final_metric_fails_the_export():
    plain = job("plain")
    plain.val[-1]["mse"] = float("nan")
    assert failed(judge(every_job(plain=plain)))["exports_final_metrics"] == "val/mse at the last step (12) is nan"


# ------------------------------------------------------------------ resume
def test_a_resume_that_restarts_at_step_1_fails():
    reason = failed(judge(every_job(resume=job("resume", steps=range(1, MAX + 1)))))["resumes"]
    assert reason == ("resumed from the checkpoint after step 8: first recorded step 1, expected 9 "
                      "(started over instead of continuing)")


def test_a_resume_that_repeats_a_step_fails():
    reason = failed(judge(every_job(resume=job("resume", steps=[9, 10, 10, 11, 12]))))["resumes"]
    assert reason.endswith("step(s) 10 recorded more than once")


def test_a_resume_continues_after_the_latest_copied_checkpoint():
    """plain kept no step-8 checkpoint: the resume starts from step 4's (and checkpoints fail on their own)."""
    result = judge(every_job(plain=job("plain", ckpts=(4, 12)), resume=job("resume", steps=range(5, MAX + 1))))
    assert "resumes" not in failed(result) and "checkpoints_at_cadence" in failed(result)
    assert rows(result)["resumes"][2].startswith("resumed from the checkpoint after step 4: trained steps 5..12")


def test_no_resume_without_a_checkpoint_to_resume_from():
    result = judge(every_job(plain=job("plain", ckpts=(12,)), resume=None))
    assert failed(result)["resumes"] == "plain kept no checkpoint written after a step up to 8 to resume from"


def test_the_resume_reports_whether_it_continued_bit_for_bit():
    same = judge(every_job())
    assert "equal the uninterrupted run's, bit for bit" in rows(same)["resumes"][2]
    resumed = job("resume", steps=range(9, MAX + 1))
    resumed.steps[0]["loss"] *= 1.01
    shifted = judge(every_job(resume=resumed))
    assert shifted.passed and "differ from the uninterrupted run's by up to 1%" in rows(shifted)["resumes"][2]


# ------------------------------------------------------------------ what the adapter claims
def refused(message: str, *kind: str, **where: str) -> str:
    """The failure reason the worker records for an adapter's UnsupportedCombination (worker.run.error_summary)."""
    from evalkit.contract import UnsupportedCombination
    from evalkit.worker.run import error_summary

    return error_summary(UnsupportedCombination(message, *kind, **where))


DOCS = "https://example.org/wrapper/precision"
DOCUMENTED = refused("fp8 has no wrapper equivalent", "documented-unsupported", documented_at=DOCS)
SWAPPED = refused("fabric turns precision='16-mixed' into bf16-mixed on CPU; fp16_mixed cannot run on CPU",
                  "silent-substitution")


def test_a_precision_refused_as_documented_unsupported_is_not_claimed_and_names_where():
    result = judge(every_job(fp16_mixed=job("fp16_mixed", steps=(), status="FAILED", reason=DOCUMENTED)))
    assert result.passed
    cells = rows(result)["precisions.fp16_mixed"]
    assert cells[1] == "not claimed"
    assert cells[2] == f"refused by the adapter, documented as unsupported ({DOCS}): fp8 has no wrapper equivalent"
    assert result.headline == ("8/8 items; not claimed: fp16_mixed (documented-unsupported: https://example.org/wrapper/"
                               "precision); checkpoint 2.00x the baseline's")
    assert result.figures["items_not_claimed"] == 1


def test_a_precision_refused_because_the_wrapper_would_swap_it_fails():
    """Issue 28 (a): an aligned adapter refusing fp16 on CPU because the wrapper would silently run another precision
    is no exemption: the item fails, as the swap itself does in defaults mode (next test)."""
    result = judge(every_job(fp16_mixed=job("fp16_mixed", steps=(), status="FAILED", reason=SWAPPED)))
    assert not result.passed and not result.inconclusive
    reason = failed(result)["precisions.fp16_mixed"]
    assert reason == ("refused by the adapter because the wrapper would run something other than asked (a silent "
                      "substitution, not a documented limit): fabric turns precision='16-mixed' into bf16-mixed on "
                      "CPU; fp16_mixed cannot run on CPU")
    assert result.headline.startswith("8/9 items") and result.figures["items_not_claimed"] == 0
    (finding,) = result.findings
    assert finding.title == "does not run fp16_mixed" and finding.observed == "silent-substitution"


def test_a_refusal_that_does_not_say_its_kind_is_no_exemption():
    plain_refusal = refused("fp16 is awkward here")
    assert plain_refusal == "UnsupportedCombination: fp16 is awkward here"
    result = judge(every_job(fp16_mixed=job("fp16_mixed", steps=(), status="FAILED", reason=plain_refusal)))
    reason = failed(result)["precisions.fp16_mixed"]
    assert reason.startswith("refused by the adapter without naming where the wrapper documents it as unsupported")
    assert reason.endswith(": fp16 is awkward here") and not result.passed


def test_a_precision_failing_otherwise_fails():
    broken = job("bf16_mixed", steps=range(1, 4), status="FAILED", reason="RuntimeError: dtype mismatch")
    assert failed(judge(every_job(bf16_mixed=broken)))["precisions.bf16_mixed"] == \
        "bf16_mixed ended FAILED: RuntimeError: dtype mismatch"


def test_a_precision_silently_run_as_another_fails():
    swapped = job("fp16_mixed", tags={names.PRECISION_MISMATCH: "requested fp16_mixed (float16), observed float32"})
    assert failed(judge(every_job(fp16_mixed=swapped)))["precisions.fp16_mixed"] == \
        "ran another precision than asked: requested fp16_mixed (float16), observed float32"


def test_refusing_evalkits_process_group_fails_where_world_size_2_runs():
    own_group = refused("needs its own process group", "documented-unsupported", documented_at=DOCS)
    pg = job("pg", steps=(), status="FAILED", reason=f"rank 0: {own_group} (exit codes [1, 1])")
    reason = failed(judge(every_job(pg=pg)))["evalkit_process_group"]
    assert reason.startswith("refused by the adapter, though it runs world size 2: needs its own process group")
    no_ddp = refused("no DDP", "documented-unsupported", documented_at=DOCS)
    ws2 = job("ws2", steps=(), status="FAILED", reason=f"rank 0: {no_ddp} (exit codes [1, 1])")
    both = judge(every_job(pg=pg, ws2=ws2))
    assert both.passed and rows(both)["world_size_2"][1] == rows(both)["evalkit_process_group"][1] == "not claimed"
    swapped = refused("the wrapper sees world size 1", "silent-substitution")
    ws2 = job("ws2", steps=(), status="FAILED", reason=f"rank 0: {swapped} (exit codes [1, 1])")
    neither = judge(every_job(pg=pg, ws2=ws2))                 # a substitution at ws2 exempts neither
    assert set(failed(neither)) == {"world_size_2", "evalkit_process_group"}


def test_a_world_size_2_job_that_crashes_fails():
    crashed = job("ws2", steps=(1,), status="FAILED", reason="rank 1: worker killed by SIGKILL (exit codes [-9, 1])")
    assert failed(judge(every_job(ws2=crashed)))["world_size_2"].startswith("ws2 ended FAILED: rank 1: worker killed")


# ------------------------------------------------------------------ a refusal recorded, and its citation (issue 44)
POUTYNE_PAGE = "https://poutyne.org/model.html#poutyne.Model.to"


def poutyne_refused(name: str, where: str = POUTYNE_PAGE) -> JobEvidence:
    """Job `name` refused as Poutyne refused world size 2 in a recorded probe run (its failure reason and trainer
    config, tests/fixtures/semantics/wrappers/poutyne.defaults.json.gz), citing `where`."""
    from helpers import FIXTURES
    from semantics_runs import recorded_evidence

    recorded = next(j for j in recorded_evidence(FIXTURES / "semantics" / "wrappers" / "poutyne.defaults.json.gz")
                    if j.name == "ws2-noclip")
    refused = job(name, steps=(), status="FAILED", reason=recorded.failure_reason.replace(POUTYNE_PAGE, where),
                  distributed={"name": "ddp", "world_size": 2, "init_by": "evalkit" if name == "pg" else "adapter"})
    refused.config["trainer"] = recorded.config["trainer"]
    return refused


def test_the_cell_names_what_a_documented_refusal_left_unclaimed_and_where_it_is_documented():
    """Issue 44: the headline read "7/7 items, world_size_2, evalkit_process_group not claimed" with no word of the
    documentation that exempts them; it names the page now, and the cell shows it."""
    from probe_runs import verdict_cell

    result = judge(every_job(ws2=poutyne_refused("ws2"), pg=poutyne_refused("pg")))
    assert result.passed and result.figures["items_not_claimed"] == 2
    assert result.headline == ("7/7 items; not claimed: world_size_2, evalkit_process_group (documented-unsupported: "
                               f"{POUTYNE_PAGE}); checkpoint 2.00x the baseline's")
    cell = verdict_cell("functional", json.loads(result.to_json()), "poutyne")
    assert cell.cell() == f"pass ({result.headline})"


def test_a_refusal_citing_no_page_of_the_wrappers_docs_is_an_undocumented_refusal_and_says_why():
    result = judge(every_job(ws2=poutyne_refused("ws2", "see the README"), pg=poutyne_refused("pg", "see the README")))
    assert not result.passed and set(failed(result)) == {"world_size_2", "evalkit_process_group"}
    reason = failed(result)["world_size_2"]
    assert reason.startswith("refused by the adapter as documented-unsupported, but citation not a page of poutyne's "
                             "docs: see the README")
    assert result.headline == ("7/9 items; world_size_2, evalkit_process_group: citation not a page of poutyne's "
                               "docs: see the README; checkpoint 2.00x the baseline's")
    assert result.figures["items_not_claimed"] == 0


# ------------------------------------------------------------------ workarounds
def test_a_declared_workaround_fails_its_item_and_names_it():
    hack = "patches the sampler's epoch counter (undocumented)"
    result = judge(every_job(plain=job("plain", effective={"workarounds": {"resumes": hack}}),
                             resume=job("resume", steps=range(9, 13), effective={"workarounds": {"resumes": hack}})))
    (finding,) = result.findings
    assert finding.code == "functional.resumes" and finding.declared == hack
    assert finding.title == "reaches 'load a checkpoint and continue' only through an undocumented workaround"
    assert finding.size.startswith(f"reached only through an undocumented workaround: {hack}")
    assert "workarounds" in finding.evidence["file"]


def test_a_workaround_for_an_item_family_covers_each_precision_but_the_baselines_report_does_not_count():
    result = judge(every_job(bf16_mixed=job("bf16_mixed", effective={"workarounds": {"precisions": "casts by hand"}}),
                             baseline=job("baseline", effective={"workarounds": {"logs": "not the wrapper's"}})))
    assert set(failed(result)) == {"precisions.bf16_mixed", "precisions.fp16_mixed"}


# ------------------------------------------------------------------ plan
def probe_cfg():
    return OmegaConf.create({"seed": 0, "hardware": {"name": "cpu"}, "probe": {"name": "functional"}})


def test_the_plan_runs_phase_1_then_the_resume_from_a_copy_of_the_plain_checkpoints(tmp_path):
    first, notes = PROBE.plan(probe_cfg(), {})
    assert [j.name for j in first] == ["plain", "baseline", "bf16_mixed", "fp16_mixed", "ws2", "pg"] and notes == []
    by_name = {j.name: j.overrides for j in first}
    assert by_name["baseline"]["trainer"] == "baseline" and "trainer" not in by_name["plain"]
    assert by_name["plain"]["train.schedule"] == "constant" and by_name["plain"]["train.ckpt_every"] == 4
    assert by_name["fp16_mixed"]["precision.grad_scaler"] is True and by_name["pg"]["distributed.init_by"] == "evalkit"
    assert by_name["ws2"]["distributed.world_size"] == 2 and by_name["ws2"]["distributed.init_by"] == "adapter"

    run_dir = tmp_path / "probe" / "plain"
    (run_dir / "checkpoints" / "step_00000008").mkdir(parents=True)       # a directory entry (Accelerate's layout)
    (run_dir / "checkpoints" / "step_00000008" / "model.bin").write_text("8")
    for step in (4, 12):
        (run_dir / "checkpoints" / f"step_{step:08d}.pt").write_text(str(step))
    (run_dir / names.JOB_FILE).write_text(json.dumps({"ckpt_dir": str(run_dir / "checkpoints")}))
    plain = job("plain")
    plain.summary["checkpoints"] = [{"name": "step_00000004.pt", "after_step": 4, "bytes": 1},
                                    {"name": "step_00000008", "after_step": 8, "bytes": 1},
                                    {"name": "step_00000012.pt", "after_step": 12, "bytes": 2}]
    plain.tags.update({names.RUN_DIR: str(run_dir), names.CHECKPOINT_DIR: str(run_dir / "checkpoints")})
    done = {j.name: job(j.name) for j in first} | {"plain": plain}
    (resume,), notes = PROBE.plan(probe_cfg(), done)
    source = tmp_path / "probe" / "resume-source"
    assert resume.name == "resume" and resume.overrides["resume_from"] == str(source / "checkpoints")
    assert sorted(os.listdir(source / "checkpoints")) == ["step_00000004.pt", "step_00000008"]
    assert (source / "checkpoints" / "step_00000008" / "model.bin").read_text() == "8"
    assert (source / names.JOB_FILE).exists()           # evalkit compares the writer's settings on resume
    assert PROBE.plan(probe_cfg(), done | {"resume": job("resume")}) == ([], [])


def test_no_resume_is_planned_without_a_checkpoint_up_to_step_8():
    first, _ = PROBE.plan(probe_cfg(), {})
    done = {j.name: job(j.name) for j in first} | {"plain": job("plain", ckpts=(12,))}
    jobs, notes = PROBE.plan(probe_cfg(), done)
    assert jobs == [] and notes == ["resume not run: plain kept no checkpoint written after a step up to 8"]


def test_the_probe_is_registered_with_its_dimension():
    from evalkit.probes.catalog import load_probe

    probe = load_probe("functional")
    assert (probe.name, probe.dimension, probe.timed) == ("functional", "functional", False)
    assert probe.task(probe_cfg()) == "mlp_regression"
    assert probe.caliber(probe_cfg()).startswith("functional|hw=cpu|bs=16|steps=12|val=4|ckpt=4|resume_at=8")


def test_no_threshold_is_absolute_and_the_notes_say_so():
    """Issue 28 (f): the checkpoint size is a figure against the baseline's in the same run, never judged."""
    big = judge(every_job(plain=job("plain", ckpt_bytes=10**9)))
    assert big.passed and big.figures["checkpoint_ratio"] == 2e6
    assert any(n.startswith("thresholds: none is absolute") for n in big.notes)
