"""Fabric's defaults mode is its pages' code (issue 29): two short real defaults jobs through `evalkit` (one
without clipping, one asking for it), with Fabric's own methods spied on while the adapter runs (`SpyAdapter`,
loaded by the worker from this module), show that `Fabric(...)` gets the Convert page's arguments and only those,
that `setup` receives the run's own optimizer and no scheduler, `setup_dataloaders` plain DataLoaders (no sampler of
evalkit's, no drop_last), that the loop is the accumulation page's (a first window of one batch, undivided losses,
the scheduler stepped after each optimizer step), that `clip_gradients` is called only when the run asks for
clipping, and that the adapter's quick-start pages and departures land in the effective config."""
from __future__ import annotations

import json
import os

import pytest
from quick_start_spy import describe, run_clip_pair

from evalkit.adapters.fabric import FabricAdapter
from evalkit.contract import OWNED, Deviation

pytestmark = pytest.mark.smoke
pytest.importorskip("lightning")

# 22 samples in batches of 4: 6 batches an epoch (the last of 2 samples), windows of 2 counted the page's way
# (iteration % 2 != 0 accumulates): [0], [1, 2], [3, 4], [5, 0 of the next epoch] -> 4 optimizer steps.
RUN = ["trainer=fabric", "trainer._target_=test_quick_start_fabric.SpyAdapter", "trainer.name=fabric_spy",
       "trainer.mode=defaults", "task.n_train=22", "task.n_val=8", "task.hidden=8", "train.batch_size=4",
       "train.grad_accum=2", "train.max_steps=4", "train.val_every=2", "train.ckpt_every=0",
       "train.optimizer=sgd", "train.momentum=0.5", "train.lr=0.05", "train.schedule=linear",
       "train.warmup_steps=1", "observe.warmup_steps=0", "train.grad_clip=null,0.5"]


class SpyAdapter(FabricAdapter):
    """The adapter under test with `Fabric.__init__`, `setup`, `setup_dataloaders`, `backward`, `clip_gradients`,
    optimizer steps and scheduler steps spied on for the length of `fit`; what they saw is written as JSON to
    `<spy>/clip_<grad_clip>.json`. The spies record and call through: the training is the adapter's."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def __init__(self, mode: str = "aligned", options: dict | None = None):
        options = dict(options or {})
        self.spy = options.pop("spy")
        super().__init__(mode, options)

    def fit(self, job):
        import torch
        from lightning.fabric import Fabric
        from torch.optim.optimizer import register_optimizer_step_post_hook

        seen = {"fabric_kwargs": [], "setup": [], "loaders": [], "clip_calls": [], "events": [], "backward": []}
        originals = {name: getattr(Fabric, name)
                     for name in ("__init__", "setup", "setup_dataloaders", "backward", "clip_gradients")}
        scheduler_step = torch.optim.lr_scheduler.LRScheduler.step

        def init(fabric, *args, **kwargs):
            seen["fabric_kwargs"].append({"args": list(args), **{k: repr(v) for k, v in kwargs.items()}})
            originals["__init__"](fabric, *args, **kwargs)

        def setup(fabric, *objects, **kwargs):
            seen["setup"].append({"objects": [describe(o) for o in objects], "kwargs": sorted(kwargs)})
            return originals["setup"](fabric, *objects, **kwargs)

        def setup_dataloaders(fabric, *loaders, **kwargs):
            seen["loaders"] += [{**describe(loader), "kwargs": sorted(kwargs)} for loader in loaders]
            return originals["setup_dataloaders"](fabric, *loaders, **kwargs)

        def backward(fabric, tensor, *args, **kwargs):
            seen["events"].append("B")
            seen["backward"].append(type(tensor.grad_fn).__name__)
            return originals["backward"](fabric, tensor, *args, **kwargs)

        def clip_gradients(fabric, module, optimizer, *args, **kwargs):
            seen["clip_calls"].append({"args": list(args), **kwargs})
            return originals["clip_gradients"](fabric, module, optimizer, *args, **kwargs)

        def counted_scheduler_step(scheduler, *args, **kwargs):
            seen["events"].append("L")
            return scheduler_step(scheduler, *args, **kwargs)

        spies = {"__init__": init, "setup": setup, "setup_dataloaders": setup_dataloaders, "backward": backward,
                 "clip_gradients": clip_gradients}
        hook = register_optimizer_step_post_hook(lambda *_: seen["events"].append("S"))
        try:
            for name, spy in spies.items():
                setattr(Fabric, name, spy)
            torch.optim.lr_scheduler.LRScheduler.step = counted_scheduler_step
            super().fit(job)
        finally:
            for name, original in originals.items():
                setattr(Fabric, name, original)
            torch.optim.lr_scheduler.LRScheduler.step = scheduler_step
            hook.remove()
        os.makedirs(self.spy, exist_ok=True)
        with open(os.path.join(self.spy, f"clip_{job.grad_clip}.json"), "w") as fh:
            json.dump(seen, fh, default=str)


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_fabric")
    spy = workdir / "spy"
    return run_clip_pair(workdir, spy, RUN)


def test_fabric_gets_the_convert_pages_arguments_and_the_runs_optimizer_without_a_scheduler(spied):
    seen, effective, runs = spied
    assert sorted(seen) == ["0.5", "None"] and all(r.info.status == "FINISHED" for r in runs)
    for clip, one in seen.items():
        # Fabric(accelerator="cuda", devices=8, strategy="ddp") with the run's hardware, world size and precision
        assert one["fabric_kwargs"] == [{"args": [], "accelerator": "'cpu'", "devices": "1", "strategy": "'ddp'",
                                         "precision": "'32-true'", "callbacks": "[]"}]
        assert effective[clip]["quick_start_arguments"] == {"accelerator": "cpu", "devices": 1, "strategy": "ddp",
                                                            "precision": "32-true"}
        # model, optimizer = fabric.setup(model, optimizer): the run's SGD as job.make_optimizer builds it
        (setup,) = one["setup"]
        assert [o["kind"] for o in setup["objects"]] == ["other", "optimizer"] and setup["kwargs"] == []
        optimizer = setup["objects"][1]
        assert optimizer["class"] == "SGD" and optimizer["groups"] == 1
        assert {k: optimizer["defaults"][k] for k in ("lr", "momentum", "weight_decay", "nesterov", "dampening")} \
            == {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.0, "nesterov": False, "dampening": 0}


def test_setup_dataloaders_gets_plain_dataloaders(spied):
    seen, _, _ = spied
    for one in seen.values():
        # DataLoader(dataset) and DataLoader(valid_set) with the run's batch size: torch's own sampler, no drop_last,
        # and Fabric's own choice of distributed sampler (no use_distributed_sampler argument)
        assert one["loaders"] == [
            {"kind": "loader", "sampler": "SequentialSampler", "batch_size": 4, "drop_last": False, "size": 22,
             "kwargs": []},
            {"kind": "loader", "sampler": "SequentialSampler", "batch_size": 4, "drop_last": False, "size": 8,
             "kwargs": []}]


def test_the_loop_is_the_accumulation_pages(spied):
    seen, _, _ = spied
    for one in seen.values():
        events = "".join(one["events"]).lstrip("L")    # the scheduler's own first step, in its constructor
        # iteration % 2 != 0 accumulates: each epoch's first batch is a window of its own, the scheduler steps once
        # after each optimizer step
        assert events == "BSL" + "BBSL" * 3
        # fabric.backward(loss) on the loss module's output itself: not divided by the window
        assert set(one["backward"]) == {"MseLossBackward0"}


def test_clip_gradients_is_called_only_when_the_run_asks_for_clipping(spied):
    seen, effective, _ = spied
    assert seen["None"]["clip_calls"] == []
    assert seen["0.5"]["clip_calls"] == [{"args": [], "max_norm": 0.5}] * 4     # once per optimizer step
    assert effective["None"]["grad_clip"] is None and effective["0.5"]["grad_clip"] == 0.5


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import lightning

    _, effective, _ = spied
    for eff in effective.values():
        assert eff["mode"] == "defaults" and eff["quick_start"] and eff["departures"]
        for page in eff["quick_start"]:
            assert page["version"] == lightning.__version__ and page["follows"]
            assert page["address"].startswith(f"https://lightning.ai/docs/fabric/{page['version']}/")
        assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
        assert eff["deviations"] and all(Deviation(**d) for d in eff["deviations"])     # typed: a code and its text
