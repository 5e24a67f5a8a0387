"""Poutyne's defaults mode is its quick start (issue 43: every quick start has its smoke test): two short real defaults
jobs through `evalkit` (one without clipping, one asking for it), with Poutyne's `Model`, `fit` and callbacks spied
on while the adapter runs (`SpyAdapter`, loaded by the worker from this module), show that `Model` gets the page's
arguments (the run's optimizer in the `{'optim': name, ...}` form, built as job.make_optimizer builds it, the task's
loss, the run's device, no metrics), that `fit` gets the page's arguments plus the run's batch size, epochs and
`batches_per_step` (Poutyne's shuffling loader), that the callbacks are the docstring's (the run's schedule as
LambdaLR, ClipNorm only when the run clips, the checkpoint callbacks), and that the quick-start pages, departures and
deviations land in the effective config."""
from __future__ import annotations

import dataclasses
import inspect
import json
import os

import pytest
from quick_start_spy import describe, run_clip_pair

from evalkit.adapters.poutyne import DEPARTURES, QUICK_START, PoutyneAdapter
from evalkit.contract import OWNED

pytestmark = pytest.mark.smoke
pytest.importorskip("poutyne")

# 18 samples in batches of 4: 5 batches an epoch (the last of 2), windows of 2: 3 optimizer steps an epoch, so
# max_steps=4 takes 2 whole epochs (6 steps, 10 backward passes); warm-up 2: LR factor 0.5 in epoch 1, 1.0 in 2.
RUN = ["trainer=poutyne", "trainer._target_=test_quick_start_poutyne.SpyAdapter", "trainer.name=poutyne_spy",
       "trainer.mode=defaults", "task.n_train=18", "task.n_val=8", "task.hidden=8", "train.batch_size=4",
       "train.grad_accum=2", "train.max_steps=4", "train.val_every=2", "train.ckpt_every=0",
       "train.optimizer=sgd", "train.momentum=0.5", "train.lr=0.05", "train.schedule=linear",
       "train.warmup_steps=2", "observe.warmup_steps=0", "train.grad_clip=null,0.5"]
# fit's callbacks: ClipNorm when the run clips, the checkpoint ones (a departure; LRSchedulerCheckpoint calls LambdaLR)
CALLBACKS = {"None": ["LRSchedulerCheckpoint", "ModelCheckpoint", "OptimizerCheckpoint"]}
CALLBACKS["0.5"] = ["ClipNorm", *CALLBACKS["None"]]
SPIED = ("Model.__init__", "Model.fit", "Model.fit_generator", "LambdaLR.__init__", "ClipNorm.on_backward_end",
         *(f"{c}.__init__" for c in CALLBACKS["0.5"]))


class SpyAdapter(PoutyneAdapter):
    """The adapter under test with the `SPIED` methods of Poutyne's classes and every optimizer step spied on for the
    length of `fit`; each call's arguments (the job's objects, and those built through a spy, by name) are written as
    JSON to `<spy>/clip_<grad_clip>.json`. The spies record and call through: the training is the adapter's."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def __init__(self, mode: str = "aligned", options: dict | None = None):
        options = dict(options or {})
        self.spy = options.pop("spy")          # the adapter refuses options of its own
        super().__init__(mode, options)

    def fit(self, job):
        import poutyne
        from torch.optim.optimizer import register_optimizer_step_post_hook

        task, seen = job.task, {"calls": {}, "lrs": []}
        names = {id(task.model): "network", id(task.loss_fn): "task.loss_fn", id(job.device): "job.device",
                 **{id(t): n for t, n in zip((*task.train_set.tensors, *task.val_set.tensors),
                                             ("train_x", "train_y", "valid_x", "valid_y"))}}
        network = list(map(id, task.model.parameters()))
        owner = lambda params: "the network's" if list(map(id, params)) == network else "others"

        def shown(v):
            if id(v) in names:
                return names[id(v)]
            if isinstance(v, (list, tuple, dict)):
                return {k: shown(x) for k, x in v.items()} if isinstance(v, dict) else [shown(x) for x in v]
            if isinstance(v, str) or dataclasses.is_dataclass(v):     # a checkpoint file, the run's WarmupSchedule
                return v.replace(job.ckpt_dir, "<ckpt_dir>") if isinstance(v, str) else repr(v)
            return v if isinstance(v, (int, float, bool, type(None))) else describe(v)

        def spy(cls: str, name: str, original):
            def spied(obj, *args, **kwargs):
                call = {"args": shown(args), **shown(kwargs)}
                seen["calls"].setdefault(f"{cls}.{name}", []).append(call)
                out = original(obj, *args, **kwargs)
                if name == "__init__":
                    names[id(obj)] = cls
                if (cls, name) == ("Model", "__init__"):     # the optimizer Poutyne built (one group: asserted)
                    groups = obj.optimizer.param_groups
                    call.update(built=describe(obj.optimizer), parameters=owner(groups[0]["params"]))
                if (cls, name) == ("ClipNorm", "__init__"):
                    call["parameters"] = owner(obj.parameters)
                return out
            return spied

        originals = {(c, m): getattr(poutyne, c).__dict__.get(m) for c, m in (k.split(".") for k in SPIED)}
        hook = register_optimizer_step_post_hook(lambda opt, *_: seen["lrs"].append(opt.param_groups[0]["lr"]))
        try:
            for cls, name in originals:
                setattr(getattr(poutyne, cls), name, spy(cls, name, getattr(getattr(poutyne, cls), name)))
            super().fit(job)
        finally:
            hook.remove()
            for (cls, name), original in originals.items():    # an inherited method: drop the spy
                setattr(getattr(poutyne, cls), name, original) if original else delattr(getattr(poutyne, cls), name)
        reference = job.make_optimizer(task.model.parameters())      # the run's own optimizer and schedule
        seen.update(run_optimizer=describe(reference),
                    run_schedule=[repr(f) for f in job.make_scheduler(reference).lr_lambdas])
        os.makedirs(self.spy, exist_ok=True)
        with open(os.path.join(self.spy, f"clip_{job.grad_clip}.json"), "w") as fh:
            json.dump(seen, fh, default=str)


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_poutyne")
    return run_clip_pair(workdir, workdir / "spy", RUN)


def test_model_gets_the_pages_arguments_with_the_runs_optimizer_and_the_tasks_loss(spied):
    seen, _, runs = spied
    assert sorted(seen) == ["0.5", "None"] and all(r.info.status == "FINISHED" for r in runs)
    for one in seen.values():
        (model,) = one["calls"]["Model.__init__"]
        built = model.pop("built")
        # Model(network, 'sgd', 'cross_entropy', device=device): the run's SGD in the {'optim': name, ...} form, the
        # task's loss module, the run's device; no batch_metrics / epoch_metrics (a departure), nothing else
        assert model == {"args": ["network", {"optim": "sgd", "lr": 0.05, "momentum": 0.5, "weight_decay": 0.0},
                                  "task.loss_fn"], "device": "job.device", "parameters": "the network's"}
        # what Poutyne built from it is what job.make_optimizer builds: class, every default, one group
        assert built == one["run_optimizer"] and (built["class"], built["groups"]) == ("SGD", 1)


def test_fit_gets_the_pages_arguments_and_the_runs_batch_size_epochs_and_accumulation(spied):
    from poutyne import Model

    seen, _, _ = spied
    for clip, one in seen.items():
        calls = one["calls"]
        (fit,), (generator,) = calls["Model.fit"], calls["Model.fit_generator"]
        assert fit.pop("callbacks") == CALLBACKS[clip]
        # not on the page and not asked for (the run resumes nothing): Poutyne's own default, so nothing changes
        assert fit.pop("initial_epoch") == inspect.signature(Model.fit).parameters["initial_epoch"].default == 1
        # fit(train_x, train_y, validation_data=(valid_x, valid_y), epochs, batch_size) with the run's batch size, the
        # fewest whole epochs holding max_steps and its accumulation; no verbose, steps_per_epoch or loader kwargs
        assert fit == {"args": ["train_x", "train_y"], "validation_data": ["valid_x", "valid_y"], "epochs": 2,
                       "batch_size": 4, "batches_per_step": 2}
        loader = {"kind": "loader", "batch_size": 4, "drop_last": False}      # Poutyne's own DataLoaders
        assert generator["args"] == [{**loader, "sampler": "RandomSampler", "size": 18}]
        assert generator["valid_generator"] == {**loader, "sampler": "SequentialSampler", "size": 8}


def test_the_callbacks_are_the_runs_schedule_and_clip_and_the_checkpoints(spied):
    seen, _, _ = spied
    for clip, one in seen.items():
        calls = one["calls"]
        assert sorted(calls) == sorted(c for c in SPIED if clip != "None" or not c.startswith("ClipNorm"))
        # LambdaLR(lr_lambda=<the run's schedule>): the lambda job.make_scheduler builds
        assert one["run_schedule"] == ["WarmupSchedule(kind='linear', warmup_steps=2, total_steps=4, min_lr_ratio=0.0)"]
        assert calls["LambdaLR.__init__"] == [{"args": [], "lr_lambda": one["run_schedule"][0]}]
        # each with its file in the run's checkpoint folder, nothing else (Poutyne's period: every epoch)
        assert [calls[f"{c}.__init__"] for c in CALLBACKS["None"]] == [
            [{"args": ["LambdaLR", "<ckpt_dir>/epoch_{epoch:04d}.lrsched"]}],
            [{"args": ["<ckpt_dir>/epoch_{epoch:04d}.ckpt"]}], [{"args": ["<ckpt_dir>/epoch_{epoch:04d}.optim"]}]]
        # stepped at each epoch's end: factor 0.5 for epoch 1's 3 optimizer steps, 1.0 for epoch 2's
        assert one["lrs"] == pytest.approx([0.025] * 3 + [0.05] * 3)
    # ClipNorm(network.parameters(), grad_clip) only when the run clips; it clips after every micro-batch's backward
    assert seen["0.5"]["calls"]["ClipNorm.__init__"] == [{"args": [{"kind": "other", "class": "generator"}, 0.5],
                                                          "parameters": "the network's"}]
    assert len(seen["0.5"]["calls"]["ClipNorm.on_backward_end"]) == 10


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import poutyne

    _, effective, _ = spied
    codes = ["steps.extra", "order.shuffled", "batch.partial", "lr.per_epoch", "sched.count", "val.cadence",
             "loss.per_sample_mean", "resume.epoch_restarts", "stop.at_epoch_end"]
    for clip, eff in effective.items():
        assert eff["mode"] == "defaults" and eff["quick_start"] == [dataclasses.asdict(p) for p in QUICK_START]
        assert {page["version"] for page in eff["quick_start"]} == {poutyne.__version__} == {"1.19.0"}
        assert eff["departures"] == [dataclasses.asdict(d) for d in DEPARTURES]
        assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
        assert eff["fit_arguments"] == {"epochs": 2, "batch_size": 4, "batches_per_step": 2, "initial_epoch": 1}
        assert eff["optimizer_argument"] == {"optim": "sgd", "lr": 0.05, "momentum": 0.5, "weight_decay": 0.0}
        assert eff["callbacks"] == CALLBACKS[clip]
        assert [d["code"] for d in eff["deviations"]] == (
            codes if clip == "None" else [*codes[:7], "clip.per_micro_batch", *codes[7:]])
