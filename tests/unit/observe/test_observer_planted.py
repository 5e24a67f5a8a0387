"""The planted loop (tests/planted/planted_loop.py) plants what each wrong says, as evalkit's observers record it.

Fast and in-process: the truth caliber's job at world size 1, the observer attached, the records read from the
spool. `none` must record exactly what the baseline adapter records; each wrong is checked against the truth
the caliber makes computable (the schedule, evalkit's order, the first step's gradient from the initial model).
Variants visible only at world size 2 (ddp.grad_summed, order.padded's repeat) are the baseline's at world size 1.
"""
from __future__ import annotations

import gc
import json
import os
import sys
from dataclasses import dataclass
from typing import Callable, Iterator

import pytest
import torch
from helpers import PLANTED
from omegaconf import OmegaConf

sys.path.insert(0, str(PLANTED))

from planted_loop import WRONGS, PlantedAdapter  # noqa: E402

from evalkit.adapters.baseline import BaselineAdapter  # noqa: E402
from evalkit.observe.hooks import SCHEDULERS  # noqa: E402
from evalkit.observe.observer import Observer, ObserveSettings  # noqa: E402
from evalkit.probes.semantics.plan import TRUTH_CALIBER  # noqa: E402
from evalkit.spool import SpoolWriter  # noqa: E402
from evalkit.tasks.catalog import mlp_regression  # noqa: E402
from evalkit.tasks.order import OrderedSampler  # noqa: E402
from evalkit.worker.optim import WarmupSchedule  # noqa: E402
from evalkit.worker.run import make_job  # noqa: E402


def _section(name: str) -> dict:
    return {k.split(".", 1)[1]: v for k, v in TRUTH_CALIBER.items() if k.startswith(name + ".")}


TASK, TRAIN = _section("task"), _section("train")
GA, BS, MAX_STEPS, VAL_EVERY = TRAIN["grad_accum"], TRAIN["batch_size"], TRAIN["max_steps"], TRAIN["val_every"]
PER_EPOCH = TASK["n_train"] // BS                       # micro-batches per epoch at world size 1
CLIP = 0.05                                             # below the caliber's gradient norms: clipping acts
CLIPPED = 1e-5        # clip_grad_norm_ scales by max_norm / (norm + 1e-6): a clipped norm is a hair below max_norm
PARAM_ULP = 1e-7      # parameters are float32 near 0.3: differences of two are exact to about this


@dataclass
class Run:
    steps: list[dict]
    micros: list[list[dict]]        # per step, its micro-batches
    vals: list[dict]
    params: list[torch.Tensor]      # after each step
    summary: dict
    effective: dict
    optimizer: list[dict]           # the optimizer records (class, param groups)

    def ids(self) -> list[list[int]]:
        """Every training micro-batch's sample ids, in order."""
        return [m["ids"] for step in self.micros for m in step]


def _run(spool: str, adapter, seed: int = 0, grad_clip: float | None = None) -> Run:
    if len(SCHEDULERS):             # a scheduler still alive would add its steps to the records' sched_steps
        gc.collect()
    cfg = OmegaConf.create({"seed": seed, "trainer": {"mode": "aligned"}, "precision": _section("precision"),
                            "train": {**TRAIN, "grad_clip": grad_clip}})
    task = mlp_regression(seed, **TASK)
    observer = Observer(task, SpoolWriter(spool, 0), torch.device("cpu"), ObserveSettings(warmup_steps=0,
                        record_params=True, deferred=False)).attach()
    try:
        adapter.fit(make_job(cfg, task, torch.device("cpu"), {"ckpt_dir": os.path.join(spool, "ckpt")}))
        summary = observer.finish()
    finally:
        observer.detach()
    with open(os.path.join(spool, "records_rank0.jsonl")) as fh:
        records = [json.loads(line) for line in fh]
    steps = [r for r in records if r["kind"] == "step"]
    micros = [[m for m in records if m["kind"] == "micro" and m["step"] == s["step"]] for s in steps]
    params = [torch.tensor(r["values"]) for r in records if r["kind"] == "params"]
    return Run(steps, micros, [r for r in records if r["kind"] == "val"], params, summary,
               adapter.effective_config().as_json(), [r for r in records if r["kind"] == "optimizer"])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[Callable[..., Run]]:
    """run(wrong, seed=0, grad_clip=None) -> Run, each configuration trained once per module ("baseline": the
    baseline adapter)."""
    done: dict[tuple, Run] = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # a tiny MLP: threads only contend with each other

    def get(wrong: str, seed: int = 0, grad_clip: float | None = None) -> Run:
        key = (wrong, seed, grad_clip)
        if key not in done:
            adapter = BaselineAdapter() if wrong == "baseline" else PlantedAdapter(options={"wrong": wrong})
            done[key] = _run(str(tmp_path_factory.mktemp("spool")), adapter, seed, grad_clip)
        return done[key]

    yield get
    torch.set_num_threads(threads)


# ---------------------------------------------------------------- the truth at the caliber
def lr_after(scheduler_steps: int, warmup: int = TRAIN["warmup_steps"], total: int = MAX_STEPS) -> float:
    return TRAIN["lr"] * WarmupSchedule(TRAIN["schedule"], warmup, total, TRAIN["min_lr_ratio"])(scheduler_steps)


def true_windows(steps: int = MAX_STEPS) -> list[int]:
    per_epoch = [min(GA, PER_EPOCH - i) for i in range(0, PER_EPOCH, GA)]
    return (per_epoch * steps)[:steps]


def evalkit_batches(seed: int, epoch: int) -> list[list[int]]:
    return torch.tensor(OrderedSampler(TASK["n_train"], BS, seed).rank_indices(epoch).tolist()).view(-1, BS).tolist()


def permuted_batches(generator_seed: int) -> list[list[int]]:
    order = torch.randperm(TASK["n_train"], generator=torch.Generator().manual_seed(generator_seed))
    return order[: PER_EPOCH * BS].view(-1, BS).tolist()


def in_windows(batches: list[list[int]], windows: list[int]) -> list[list[int]]:
    """The micro-batches the windows consume, in order."""
    return batches[: sum(windows)]


def initial_params(seed: int = 0) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in mlp_regression(seed, **TASK).model.parameters()])


def first_step_gradients(ids: list[list[int]], divisor: int, seed: int = 0) -> list[torch.Tensor]:
    """Each micro-batch's flattened gradient of loss / divisor at the initial parameters."""
    task = mlp_regression(seed, **TASK)
    x, y = task.train_set.tensors
    grads = []
    for batch in ids:
        task.model.zero_grad()
        (task.loss_fn.forward(task.model(x[batch]), y[batch]) / divisor).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in task.model.parameters()]))
    return grads


def same_params(a: Run, b: Run) -> bool:
    return len(a.params) == len(b.params) and all(torch.equal(p, q) for p, q in zip(a.params, b.params))


def val_steps(r: Run) -> list[int]:
    return [v["step"] for v in r.vals]


# ---------------------------------------------------------------- one check per planted wrong
def check_none(run):
    ours, base = run("none"), run("baseline")
    keys = ("step", "lr", "loss", "grad_norm", "micro_batches", "loss_calls", "samples", "sched_steps", "loss_scale")
    assert [[s[k] for k in keys] for s in ours.steps] == [[s[k] for k in keys] for s in base.steps]
    assert ours.ids() == base.ids() and same_params(ours, base)
    assert [(v["step"], v["value"], v["train_mode"]) for v in ours.vals] == \
           [(v["step"], v["value"], v["train_mode"]) for v in base.vals]
    # ...and the baseline's semantics are the truth computed here
    assert [s["micro_batches"] for s in ours.steps] == true_windows()
    assert [s["lr"][0] for s in ours.steps] == pytest.approx([lr_after(k) for k in range(MAX_STEPS)], rel=1e-12)
    assert ours.ids() == in_windows(evalkit_batches(0, 0) + evalkit_batches(0, 1) + evalkit_batches(0, 2),
                                    true_windows())
    assert val_steps(ours) == [4, 8, 10] and all(v["train_mode"] == 0 for v in ours.vals)


def check_lr_per_micro_batch(run):
    r = run("lr.per_micro_batch")
    micro_before = [sum(true_windows(k)) for k in range(MAX_STEPS)]
    assert [s["lr"][0] for s in r.steps] == pytest.approx([lr_after(n) for n in micro_before], rel=1e-12)
    assert r.steps[1]["lr"][0] == pytest.approx(lr_after(GA), rel=1e-12)


def check_lr_per_epoch(run):
    r = run("lr.per_epoch")
    steps_per_epoch = len(range(0, PER_EPOCH, GA))
    epochs_before = [k // steps_per_epoch for k in range(MAX_STEPS)]
    assert [s["lr"][0] for s in r.steps] == pytest.approx([lr_after(e) for e in epochs_before], rel=1e-12)
    assert [s["sched_steps"] for s in r.steps] == epochs_before


def check_lr_twice_per_step(run):
    r = run("lr.twice_per_step")
    assert [s["lr"][0] for s in r.steps] == pytest.approx([lr_after(2 * k) for k in range(MAX_STEPS)], rel=1e-12)


def check_lr_warmup_off_by_one(run):
    r = run("lr.warmup_off_by_one")
    assert [s["lr"][0] for s in r.steps] == pytest.approx([lr_after(k + 1) for k in range(MAX_STEPS)], rel=1e-12)


def check_lr_warmup_unit(run):
    r = run("lr.warmup_unit")
    expected = [lr_after(k, TRAIN["warmup_steps"] * GA, MAX_STEPS * GA) for k in range(MAX_STEPS)]
    assert [s["lr"][0] for s in r.steps] == pytest.approx(expected, rel=1e-12)
    assert [s["sched_steps"] for s in r.steps] == list(range(MAX_STEPS))


def check_loss_window_summed(run):
    r, base = run("loss.window_summed"), run("baseline")
    assert r.steps[0]["loss"] == base.steps[0]["loss"]
    assert r.steps[0]["grad_norm"] == pytest.approx(GA * base.steps[0]["grad_norm"], rel=1e-5)


def check_window_short_underscaled(run):
    r, base = run("window.short_underscaled"), run("baseline")
    short = true_windows().index(min(true_windows()))            # the first short window's step (0-based)
    assert short > 0 and all(torch.equal(p, q) for p, q in zip(r.params[:short], base.params[:short]))
    assert r.steps[short]["micro_batches"] < GA
    assert r.steps[short]["grad_norm"] == pytest.approx(
        base.steps[short]["grad_norm"] * r.steps[short]["micro_batches"] / GA, rel=1e-5)


def check_window_short_dropped(run):
    r = run("window.short_dropped")
    assert [s["micro_batches"] for s in r.steps] == [GA] * MAX_STEPS
    full = PER_EPOCH // GA * GA
    batches = [b for epoch in range(4) for b in evalkit_batches(0, epoch)[:full]]
    assert r.ids() == batches[: GA * MAX_STEPS]


def check_window_short_carried(run):
    r = run("window.short_carried")
    assert [s["micro_batches"] for s in r.steps] == [GA] * MAX_STEPS
    batches = [b for epoch in range(4) for b in evalkit_batches(0, epoch)]
    assert r.ids() == batches[: GA * MAX_STEPS]


def check_window_short_merged(run):
    """Epoch 0's lone 10th micro-batch joins epoch 1's first window: steps of 3, 3, 3, 4, 3, 3, 4, ..."""
    r = run("window.short_merged")
    assert [s["micro_batches"] for s in r.steps] == [3, 3, 3, 4, 3, 3, 4, 3, 3, 4]
    batches = [b for epoch in range(4) for b in evalkit_batches(0, epoch)]
    assert r.ids() == batches[: sum(s["micro_batches"] for s in r.steps)]


def check_clip_unasked(run):
    r, base = run("clip.unasked"), run("baseline")
    assert max(s["grad_norm"] for s in base.steps) > 0.5        # the caliber's gradients reach the clip
    assert all(s["grad_norm"] <= 0.5 * (1 + 1e-6) for s in r.steps)
    assert r.steps[0]["grad_norm"] == pytest.approx(min(0.5, base.steps[0]["grad_norm"]), rel=CLIPPED)


def check_clip_per_micro_batch(run):
    r, base = run("clip.per_micro_batch", grad_clip=CLIP), run("baseline", grad_clip=CLIP)
    assert base.steps[0]["grad_norm"] == pytest.approx(CLIP, rel=CLIPPED)          # the window clipped once
    grads = first_step_gradients([m["ids"] for m in r.micros[0]], len(r.micros[0]))
    clipped = sum(g * min(1.0, CLIP / (float(g.norm()) + 1e-6)) for g in grads)
    assert r.steps[0]["grad_norm"] == pytest.approx(float(clipped.norm()), rel=1e-5)
    assert abs(r.steps[0]["grad_norm"] - CLIP) > 1e-3 * CLIP
    assert same_params(run("clip.per_micro_batch"), run("baseline"))          # without clipping: the baseline


def check_clip_before_unscale(run):
    r, base = run("clip.before_unscale", grad_clip=CLIP), run("baseline", grad_clip=CLIP)
    assert all(s["loss_scale"] == 16.0 for s in r.steps) and base.steps[0]["loss_scale"] is None
    assert base.steps[0]["grad_norm"] == pytest.approx(CLIP, rel=CLIPPED)
    assert r.steps[0]["grad_norm"] == pytest.approx(CLIP / 16, rel=CLIPPED)       # clipped at 16x the norm


def check_wd_unasked(run):
    r, base = run("wd.unasked"), run("baseline")
    expected = -lr_after(0) * 0.01 * initial_params()
    assert torch.allclose(r.params[0] - base.params[0], expected, rtol=1e-3, atol=PARAM_ULP)
    assert float(expected.abs().max()) > 100 * PARAM_ULP


def check_ddp_grad_summed(run):
    assert same_params(run("ddp.grad_summed"), run("baseline"))               # averaging = summing on one rank


def check_order_shuffled(run):
    for seed in (0, 1):
        r = run("order.shuffled", seed=seed)
        batches = [b for epoch in range(3) for b in permuted_batches(seed * 31 + epoch + 12345)]
        assert r.ids() == in_windows(batches, true_windows())
        assert r.ids() != run("baseline", seed=seed).ids()


def check_order_fixed_seed(run):
    r0, r1 = run("order.fixed_seed", seed=0), run("order.fixed_seed", seed=1)
    assert r0.ids() == r1.ids() == in_windows([b for e in range(3) for b in permuted_batches(42 + e)],
                                              true_windows())
    assert run("baseline", seed=0).ids() != run("baseline", seed=1).ids()


def check_order_distributed_interleave(run):
    # DistributedSampler's shuffle draws from seed + epoch, evalkit's from seed * 7919 + epoch: one order at
    # seed 0 on one rank, a different one at any other seed.
    r = run("order.distributed_interleave", seed=1)
    assert r.ids() == in_windows([b for e in range(3) for b in permuted_batches(1 + e)], true_windows())
    assert r.ids() != run("baseline", seed=1).ids()


def check_order_padded(run):
    r = run("order.padded")                       # one rank: no padding, dataset order every epoch
    in_order = torch.arange(PER_EPOCH * BS).view(-1, BS).tolist()
    assert r.ids() == in_windows(in_order * 3, true_windows())


def check_forward_before_training(run):
    r, base = run("forward.before_training"), run("baseline")
    assert val_steps(r) == [0] + val_steps(base)
    assert r.vals[0]["train_mode"] == 0 and same_params(r, base)


def check_forward_extra_train(run):
    r, base = run("forward.extra_train"), run("baseline")
    assert [s["micro_batches"] for s in r.steps] == [w + 1 for w in true_windows()]
    assert [s["loss_calls"] for s in r.steps] == [w + 1 for w in true_windows()]
    assert all(step[-1]["ids"] == step[0]["ids"] and step[-1]["train_mode"] for step in r.micros)
    assert same_params(r, base)                                              # nothing back-propagated


def check_val_train_mode(run):
    r, base = run("val.train_mode"), run("baseline")
    assert val_steps(r) == val_steps(base)
    assert all(v["train_mode"] == v["batches"] > 0 for v in r.vals)
    assert all(v["train_mode"] == 0 for v in base.vals)


def check_val_cadence(run):
    r = run("val.cadence")
    ends = [sum(true_windows(k)) for k in range(1, MAX_STEPS + 1)]           # micro-batches done after step k
    during = [sum(e < m for e in ends) for m in range(VAL_EVERY, ends[-1] + 1, VAL_EVERY)]
    assert val_steps(r) == during + [MAX_STEPS]
    assert val_steps(r) != val_steps(run("baseline"))


def check_steps_extra(run):
    r = run("steps.extra")
    assert [s["step"] for s in r.steps] == list(range(1, MAX_STEPS + 2)) and val_steps(r)[-1] == MAX_STEPS + 1


def check_steps_fewer(run):
    r = run("steps.fewer")
    assert [s["step"] for s in r.steps] == list(range(1, MAX_STEPS)) and val_steps(r)[-1] == MAX_STEPS - 1


def check_precision_mismatch(run):
    r = run("precision.mismatch")
    assert all(m["dtype"] == "bfloat16" for step in r.micros for m in step)
    assert set(r.summary["observed_dtypes"]) == {"bfloat16"}
    assert set(run("baseline").summary["observed_dtypes"]) == {"float32"}


def check_unexplained(run):
    r, base = run("unexplained"), run("baseline")
    start = initial_params()
    assert torch.allclose(r.params[0] - start, 0.9 * (base.params[0] - start), rtol=1e-3, atol=PARAM_ULP)
    assert r.steps[0]["grad_norm"] == pytest.approx(0.9 * base.steps[0]["grad_norm"], rel=1e-6)


def _names(run_: Run, ending: str) -> list[str]:
    return [n for g in run_.optimizer[0]["groups"] for n in g["params"] if n.endswith(ending)]


def check_optim_other(run):
    (record,) = run("optim.other").optimizer
    assert (record["class"], run("baseline").optimizer[0]["class"]) == ("Adam", "SGD")


def check_optim_hyper(run):
    (record,) = run("optim.hyper").optimizer
    assert record["class"] == "SGD" and record["groups"][0]["momentum"] == 0.9
    assert run("baseline").optimizer[0]["groups"][0]["momentum"] == 0.0


def check_optim_unoptimized(run):
    (record,) = run("optim.unoptimized").optimizer
    last = run("baseline").optimizer[0]["groups"][0]["params"][-1]
    assert record["unoptimized"] == [last] == ["4.bias"] and run("baseline").optimizer[0]["unoptimized"] == []


def check_wd_skipped(run):
    (record,) = run("wd.skipped").optimizer
    weights, biases = record["groups"]
    assert all(n.endswith("weight") for n in weights["params"]) and biases["params"] == _names(run("baseline"), "bias")
    assert biases["weight_decay"] == 0.0


def check_lr_per_group(run):
    r = run("lr.per_group")
    expected = [[lr_after(k), 2 * lr_after(k)] for k in range(MAX_STEPS)]
    assert [lr for s in r.steps for lr in s["lr"]] == pytest.approx([lr for pair in expected for lr in pair], rel=1e-12)


def check_lr_warmup_from_zero(run):
    r = run("lr.warmup_from_zero")
    warmup = TRAIN["warmup_steps"]
    expected = [TRAIN["lr"] * k / warmup if k < warmup else lr_after(k) for k in range(MAX_STEPS)]
    assert [s["lr"][0] for s in r.steps] == pytest.approx(expected, rel=1e-12) and r.steps[0]["lr"][0] == 0.0


def check_same_as(wrong: str, like: str) -> Callable:
    """A wrong that plants nothing on this task: it records exactly what `like` records (the loss_norm variants
    change a token task's normalization only, tests/unit/probes/semantics/test_normalization_tokens.py)."""
    def check(run):
        ours, theirs = run(wrong), run(like)
        keys = ("step", "lr", "loss", "grad_norm", "micro_batches", "samples")
        assert [[s[k] for k in keys] for s in ours.steps] == [[s[k] for k in keys] for s in theirs.steps]
        assert ours.ids() == theirs.ids() and same_params(ours, theirs)
    return check


CHECKS: dict[str, Callable] = {
    "none": check_none,
    "lr.per_micro_batch": check_lr_per_micro_batch, "lr.per_epoch": check_lr_per_epoch,
    "lr.twice_per_step": check_lr_twice_per_step, "lr.warmup_off_by_one": check_lr_warmup_off_by_one,
    "lr.warmup_unit": check_lr_warmup_unit, "loss.window_summed": check_loss_window_summed,
    "window.short_underscaled": check_window_short_underscaled, "window.short_dropped": check_window_short_dropped,
    "window.short_carried": check_window_short_carried, "window.short_merged": check_window_short_merged,
    "clip.unasked": check_clip_unasked,
    "clip.per_micro_batch": check_clip_per_micro_batch, "clip.before_unscale": check_clip_before_unscale,
    "wd.unasked": check_wd_unasked, "ddp.grad_summed": check_ddp_grad_summed,
    "order.shuffled": check_order_shuffled, "order.fixed_seed": check_order_fixed_seed,
    "order.distributed_interleave": check_order_distributed_interleave, "order.padded": check_order_padded,
    "forward.before_training": check_forward_before_training, "forward.extra_train": check_forward_extra_train,
    "val.train_mode": check_val_train_mode, "val.cadence": check_val_cadence,
    "steps.extra": check_steps_extra, "steps.fewer": check_steps_fewer,
    "precision.mismatch": check_precision_mismatch, "unexplained": check_unexplained,
    "optim.other": check_optim_other, "optim.hyper": check_optim_hyper, "optim.unoptimized": check_optim_unoptimized,
    "wd.skipped": check_wd_skipped, "lr.per_group": check_lr_per_group,
    "lr.warmup_from_zero": check_lr_warmup_from_zero,
    **{w: check_same_as(w, "baseline") for w in ("loss_norm.micro_mean", "loss_norm.token_sum",
                                                  "loss_norm.accum_scaled")},
    "loss_norm.micro_sum": check_same_as("loss_norm.micro_sum", "loss.window_summed"),
}


@pytest.mark.parametrize("wrong", list(WRONGS))
def test_planted_wrong_shows_in_the_records(run, wrong):
    CHECKS[wrong](run)
    report = run(wrong).effective
    assert report["planted"] == wrong and report["deviations"] == []


def test_every_wrong_is_checked():
    assert set(CHECKS) == set(WRONGS)


def test_unknown_wrong_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="lr.per_epoch"):
        PlantedAdapter(options={"wrong": "lr.sideways"})
