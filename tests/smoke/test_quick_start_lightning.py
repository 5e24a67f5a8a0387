"""Lightning's defaults mode is its quick start (issue 29): one short real defaults job through `evalkit`, with
Lightning's `Trainer` and the adapter's `LightningModule` spied on while the adapter runs (`SpyAdapter`, loaded by
the worker from this module), shows that the Trainer gets the run's settings as its documented flags and nothing
else (no clip value when none is asked, no sampler setting), that `fit` receives plain DataLoaders (no sampler of
evalkit's, no drop_last), that `configure_optimizers` returns the run's optimizer and its scheduler as the quick start
does, that the training step logs its loss, that nothing validates or checkpoints after `fit`, and that the adapter's
quick-start pages and departures land in the effective config. The clip flag when a run asks for clipping is checked
on the adapter's own flags, without training."""
from __future__ import annotations

import json
import os

import pytest
from helpers import effective_config, job_runs, ok, read_records, run_evalkit
from quick_start_spy import describe, spy_path

from evalkit.adapters.lightning_trainer import LightningAdapter
from evalkit.contract import OWNED, Deviation

pytestmark = pytest.mark.smoke
pytest.importorskip("lightning")

# 22 samples in batches of 4: 6 batches an epoch, windows of 2, so step 3 ends epoch 0 and step 4 is in epoch 1;
# validation every 3 steps (6 batches) and a checkpoint every 3: the last step (4) gets neither.
RUN = ["trainer=lightning", "trainer._target_=test_quick_start_lightning.SpyAdapter", "trainer.name=lightning_spy",
       "trainer.mode=defaults", "task.n_train=22", "task.n_val=8", "task.hidden=8", "train.batch_size=4",
       "train.grad_accum=2", "train.max_steps=4", "train.val_every=3", "train.ckpt_every=3", "train.grad_clip=null",
       "train.optimizer=sgd", "train.momentum=0.5", "train.lr=0.05", "train.schedule=linear",
       "train.warmup_steps=1", "observe.warmup_steps=0"]
# The Trainer flags the quick start's pages write, or the reference documents for the run's settings
TRANSLATED = {"accelerator", "devices", "precision", "max_steps", "accumulate_grad_batches", "gradient_clip_val",
              "val_check_interval", "check_val_every_n_epoch", "callbacks", "default_root_dir"}


class SpyAdapter(LightningAdapter):
    """The adapter under test with `Trainer.__init__`, `fit` and `validate` spied on for the length of `fit`, and its
    LightningModule's `configure_optimizers` and `log`; what they saw is written as JSON to `<spy>/seen.json`. The
    spies record and call through: the training is the adapter's."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def __init__(self, mode: str = "aligned", options: dict | None = None):
        options = dict(options or {})
        self.spy = options.pop("spy")
        self.seen = {"trainer_kwargs": [], "fit": [], "validate": 0, "optimizers": [], "logged": []}
        super().__init__(mode, options)

    def module_class(self) -> type:
        base, seen = super().module_class(), self.seen

        class Spied(base):
            def configure_optimizers(self):
                out = super().configure_optimizers()
                seen["optimizers"].append({k: seen_as(v) for k, v in out.items()})
                return out

            def log(self, name, value, *args, **kwargs):
                seen["logged"].append({"name": name, "args": list(args), "kwargs": sorted(kwargs)})
                return super().log(name, value, *args, **kwargs)

        return Spied

    def fit(self, job):
        from lightning.pytorch import Trainer

        seen = self.seen
        originals = {name: getattr(Trainer, name) for name in ("__init__", "fit", "validate")}

        def init(trainer, *args, **kwargs):
            seen["trainer_kwargs"].append({"args": list(args), **{
                k: [type(c).__name__ for c in v] if k == "callbacks" else v for k, v in kwargs.items()}})
            originals["__init__"](trainer, *args, **kwargs)

        def fit(trainer, model, *args, **kwargs):
            seen["fit"].append({"args": [seen_as(a) for a in args],
                                **{k: seen_as(v) for k, v in kwargs.items()}})
            return originals["fit"](trainer, model, *args, **kwargs)

        def validate(trainer, *args, **kwargs):
            seen["validate"] += 1
            return originals["validate"](trainer, *args, **kwargs)

        try:
            for name, spy in {"__init__": init, "fit": fit, "validate": validate}.items():
                setattr(Trainer, name, spy)
            super().fit(job)
        finally:
            for name, original in originals.items():
                setattr(Trainer, name, original)
        os.makedirs(self.spy, exist_ok=True)
        with open(os.path.join(self.spy, "seen.json"), "w") as fh:
            json.dump(seen, fh, default=str)


def seen_as(obj):
    """A plain value as itself, anything else `describe`d."""
    return obj if isinstance(obj, (str, int, float, bool, type(None))) else describe(obj)


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_lightning")
    spy = workdir / "spy"
    ok(run_evalkit(workdir, *RUN, f"+trainer.options.spy={spy}", env={"PYTHONPATH": spy_path()}))
    client, (run,) = job_runs(workdir)
    return json.loads((spy / "seen.json").read_text()), effective_config(client, run), client, run


def test_the_trainer_gets_only_the_runs_settings_as_its_flags(spied):
    seen, _, _, run = spied
    assert run.info.status == "FINISHED"
    (kwargs,) = seen["trainer_kwargs"]
    assert kwargs.pop("args") == [] and set(kwargs) <= TRANSLATED, set(kwargs) - TRANSLATED
    assert "gradient_clip_val" not in kwargs                    # no clipping asked: Lightning's default (none)
    assert {k: v for k, v in kwargs.items() if k not in ("callbacks", "default_root_dir")} == {
        "accelerator": "cpu", "devices": 1, "precision": "32-true", "max_steps": 4, "accumulate_grad_batches": 2,
        "val_check_interval": 6, "check_val_every_n_epoch": None}
    assert kwargs["callbacks"] == ["ModelCheckpoint"]            # the run's ckpt_every; no final checkpoint of ours


def test_fit_gets_plain_dataloaders_and_nothing_runs_after_it(spied):
    seen, _, client, run = spied
    (fit,) = seen["fit"]
    assert fit["train_dataloaders"] == {"kind": "loader", "sampler": "SequentialSampler", "batch_size": 4,
                                        "drop_last": False, "size": 22}
    assert fit["val_dataloaders"] == {"kind": "loader", "sampler": "SequentialSampler", "batch_size": 4,
                                      "drop_last": False, "size": 8}
    assert seen["validate"] == 0
    # Lightning's sanity check, then every 6 batches (step 3); step 4, the last, is neither validated nor saved
    assert [r["step"] for r in read_records(client, run.info.run_id, "val_rank0.csv")] == ["0", "3"]
    assert sorted(os.listdir(run.data.tags["evalkit.checkpoint_dir"])) == ["step_00000003.ckpt"]


def test_configure_optimizers_returns_the_runs_optimizer_and_its_scheduler_as_the_quick_start_does(spied):
    seen, eff, _, _ = spied
    (returned,) = seen["optimizers"]
    assert set(returned) == {"optimizer", "lr_scheduler"}
    optimizer = returned["optimizer"]
    assert optimizer["class"] == "SGD" and optimizer["groups"] == 1
    assert {k: optimizer["defaults"][k] for k in ("lr", "momentum", "weight_decay", "nesterov", "dampening")} \
        == {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.0, "nesterov": False, "dampening": 0}
    assert returned["lr_scheduler"] == {"kind": "scheduler", "class": "LambdaLR"}      # a scheduler, not a config
    assert eff["trainer"]["lr_scheduler_configs"] == [{"interval": "epoch", "frequency": 1, "scheduler": "LambdaLR"}]


def test_the_training_step_logs_its_loss_as_the_quick_start_does(spied):
    seen, eff, _, _ = spied
    names = [entry["name"] for entry in seen["logged"]]
    assert names.count("train_loss") == 8 and "val_loss" in names        # every training batch (4 steps x 2)
    assert all(entry["args"] == [] and entry["kwargs"] == [] for entry in seen["logged"])   # self.log(name, value)
    assert eff["trainer"]["loggers"]


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import lightning

    _, eff, _, _ = spied
    assert eff["mode"] == "defaults" and eff["quick_start"] and eff["departures"]
    for page in eff["quick_start"]:
        assert page["version"] == lightning.__version__ and page["follows"]
        assert page["address"].startswith(f"https://lightning.ai/docs/pytorch/{page['version']}/")
    assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
    assert eff["deviations"] and all(Deviation(**d) for d in eff["deviations"])     # typed: a code and its text
