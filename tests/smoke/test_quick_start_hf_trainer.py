"""The transformers Trainer's defaults mode is its quick start (issue 29): one short real defaults job through
`evalkit`, with the adapter's own Trainer class spied on (`SpyAdapter`, loaded by the worker from this module),
shows that the Trainer receives no optimizer, scheduler, sampler or clip value of evalkit's, builds its own
optimizer (decay / no-decay groups) and scheduler from the run's settings translated into TrainingArguments, and
that the adapter's quick-start pages and departures land in the effective config."""
from __future__ import annotations

import json

import pytest
from helpers import effective_config, job_runs, ok, run_evalkit
from quick_start_spy import spy_path

from evalkit.adapters.hf_trainer import HFTrainerAdapter
from evalkit.contract import OWNED

pytestmark = pytest.mark.smoke
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

# The run: AdamW with a weight decay, linear warm-up then decay, no clipping asked.
RUN = ["trainer=hf_trainer", "trainer._target_=test_quick_start_hf_trainer.SpyAdapter", "trainer.name=hf_spy",
       "trainer.mode=defaults",
       "task.n_train=40", "task.n_val=16", "task.hidden=8", "train.batch_size=4", "train.grad_accum=2",
       "train.max_steps=4", "train.val_every=0", "train.ckpt_every=0", "train.grad_clip=null",
       "train.optimizer=adamw", "train.lr=0.01", "train.weight_decay=0.1", "train.betas=[0.8,0.99]",
       "train.schedule=linear", "train.warmup_steps=2", "train.min_lr_ratio=0.0", "observe.warmup_steps=0"]
# TrainingArguments the quick start writes, or the reference documents for the run's settings: the Trainer may get
# nothing else (a seed, a clip value, drop_last, a sampler setting, ...).
TRANSLATED = {"output_dir", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "bf16",
              "fp16", "learning_rate", "weight_decay", "optim", "optim_args", "adam_beta1", "adam_beta2",
              "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "logging_steps", "eval_strategy",
              "eval_steps", "save_strategy", "save_steps", "load_best_model_at_end", "use_cpu"}


class SpyAdapter(HFTrainerAdapter):
    """The adapter under test, its Trainer class spied on: what `Trainer(...)` is given, what the Trainer holds
    before and after building its optimizer and scheduler, the sampler of its training loader; written as JSON to
    `options["spy"]` (rank 0)."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def trainer_class(self) -> type:
        base, out, seen = super().trainer_class(), self.options["spy"], {}

        def save() -> None:
            with open(out, "w") as fh:
                json.dump(seen, fh, default=str)

        class Spied(base):
            def __init__(self, *args, **kwargs):
                seen["trainer_kwargs"] = sorted(kwargs)
                seen["optimizers"] = repr(kwargs.get("optimizers"))
                seen["args"] = kwargs["args"].to_dict()
                super().__init__(*args, **kwargs)

            def create_optimizer(self, *args, **kwargs):
                seen["optimizer_before"] = repr(self.optimizer)
                optimizer = super().create_optimizer(*args, **kwargs)
                names = {id(p): n for n, p in self.model.named_parameters()}
                seen["optimizer"] = type(optimizer).__name__
                seen["groups"] = [{**{k: v for k, v in g.items() if k != "params"},
                                   "params": sorted(names[id(p)] for p in g["params"])}
                                  for g in optimizer.param_groups]
                return optimizer

            def create_scheduler(self, *args, **kwargs):
                seen["scheduler_before"] = repr(self.lr_scheduler)
                scheduler = super().create_scheduler(*args, **kwargs)
                seen["scheduler"] = type(scheduler).__name__
                seen["lr_factors"] = [scheduler.lr_lambdas[0](s) for s in range(5)]
                save()
                return scheduler

            def get_train_dataloader(self):
                loader = super().get_train_dataloader()
                seen["evalkit_sampler"] = repr(self.evalkit_sampler)
                seen["sampler"] = type(loader.batch_sampler.sampler).__name__
                seen["drop_last"] = loader.batch_sampler.drop_last
                seen["trainer_sampler"] = type(self._get_train_sampler()).__name__
                save()
                return loader

        return Spied


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_hf")
    spy = workdir / "spy.json"
    ok(run_evalkit(workdir, *RUN, f"+trainer.options.spy={spy}", env={"PYTHONPATH": spy_path()}))
    client, (run,) = job_runs(workdir)
    return json.loads(spy.read_text()), effective_config(client, run), run


def test_the_trainer_gets_no_optimizer_scheduler_sampler_or_clip_of_evalkits(spied):
    from transformers import TrainingArguments

    seen, _, run = spied
    assert run.info.status == "FINISHED"
    assert "optimizers" not in seen["trainer_kwargs"], seen["optimizers"]
    assert seen["optimizer_before"] == "None" and seen["scheduler_before"] == "None"
    # the Trainer's RandomSampler, which Accelerate's prepare (use_seedable_sampler=True) makes seedable
    assert seen["evalkit_sampler"] == "None" and seen["trainer_sampler"] == "RandomSampler"
    assert seen["sampler"] == "SeedableRandomSampler" and seen["drop_last"] is False
    # the same arguments rebuilt from the translated ones alone: anything else passed shows as a difference
    rebuilt = TrainingArguments(**{k: seen["args"][k] for k in TRANSLATED}).to_dict()
    assert {k: v for k, v in seen["args"].items() if v != rebuilt[k]} == {}
    assert seen["args"]["max_grad_norm"] == 1.0                   # no clipping asked: the Trainer's default


def test_the_trainer_builds_its_own_optimizer_and_schedule_from_the_runs_settings(spied):
    seen, _, _ = spied
    args = seen["args"]
    assert (args["learning_rate"], args["weight_decay"], args["adam_beta1"], args["adam_beta2"]) == (
        0.01, 0.1, 0.8, 0.99)
    assert (args["lr_scheduler_type"], args["warmup_steps"], args["max_steps"]) == ("linear", 2, 4)
    assert seen["optimizer"] == "AdamW"
    decay, no_decay = seen["groups"]
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert decay["params"] and all(n.endswith(".weight") for n in decay["params"])
    assert no_decay["params"] and all(n.endswith(".bias") for n in no_decay["params"])
    assert all(g["betas"] == [0.8, 0.99] for g in seen["groups"])
    assert seen["scheduler"] == "LambdaLR" and seen["lr_factors"] == [0.0, 0.5, 1.0, 0.5, 0.0]  # warm-up from 0


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import transformers

    _, eff, _ = spied
    assert eff["mode"] == "defaults" and eff["quick_start"] and eff["departures"]
    for page in eff["quick_start"]:
        assert page["version"] == transformers.__version__ and page["follows"]
        assert page["address"].startswith(f"https://huggingface.co/docs/transformers/v{page['version']}/")
    assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
    assert eff["built_by_trainer"]["created_scheduler"] is True
    assert "max_grad_norm" not in eff["quick_start_arguments"]
