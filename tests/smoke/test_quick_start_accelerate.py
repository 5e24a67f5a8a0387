"""Accelerate's defaults mode is its quick start (issue 29): two short real defaults jobs through `evalkit` (one
without clipping, one asking for it), with Accelerate's own `Accelerator` spied on while the adapter runs
(`SpyAdapter`, loaded by the worker from this module), show that the Accelerator gets only the arguments the run
asks for, that `prepare` receives the run's own optimizer and schedule, a plain shuffling DataLoader (no sampler of
evalkit's, no drop_last), that `clip_grad_norm_` is called only when the run asks for clipping, and that the
adapter's quick-start pages and departures land in the effective config."""
from __future__ import annotations

import json
import os

import pytest
from quick_start_spy import describe, run_clip_pair

from evalkit.adapters.accelerate_loop import AccelerateAdapter
from evalkit.contract import OWNED, Deviation

pytestmark = pytest.mark.smoke
pytest.importorskip("accelerate")

# 40 samples in micro-batches of 4: 10 per epoch, windows of 2, so 4 optimizer steps stay inside epoch 0.
RUN = ["trainer=accelerate", "trainer._target_=test_quick_start_accelerate.SpyAdapter", "trainer.name=accelerate_spy",
       "trainer.mode=defaults", "task.n_train=40", "task.n_val=16", "task.hidden=8", "train.batch_size=4",
       "train.grad_accum=2", "train.max_steps=4", "train.val_every=2", "train.ckpt_every=0",
       "train.optimizer=sgd", "train.momentum=0.5", "train.lr=0.05", "train.schedule=linear",
       "train.warmup_steps=1", "observe.warmup_steps=0", "train.grad_clip=null,0.5"]


class SpyAdapter(AccelerateAdapter):
    """The adapter under test with `Accelerator.__init__`, `prepare`, `clip_grad_norm_`, `gather_for_metrics` and
    `accelerate.utils.set_seed` spied on for the length of `fit`; what they saw is written as JSON to
    `<options["spy"]>/clip_<grad_clip>.json`. The spies record and call through: the training is the adapter's."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def fit(self, job):
        import accelerate
        import accelerate.utils
        from accelerate import Accelerator

        seen = {"accelerator_kwargs": [], "prepared": [], "clip_calls": [], "gathers": 0, "set_seed": 0}
        originals = {name: getattr(Accelerator, name)
                     for name in ("__init__", "prepare", "clip_grad_norm_", "gather_for_metrics")}
        set_seed = accelerate.utils.set_seed

        def init(accelerator, *args, **kwargs):
            seen["accelerator_kwargs"].append({"args": list(args), **kwargs})
            originals["__init__"](accelerator, *args, **kwargs)

        def prepare(accelerator, *objects, **kwargs):
            for obj in objects:
                seen["prepared"].append(prepared(obj))
            return originals["prepare"](accelerator, *objects, **kwargs)

        def clip_grad_norm_(accelerator, parameters, max_norm, *args, **kwargs):
            seen["clip_calls"].append(max_norm)
            return originals["clip_grad_norm_"](accelerator, parameters, max_norm, *args, **kwargs)

        def gather_for_metrics(accelerator, *args, **kwargs):
            seen["gathers"] += 1
            return originals["gather_for_metrics"](accelerator, *args, **kwargs)

        def counted_set_seed(*args, **kwargs):
            seen["set_seed"] += 1
            return set_seed(*args, **kwargs)

        spies = {"__init__": init, "prepare": prepare, "clip_grad_norm_": clip_grad_norm_,
                 "gather_for_metrics": gather_for_metrics}
        try:
            for name, spy in spies.items():
                setattr(Accelerator, name, spy)
            accelerate.utils.set_seed = counted_set_seed
            super().fit(job)
        finally:
            for name, original in originals.items():
                setattr(Accelerator, name, original)
            accelerate.utils.set_seed = set_seed
        os.makedirs(self.options["spy"], exist_ok=True)
        with open(os.path.join(self.options["spy"], f"clip_{job.grad_clip}.json"), "w") as fh:
            json.dump(seen, fh, default=str)


def prepared(obj) -> dict:
    """`describe`, a scheduler with its LR lambdas."""
    out = describe(obj)
    return {**out, "lambdas": [repr(f) for f in getattr(obj, "lr_lambdas", [])]} if out["kind"] == "scheduler" \
        else out


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_accelerate")
    spy = workdir / "spy"
    return run_clip_pair(workdir, spy, RUN)


def test_the_accelerator_gets_only_what_the_run_asks_for(spied):
    seen, _, runs = spied
    assert sorted(seen) == ["0.5", "None"] and all(r.info.status == "FINISHED" for r in runs)
    for one in seen.values():
        # the quicktour's Accelerator() plus the run's accumulation (fp32: no mixed_precision); no cpu=True, no
        # project_dir, no plugin or kwargs handler, and no set_seed
        assert one["accelerator_kwargs"] == [{"args": [], "gradient_accumulation_steps": 2}]
        assert one["set_seed"] == 0


def test_prepare_gets_the_runs_optimizer_and_schedule_and_a_plain_shuffling_loader(spied):
    seen, _, _ = spied
    for one in seen.values():
        prepared = {p["kind"]: p for p in one["prepared"] if p["kind"] != "loader"}
        loaders = [p for p in one["prepared"] if p["kind"] == "loader"]
        # the run's SGD as job.make_optimizer builds it (one group, the run's hyperparameters) and its schedule
        optimizer = prepared["optimizer"]
        assert optimizer["class"] == "SGD" and optimizer["groups"] == 1
        assert {k: optimizer["defaults"][k] for k in ("lr", "momentum", "weight_decay", "nesterov", "dampening")} \
            == {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.0, "nesterov": False, "dampening": 0}
        assert prepared["scheduler"]["class"] == "LambdaLR"
        assert [lam.startswith("WarmupSchedule(kind='linear', warmup_steps=1") for lam in
                prepared["scheduler"]["lambdas"]] == [True]
        assert sum(p["kind"] in ("optimizer", "scheduler") for p in one["prepared"]) == 2
        # DataLoader(train_set, batch_size, shuffle=True) and DataLoader(val_set, batch_size): torch's own samplers
        assert loaders == [{"kind": "loader", "sampler": "RandomSampler", "batch_size": 4, "drop_last": False,
                            "size": 40},
                           {"kind": "loader", "sampler": "SequentialSampler", "batch_size": 4, "drop_last": False,
                            "size": 16}]
        assert one["gathers"] > 0                                   # the quicktour's gather_for_metrics


def test_clip_grad_norm_is_called_only_when_the_run_asks_for_clipping(spied):
    seen, effective, _ = spied
    assert seen["None"]["clip_calls"] == []
    assert seen["0.5"]["clip_calls"] == [0.5] * 4                  # once per optimizer step (sync_gradients)
    assert effective["0.5"]["accelerator_arguments"] == {"gradient_accumulation_steps": 2}


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import accelerate

    _, effective, _ = spied
    for eff in effective.values():
        assert eff["mode"] == "defaults" and eff["quick_start"] and eff["departures"]
        for page in eff["quick_start"]:
            assert page["version"] == accelerate.__version__ and page["follows"]
            assert page["address"].startswith(f"https://huggingface.co/docs/accelerate/v{page['version']}/en/")
        assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
        assert eff["deviations"] and all(Deviation(**d) for d in eff["deviations"])     # typed: a code and its text
