"""The `timing` observation profile: fewer hooks, only what throughput and memory need, the same summary keys
(the baseline adapter driven in-process on a tiny task), and one timed job end to end."""
from __future__ import annotations

import json
import os

import pytest
import torch
from omegaconf import OmegaConf
from torch.optim import optimizer as torch_optimizer

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.config import EvalkitConfig
from evalkit.observe.dtypes import compute_layer
from evalkit.observe.observer import Observer, ObserveSettings
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import mlp_regression
from evalkit.worker.run import make_job

THROUGHPUT_KEYS = {"samples_per_s", "steps_per_s", "step_time_median_s", "window_steps", "throughput_method"}
BATCH, ACCUM, STEPS, WARMUP = 8, 2, 6, 2


def _task():
    return mlp_regression(0, n_train=64, n_val=16, in_dim=4, hidden=8, depth=2, out_dim=1, noise=0.1)


def _hook_counts(task) -> dict[str, int]:
    """How many hooks torch holds where the observers register theirs."""
    return {"model_pre": len(task.model._forward_pre_hooks), "model": len(task.model._forward_hooks),
            "layer": len(compute_layer(task.model)._forward_hooks), "loss": len(task.loss_fn._forward_hooks),
            "step_pre": len(torch_optimizer._global_optimizer_pre_hooks),
            "step_post": len(torch_optimizer._global_optimizer_post_hooks)}


def _train(spool_dir: str, profile: str) -> tuple[list[dict], dict]:
    """The baseline loop, grad_accum=2, validation at the end, observed with `profile`: (records, summary)."""
    cfg = OmegaConf.structured(EvalkitConfig)
    cfg.train.merge_with({"batch_size": BATCH, "grad_accum": ACCUM, "max_steps": STEPS, "val_every": 0})
    task = _task()
    observer = Observer(task, SpoolWriter(spool_dir, 0), torch.device("cpu"), ObserveSettings(warmup_steps=WARMUP,
                        profile=profile)).attach()
    try:
        BaselineAdapter().fit(make_job(cfg, task, torch.device("cpu"), {"ckpt_dir": os.path.join(spool_dir, "c")}))
        summary = observer.finish()
    finally:
        observer.detach()
    with open(os.path.join(spool_dir, "records_rank0.jsonl")) as fh:
        return [json.loads(line) for line in fh], summary


def test_timing_profile_registers_fewer_hooks():
    task = _task()
    before = _hook_counts(task)
    added = {}
    for profile in ("full", "timing"):
        observer = Observer(task, None, torch.device("cpu"), ObserveSettings(warmup_steps=1, profile=profile)).attach()
        added[profile] = {k: v - before[k] for k, v in _hook_counts(task).items()}
        observer.detach()
        assert _hook_counts(task) == before
    assert added["full"] == {"model_pre": 1, "model": 1, "layer": 1, "loss": 1, "step_pre": 1, "step_post": 1}
    # No sample-id hook, no step pre hook (not resuming); the dtype hook only until the warm-up ends.
    assert added["timing"] == {"model_pre": 0, "model": 1, "layer": 1, "loss": 1, "step_pre": 0, "step_post": 1}


def test_timing_profile_records_one_light_step_per_optimizer_step(tmp_path):
    full_records, full = _train(str(tmp_path / "full"), "full")
    records, timing = _train(str(tmp_path / "timing"), "timing")
    steps = [r for r in records if r["kind"] == "step"]
    assert [s["step"] for s in steps] == list(range(1, STEPS + 1))
    assert [s["samples"] for s in steps] == [BATCH * ACCUM] * STEPS
    assert [s["micro_batches"] for s in steps] == [ACCUM] * STEPS
    assert all({"t", "wall", "dt"} <= set(s) for s in steps)
    assert not {"grad_norm", "loss_scale", "sched_steps"} & {k for s in steps for k in s}
    assert {r["kind"] for r in records} == {"step", "val"}          # no micro-batch, params or skip records
    # The loss and LR it keeps are the full profile's (the observers change nothing in the training).
    full_steps = [r for r in full_records if r["kind"] == "step"]
    assert [s["loss"] for s in steps] == [s["loss"] for s in full_steps]
    assert [s["lr"] for s in steps] == [s["lr"] for s in full_steps]
    assert [s["samples"] for s in steps] == [s["samples"] for s in full_steps]
    # The summary: the same throughput and memory keys as the full profile's, and its profile said.
    assert THROUGHPUT_KEYS <= set(timing) and THROUGHPUT_KEYS <= set(full)
    memory = {k for k in full if "mem" in k or "rss" in k}
    assert memory and memory <= set(timing)
    assert timing["window_steps"] == full["window_steps"] == STEPS - WARMUP
    assert timing["samples_per_s"] / timing["steps_per_s"] == pytest.approx(BATCH * ACCUM)
    assert (timing["observe_profile"], full["observe_profile"]) == ("timing", "full")
    assert "unattributed_samples" not in timing
    # dtypes read over the warm-up's forwards only; the full profile counts every training forward.
    assert timing["observed_dtypes"] == {"float32": WARMUP * ACCUM}
    assert full["observed_dtypes"] == {"float32": STEPS * ACCUM}
    (val,) = [r for r in records if r["kind"] == "val"]              # validation is kept, ids recovered
    assert val["step"] == STEPS and val["count"] == 16 and val["unattributed"] == 0


def test_skipped_fp16_step_is_a_skip_record_and_its_samples_do_not_count_into_the_next(tmp_path):
    task = _task()
    observer = Observer(task, SpoolWriter(str(tmp_path), 0), torch.device("cpu"), ObserveSettings(warmup_steps=0,
                        profile="timing")).attach()
    opt = torch.optim.SGD(task.model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    x, y = task.train_set.tensors
    for blow_up in (True, False):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = task.loss_fn(task.model(x[:8]), y[:8]) * (1e30 if blow_up else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    observer.finish()
    records = [json.loads(line) for line in (tmp_path / "records_rank0.jsonl").read_text().splitlines()]
    (skip,) = [r for r in records if r["kind"] == "skip"]
    assert skip["after_step"] == 0 and skip["micro_batches"] == 1 and skip["loss_scale"] == 2.0**16
    (step,) = [r for r in records if r["kind"] == "step"]
    assert step["step"] == 1 and step["micro_batches"] == 1 and step["samples"] == 8


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="profile 'fast'"):
        Observer(_task(), None, torch.device("cpu"), ObserveSettings(warmup_steps=0, profile="fast"))
