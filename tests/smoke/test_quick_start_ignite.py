"""Ignite's defaults mode is its quick start (issue 29): one short real defaults job through `evalkit`, with Ignite's
own factories spied on while the adapter runs (`SpyAdapter`, loaded by the worker from this module), shows that
`create_supervised_trainer` gets the run's own optimizer and only the arguments the run asks for (no clipping option
exists: the run's clip is not passed anywhere), that the data come from a plain shuffling loader (no sampler of
evalkit's, no drop_last), that the trainer carries the quick start's handlers (log_training_loss every log_interval
iterations, the training-set and validation-set evaluations at the run's cadence through Ignite's event filter, issue
43's one cadence rule, instead of the page's EPOCH_COMPLETED), the LRScheduler on ITERATION_STARTED, and that the
quick-start pages and departures land in the effective config."""
from __future__ import annotations

import json

import pytest
from helpers import effective_config, job_runs, ok, run_evalkit
from quick_start_spy import spy_path

from evalkit.adapters.ignite_engine import IgniteAdapter
from evalkit.contract import OWNED

pytestmark = pytest.mark.smoke
pytest.importorskip("ignite")

# 18 samples in micro-batches of 4: 5 iterations an epoch (the last of 2 samples); 4 optimizer steps of 2
# micro-batches are 8 iterations, so the run stops inside its second epoch; val_every=1: evaluations every 2.
RUN = ["trainer=ignite", "trainer._target_=test_quick_start_ignite.SpyAdapter", "trainer.name=ignite_spy",
       "trainer.mode=defaults", "task.n_train=18", "task.n_val=8", "task.hidden=8", "train.batch_size=4",
       "train.grad_accum=2", "train.max_steps=4", "train.val_every=1", "train.ckpt_every=0", "train.grad_clip=0.5",
       "train.optimizer=sgd", "train.momentum=0.5", "train.lr=0.05", "train.schedule=linear",
       "train.warmup_steps=1", "observe.warmup_steps=0"]


class SpyAdapter(IgniteAdapter):
    """The adapter under test with `ignite.engine.create_supervised_trainer` / `create_supervised_evaluator` and
    `ignite.handlers.LRScheduler` spied on for the length of `fit`; what they saw, and the trainer's handlers after
    the run, are written as JSON to `options["spy"]`. The spies record and call through."""
    option_names = ("spy",)   # the folder the spy writes what it saw to

    def fit(self, job):
        import ignite.engine
        import ignite.handlers
        from ignite.engine import Events

        seen = {"trainer_kwargs": None, "evaluators": [], "evaluations": [], "lr_handlers": []}
        engines = {}
        originals = (ignite.engine.create_supervised_trainer, ignite.engine.create_supervised_evaluator,
                     ignite.handlers.LRScheduler)
        create_trainer, create_evaluator, lr_scheduler = originals

        def trainer_factory(model, optimizer, loss_fn, *args, **kwargs):
            seen["trainer_args"] = len(args)
            seen["trainer_kwargs"] = kwargs
            seen["optimizer"] = {"class": type(optimizer).__name__, "defaults": optimizer.defaults,
                                 "groups": len(optimizer.param_groups)}
            engines["trainer"] = create_trainer(model, optimizer, loss_fn, *args, **kwargs)
            return engines["trainer"]

        def evaluator_factory(model, *args, **kwargs):
            evaluator = create_evaluator(model, *args, **kwargs)
            index = len(seen["evaluators"])
            seen["evaluators"].append({"metrics": sorted(kwargs.get("metrics") or {}),
                                       "kwargs": sorted(k for k in kwargs if k not in ("metrics", "device"))})
            evaluator.add_event_handler(Events.COMPLETED, lambda e: seen["evaluations"].append(
                [index, engines["trainer"].state.iteration]))
            return evaluator

        class SpiedLRScheduler(lr_scheduler):
            def __init__(self, scheduler, *args, **kwargs):
                seen["lr_handlers"].append({"scheduler": type(scheduler).__name__, "args": len(args),
                                            "kwargs": sorted(kwargs),
                                            "lambdas": [repr(f) for f in getattr(scheduler, "lr_lambdas", [])]})
                engines.setdefault("lr", []).append(self)
                super().__init__(scheduler, *args, **kwargs)

        ignite.engine.create_supervised_trainer = trainer_factory
        ignite.engine.create_supervised_evaluator = evaluator_factory
        ignite.handlers.LRScheduler = SpiedLRScheduler
        try:
            super().fit(job)
        finally:
            (ignite.engine.create_supervised_trainer, ignite.engine.create_supervised_evaluator,
             ignite.handlers.LRScheduler) = originals
        trainer = engines["trainer"]
        seen["handlers"] = {str(event): [getattr(h, "__name__", type(h).__name__) for h, _, _ in handlers]
                            for event, handlers in trainer._event_handlers.items() if handlers}
        seen["lr_on_iteration_started"] = [trainer.has_event_handler(h, Events.ITERATION_STARTED)
                                           for h in engines.get("lr", [])]
        loader = trainer.state.dataloader
        seen["loader"] = {"sampler": type(loader.sampler).__name__, "batch_size": loader.batch_size,
                          "drop_last": loader.drop_last}
        seen["state"] = {"iteration": trainer.state.iteration, "epoch": trainer.state.epoch,
                         "max_iters": trainer.state.max_iters, "epoch_length": trainer.state.epoch_length}
        with open(self.options["spy"], "w") as fh:
            json.dump(seen, fh, default=str)


@pytest.fixture(scope="module")
def spied(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("quick_start_ignite")
    spy = workdir / "spy.json"
    ok(run_evalkit(workdir, *RUN, f"+trainer.options.spy={spy}", env={"PYTHONPATH": spy_path()}))
    client, (run,) = job_runs(workdir)
    return json.loads(spy.read_text()), effective_config(client, run), run


def test_the_trainer_gets_the_runs_optimizer_and_only_the_arguments_the_run_asks_for(spied):
    seen, _, run = spied
    assert run.info.status == "FINISHED"
    # create_supervised_trainer(model, optimizer, criterion, device) + the run's accumulation (fp32: no amp_mode,
    # no scaler; the asked clip has no argument to go to)
    assert seen["trainer_args"] == 1 and seen["trainer_kwargs"] == {"gradient_accumulation_steps": 2}
    optimizer = seen["optimizer"]
    assert optimizer["class"] == "SGD" and optimizer["groups"] == 1
    assert {k: optimizer["defaults"][k] for k in ("lr", "momentum", "weight_decay", "nesterov", "dampening")} == {
        "lr": 0.05, "momentum": 0.5, "weight_decay": 0.0, "nesterov": False, "dampening": 0}
    # the quick start's two evaluators, the task's loss as their one metric, nothing else passed
    assert seen["evaluators"] == [{"metrics": ["loss"], "kwargs": []}] * 2


def test_the_data_come_from_a_plain_shuffling_loader(spied):
    seen, _, _ = spied
    assert seen["loader"] == {"sampler": "RandomSampler", "batch_size": 4, "drop_last": False}
    assert seen["state"] == {"iteration": 8, "epoch": 2, "max_iters": 8, "epoch_length": 5}


def test_the_trainer_carries_the_quick_starts_handlers_and_schedule(spied):
    seen, _, _ = spied
    handlers = seen["handlers"]
    assert not any(event.startswith("Events.EPOCH_COMPLETED") for event in handlers)     # not the page's cadence
    iteration = [h for event, names in handlers.items() if event.startswith("Events.ITERATION_COMPLETED")
                 for h in names]
    assert {"log_training_loss", "log_training_results", "log_validation_results"} <= set(iteration)
    # the run's cadence: after every optimizer step (val_every=1: every 2 iterations) and the last, the training set
    # then the validation set, once each
    assert seen["evaluations"] == [[index, it] for it in (2, 4, 6, 8) for index in (0, 1)]
    assert seen["lr_handlers"] == [{"scheduler": "LambdaLR", "args": 0, "kwargs": [],
                                    "lambdas": seen["lr_handlers"][0]["lambdas"]}]
    assert seen["lr_handlers"][0]["lambdas"][0].startswith("WarmupSchedule(kind='linear', warmup_steps=1")
    assert seen["lr_on_iteration_started"] == [True]


def test_the_quick_start_pages_and_departures_land_in_the_effective_config(spied):
    import ignite

    _, eff, _ = spied
    assert eff["mode"] == "defaults" and eff["quick_start"] and eff["departures"]
    for page in eff["quick_start"]:
        assert page["version"] == ignite.__version__ and page["follows"] and page["address"].startswith("https://")
    assert all(d["owns"] in OWNED and d["what"] and d["why"] for d in eff["departures"])
    assert eff["trainer_arguments"] == {"gradient_accumulation_steps": 2}
    assert eff["deviations"][0]["code"] == "clip.not_applied" and eff["grad_clip"] == 0.5
    assert eff["deviations"][0]["text"].startswith("defaults: create_supervised_trainer (quick start) has no gradient "
                                                   "clipping: train.grad_clip is not applied")
