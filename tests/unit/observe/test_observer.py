"""The observers, driven by a hand-rolled loop with known truth (fast, in-process)."""
from __future__ import annotations

import json

import pytest
import torch

from evalkit.observe.observer import Observer, ObserveSettings
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import mlp_regression


def _task():
    return mlp_regression(0, n_train=64, n_val=16, in_dim=4, hidden=8, depth=2, out_dim=1, noise=0.1)


def _records(tmp_path):
    return [json.loads(line) for line in (tmp_path / "records_rank0.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("deferred", [False, True])    # True: records written a step later, as on CUDA
def test_records_samples_losses_lr_norm_and_scheduler_steps(tmp_path, deferred):
    task = _task()
    observer = Observer(task, SpoolWriter(str(tmp_path), 0), torch.device("cpu"), ObserveSettings(warmup_steps=1,
                        deferred=deferred)).attach()
    opt = torch.optim.SGD(task.model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
    x, y = task.train_set.tensors
    norms, losses = [], []
    for step in range(3):
        for micro in range(2):                        # two micro-batches per step, scheduler per micro-batch
            ids = list(range(8 * (2 * step + micro), 8 * (2 * step + micro) + 8))
            loss = task.loss_fn(task.model(x[ids]), y[ids])
            losses.append(loss.item())
            (loss / 2).backward()
            sched.step() if micro == 0 and step > 0 else None
        norms.append(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in task.model.parameters()])).item())
        opt.step()
        opt.zero_grad()
        sched.step()
    written = [r["step"] for r in _records(tmp_path) if r["kind"] == "step"]
    assert written == ([1, 2] if deferred else [1, 2, 3])       # deferred: the last step waits for finish()
    with torch.no_grad():
        task.model.eval()
        task.model(task.val_set.tensors[0][:16])
    summary = observer.finish()
    records = _records(tmp_path)
    steps = [r for r in records if r["kind"] == "step"]
    micro = [r for r in records if r["kind"] == "micro"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert [m["ids"] for m in micro] == [list(range(8 * i, 8 * i + 8)) for i in range(6)]
    assert [s["micro_batches"] for s in steps] == [2, 2, 2]
    assert [s["loss"] for s in steps] == [sum(losses[i:i + 2]) / 2 for i in (0, 2, 4)]
    assert max(abs(s["grad_norm"] - n) / n for s, n in zip(steps, norms)) < 1e-6
    assert [s["sched_steps"] for s in steps] == [0, 2, 4]        # the extra per-micro-batch steps show
    assert steps[0]["lr"] == [0.1] and abs(steps[1]["lr"][0] - 0.1 / 3) < 1e-12
    (val,) = [r for r in records if r["kind"] == "val"]
    assert val["step"] == 3 and val["count"] == 16 and val["unattributed"] == 0
    with torch.no_grad():
        expected = float(((task.model(task.val_set.tensors[0]) - task.val_set.tensors[1]) ** 2).mean())
    assert abs(val["value"] - expected) < 1e-6
    assert summary["observed_dtypes"] == {"float32": 6}
    assert summary["unattributed_samples"] == 0


@pytest.mark.parametrize("deferred", [False, True])
def test_skipped_fp16_step_is_recorded_not_merged_into_the_next(tmp_path, deferred):
    task = _task()
    observer = Observer(task, SpoolWriter(str(tmp_path), 0), torch.device("cpu"), ObserveSettings(warmup_steps=0,
                        deferred=deferred)).attach()
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
    records = _records(tmp_path)
    (skip,) = [r for r in records if r["kind"] == "skip"]
    assert skip["after_step"] == 0 and skip["micro_batches"] == 1 and skip["loss_scale"] == 2.0**16
    (step,) = [r for r in records if r["kind"] == "step"]
    assert step["step"] == 1 and step["micro_batches"] == 1 and step["loss_scale"] == 2.0**15
    assert [r.get("skipped", False) for r in records if r["kind"] == "micro"] == [True, False]
    assert [r["ids"] for r in records if r["kind"] == "micro"] == [list(range(8))] * 2


def test_the_optimizer_stepped_is_recorded_with_its_groups_and_again_when_they_change(tmp_path):
    """The optimizer record (issue 29): its class, each group's parameters by the model's names and hyperparameters
    (not the LR, which the step records carry per group), the model's parameters in no group; a new record only when
    something but the LR changes."""
    task = _task()
    observer = Observer(task, SpoolWriter(str(tmp_path), 0), torch.device("cpu"),
                        ObserveSettings(warmup_steps=0)).attach()
    named = list(task.model.named_parameters())
    weights = [p for n, p in named if n.endswith("weight")]
    biases = [p for n, p in named if n.endswith("bias")][:-1]           # the last bias in no group
    opt = torch.optim.AdamW([{"params": weights}, {"params": biases, "weight_decay": 0.0}], lr=0.1,
                            weight_decay=0.05, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
    x, y = task.train_set.tensors
    for step in range(3):
        task.loss_fn(task.model(x[:8]), y[:8]).backward()
        if step == 2:
            opt.param_groups[1]["weight_decay"] = 0.01
        opt.step()
        opt.zero_grad()
        sched.step()
    observer.finish()
    records = [r for r in _records(tmp_path) if r["kind"] == "optimizer"]
    assert [r["step"] for r in records] == [1, 3]             # the LR changed at every step, the decay at step 3
    first = records[0]
    assert (first["class"], first["module"], first["foreign"]) == ("AdamW", "torch.optim.adamw", 0)
    assert first["groups"][0]["params"] == [n for n, _ in named if n.endswith("weight")]
    assert first["groups"][1]["params"] == [n for n, _ in named if n.endswith("bias")][:-1]
    assert [g["weight_decay"] for g in first["groups"]] == [0.05, 0.0]
    assert first["groups"][0]["betas"] == [0.9, 0.95] and "lr" not in first["groups"][0]
    assert first["unoptimized"] == [named[-1][0]]
    assert records[1]["groups"][1]["weight_decay"] == 0.01
    steps = [r for r in _records(tmp_path) if r["kind"] == "step"]
    assert steps[1]["lr"] == [0.05, 0.05]                     # each group's LR
