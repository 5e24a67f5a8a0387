"""The probe machinery without training: a probe's jobs get the probe's task and settings, the semantic
probe plans its clipped job from the unclipped one's evidence, and the verdict attaches a probe run to the
wrapper's arms."""
from __future__ import annotations

import pytest

from evalkit import names
from evalkit.analysis.arms import group_arms
from evalkit.analysis.records import RunRecord
from evalkit.config import validate
from evalkit.controller.probe_run import ProbeRun, probe_job_config
from evalkit.probes.base import PlannedJob
from evalkit.probes.catalog import load_probe, probe_names
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.semantics.plan import TRUTH_CALIBER


@pytest.fixture
def compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from evalkit.config import register_configs

    register_configs()

    def make(*overrides):
        with initialize_config_module("evalkit.conf", version_base=None):
            return hydra_compose("config", overrides=list(overrides))
    return make


def test_a_probe_job_trains_the_probes_caliber_task_when_the_config_names_the_calibers_task(compose):
    cfg = compose("probe=semantics", "trainer=baseline", "task.hidden=512", "precision=bf16_mixed", "seed=7")
    probe = load_probe("semantics")
    child = probe_job_config(cfg, probe, PlannedJob("ws2-noclip", {**TRUTH_CALIBER, "distributed.world_size": 2,
                                                                  "distributed.name": "ddp", "seed": 7}))
    assert validate(child) == []
    assert child.task.name == "mlp_regression" and child.task.n_train == 41 and child.task.hidden == 16
    assert child.precision.name == "fp32" and child.precision.autocast_dtype is None
    assert child.distributed.world_size == 2 and child.probe.name == "none"
    assert child.run_name == "semantics-baseline-aligned-ws2-noclip"
    assert cfg.task.hidden == 512 and cfg.precision.name == "bf16_mixed"     # the probe's own config is left as it was


def test_on_a_teams_task_a_probe_job_trains_it_with_the_calibers_training_and_data_sizes(compose):
    cfg = compose("probe=semantics", "trainer=baseline", "task=tiny_lm", "task.hidden=24", "seed=7")
    probe = load_probe("semantics")
    jobs, notes = probe.plan(cfg, {})
    child = probe_job_config(cfg, probe, next(j for j in jobs if j.name == "ws1-noclip"))
    assert validate(child) == [] and notes == []
    assert child.task.name == "tiny_lm" and child.task.hidden == 24 and child.task.vocab_size == 64
    assert child.task.n_train == 41 and child.task.n_val == 19 and child.train.grad_accum == 3
    assert probe.task(cfg) == "tiny_lm"


def test_a_third_party_task_gets_the_data_sizes_it_takes_and_a_note_for_those_it_does_not(compose):
    cfg = compose("probe=stability", "trainer=baseline", "task=third_party", "task.name=mine",
                  "task._target_=evalkit.tasks.resnet.resnet18", "+task.extra.n_train=100",
                  "+task.extra.n_val=10", "+task.extra.image_size=8", "+task.extra.channels=1", "+task.extra.width=4",
                  "+task.extra.classes=3", "+task.extra.noise=1.0")
    probe = load_probe("stability")
    jobs, _ = probe.plan(cfg, {})
    by_name = {j.name: probe_job_config(cfg, probe, j) for j in jobs}
    assert validate(by_name["reference"]) == []
    assert by_name["reference"].task.extra.n_train == 320 and by_name["reference"].task.extra.width == 4
    assert by_name["other-model"].task.extra.width == 8     # twice as wide: its checkpoint fits no reference model
    cfg = compose("probe=stability", "trainer=baseline", "task=third_party", "task.name=mine",
                  "task._target_=logging.basicConfig")
    jobs, notes = probe.plan(cfg, {})
    assert "other-model" not in {j.name for j in jobs} and any("other-model not run" in n for n in notes)
    assert any("takes no n_train argument" in n for n in notes)


def test_probe_settings_are_checked_before_anything_runs(compose):
    assert validate(compose("probe=semantics", "probe.world_sizes=[0]")) == [
        "probe.world_sizes=[0] is out of range (allowed: one or more values, each >= 1): set it within that range, "
        "e.g. probe.world_sizes=[1,2]"]
    assert validate(compose("probe=semantics", "probe.clip=[]")) == [
        "probe.clip=[] runs no job: e.g. probe.clip=[false,true]"]
    every = ", ".join(sorted(probe_names()))          # the catalog's, whatever probes it holds
    assert (f"probe.name=semantic is not one of none, {every}: did you mean probe.name=semantics?") in validate(
        compose("probe=semantics", "probe.name=semantic"))


def test_the_clipped_job_waits_for_the_unclipped_one_and_clips_where_the_oracle_says(compose, monkeypatch):
    import evalkit.probes.semantics.oracle as oracle

    monkeypatch.setattr(oracle, "clip_norm_for", lambda job: 0.123456789)
    cfg = compose("probe=semantics", "seed=3")
    probe = load_probe("semantics")
    first, notes = probe.plan(cfg, {})
    assert [j.name for j in first] == ["ws1-noclip", "ws2-noclip", "ws1-adamw", "ws1-shortepoch",
                                       "ws1-tokens", "ws2-tokens"] and notes == []
    assert (first[4].overrides["task"], first[4].overrides["seed"]) == ("tiny_lm", 7)
    assert (first[5].overrides["task"], first[5].overrides["seed"]) == ("tiny_lm", 7)
    assert first[5].overrides["distributed.world_size"] == 2       # per-rank and global token means differ there
    assert (first[2].overrides["train.optimizer"], first[2].overrides["seed"]) == ("adamw", 5)   # waits for nothing
    # an epoch of exactly 2 micro-batches, shorter than the window of 3; SGD, another seed
    short = first[3].overrides
    assert (short["task.n_train"], short["train.grad_accum"], short["train.optimizer"], short["seed"]) == \
        (8, 3, "sgd", 6)
    assert first[0].overrides["seed"] == 3 and first[1].overrides["distributed.world_size"] == 2
    done = {j.name: JobEvidence(j.name, "r", "FINISHED", {}) for j in first}
    second, _ = probe.plan(cfg, done)
    assert [(j.name, j.overrides["seed"], j.overrides["train.grad_clip"]) for j in second] == [
        ("ws1-clip", 4, 0.123457), ("ws2-clip", 4, 0.123457)]
    done.update({j.name: JobEvidence(j.name, "r", "FINISHED", {}) for j in second})
    assert probe.plan(cfg, done) == ([], [])


def test_no_clipped_job_when_the_unclipped_one_gave_no_gradient(compose, monkeypatch):
    import evalkit.probes.semantics.oracle as oracle

    monkeypatch.setattr(oracle, "clip_norm_for", lambda job: None)
    cfg = compose("probe=semantics", "probe.world_sizes=[1]")
    probe = load_probe("semantics")
    jobs, notes = probe.plan(cfg, {"ws1-noclip": JobEvidence("ws1-noclip", "r", "FAILED", {}),
                                   "ws1-adamw": JobEvidence("ws1-adamw", "r", "FINISHED", {}),
                                   "ws1-shortepoch": JobEvidence("ws1-shortepoch", "r", "FINISHED", {}),
                                   "ws1-tokens": JobEvidence("ws1-tokens", "r", "FINISHED", {})})
    assert jobs == [] and notes == ["ws1-clip not run: ws1-noclip recorded no gradient to choose a clipping norm from"]


def _run(role, trainer, mode, caliber, **extra):
    tags = {names.ROLE: role, names.TRAINER: trainer, names.MODE: mode, names.TASK: extra.pop("task", "mlp"),
            names.CALIBER: caliber}
    return RunRecord(f"{trainer}-{mode}-{caliber}-{role}", "FINISHED", tags, extra)


def test_a_probe_run_joins_every_arm_of_its_wrapper_and_mode_and_stands_alone_otherwise():
    records = [_run("job", "lightning", "aligned", "c1"), _run("job", "lightning", "aligned", "c2"),
               _run("job", "lightning", "defaults", "c1"),
               _run("probe", "lightning", "aligned", "truth", **{names.probe_pass("semantics"): 1.0}),
               _run("probe", "fabric", "aligned", "truth", **{names.probe_pass("semantics"): 0.0}),
               _run("probe", "fabric", "aligned", "timed", **{names.probe_pass("performance"): 1.0})]
    arms = group_arms(records)
    with_probe = {(k.trainer, k.mode, k.caliber) for k, a in arms.items() if any(r.role == "probe" for r in a.runs)}
    assert with_probe == {("lightning", "aligned", "c1"), ("lightning", "aligned", "c2"),
                          ("fabric", "aligned", "probes only")}    # fabric's two probes: one row
    assert not any(r.role == "probe" for k, a in arms.items() if k.mode == "defaults" for r in a.runs)


def test_an_arm_seen_only_through_its_probes_says_why_its_comparisons_did_not_run():
    from evalkit.verdict import VerdictOptions, build_verdict

    records = [_run("job", "baseline", "aligned", "c1"),
               _run("probe", "fabric", "defaults", "truth", **{names.probe_pass("semantics"): 0.0})]
    (row,) = build_verdict(records, VerdictOptions()).rows
    assert (row.key.trainer, row.key.caliber) == ("fabric", "probes only")
    assert row.dimensions["semantics"].status == "fail"
    assert row.dimensions["consistency"].cell() == "not run (no training jobs in this mode: only its probes)"


def test_a_probe_that_stops_names_the_wrappers_job_that_crashed_unplanted_not_its_planted_faults():
    def job(name, status, reason="", faults=None):
        tags = {names.FAILURE_REASON: reason} if reason else {}
        return JobEvidence(name, name + "-id", status, {"faults": faults or {"kill_after_step": 0}}, tags)

    run = ProbeRun.__new__(ProbeRun)           # its jobs only: no store, no config
    run.done = {"killed": job("kill-between", "FAILED", "worker exited with SIGKILL", {"kill_after_step": 12}),
                "refused": job("fp16", "FAILED", "UnsupportedCombination: fp16 needs CUDA"),
                "ok": job("reference", "FINISHED")}
    assert run.crashed_job() is None           # a planted kill and a refusal are not crashes
    run.done["broken"] = job("resume-between", "FAILED", "RuntimeError: Error(s) in loading state_dict")
    assert run.crashed_job() == "resume-between: RuntimeError: Error(s) in loading state_dict"
