"""The transformers Trainer's quick start on the token caliber (issue 44): which model the defaults run hands the
Trainer, and what the semantic probe's judge finds with it.

The Trainer passes `num_items_in_batch` (the window's target tokens) only to a model whose forward takes `**kwargs`
(or that says `accepts_loss_kwargs`: `Trainer.__init__`, `model_accepts_loss_kwargs`); a plain
`forward(x, labels)` module, what a team hands the Trainer as its own `torch.nn.Module`, gets no count, and the Trainer
divides each micro-batch's mean by the window's micro-batch count (`training_step`: `loss /
current_gradient_accumulation_steps`): a mean of micro-batch means, not the token mean over the window. The defaults
run uses such a model; `trainer.options.loss_kwargs=true` stands in for the page's `AutoModelForCausalLM` instead.

Each run is the Trainer trained in this process on the probe's own token job (world size 1) with evalkit's observers
attached (`semantic_plants.record_in_process`), judged as the probe judges a stored job."""
from __future__ import annotations

import inspect

import pytest
import torch
from helpers import compose_config
from semantic_plants import record_in_process

from evalkit.adapters.hf_trainer import HFTrainerAdapter, task_module
from evalkit.controller.probe_run import probe_job_config
from evalkit.probes.catalog import load_probe
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.plan import tokens_job_name

PROBE = load_probe("semantics")


SETTINGS = ["trainer=hf_trainer", "trainer.mode=defaults", "probe=semantics", "probe.world_sizes=[1]",
            "probe.clip=[false]", "probe.optimizers=[sgd]", "probe.short_epoch=false", "probe.tokens=true"]


def takes_kwargs(module: torch.nn.Module) -> bool:
    """What the Trainer inspects when the model has no `accepts_loss_kwargs`: a `**kwargs` in its forward."""
    return getattr(module, "accepts_loss_kwargs", None) is True or any(
        p.kind == inspect.Parameter.VAR_KEYWORD for p in inspect.signature(module.forward).parameters.values())


@pytest.fixture(scope="module")
def token_job():
    cfg = compose_config(*SETTINGS)
    jobs, _ = PROBE.plan(cfg, {})
    (job,) = [j for j in jobs if j.name == tokens_job_name(1)]
    return job.name, probe_job_config(cfg, PROBE, job)


@pytest.fixture(scope="module")
def recorded(token_job, tmp_path_factory):
    """recorded(options) -> the defaults run's evidence on the token job, each set of options trained once."""
    done = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def get(**options):
        key = tuple(sorted(options.items()))
        if key not in done:
            adapter = HFTrainerAdapter(mode="defaults", options=options)
            done[key] = record_in_process(adapter, *token_job, tmp_path_factory.mktemp("hf_tokens"))
        return done[key]

    yield get
    torch.set_num_threads(threads)


def test_the_defaults_runs_model_takes_no_loss_kwargs_and_the_option_gives_the_causal_lms(token_job):
    _, config = token_job
    from hydra.utils import get_method

    from evalkit.tasks.schemas import builder_arguments

    task = get_method(config.task._target_)(0, **builder_arguments(config.task))
    job = type("Job", (), {"task": task, "device": torch.device("cpu")})()
    assert task.loss_terms is not None                                             # the token caliber
    assert not takes_kwargs(HFTrainerAdapter(mode="defaults").model_for(job))
    assert takes_kwargs(HFTrainerAdapter(mode="defaults", options={"loss_kwargs": True}).model_for(job))
    assert not takes_kwargs(task_module(job, "aligned"))


def test_the_quick_start_with_a_plain_model_averages_micro_batch_means_and_the_judge_names_it(recorded):
    job = recorded()
    assert job.effective["model_accepts_loss_kwargs"] is False
    result = judge([job])
    found = {f.code: f for f in result.findings}
    assert "loss_norm.micro_mean" in found, [f.line() for f in result.findings]
    finding = found["loss_norm.micro_mean"]
    # step 1 is at LR 0 (the Trainer's warm-up starts there: lr.warmup_from_zero), so its update shows nothing
    assert finding.title.startswith("mean of micro-batch means") and finding.first_step == 2
    assert "num_items_in_batch" in finding.declared and "**kwargs" in finding.knob


def test_with_the_causal_lms_loss_kwargs_the_window_is_a_token_mean(recorded):
    job = recorded(loss_kwargs=True)
    assert job.effective["model_accepts_loss_kwargs"] is True
    result = judge([job])
    assert not [f for f in result.findings if f.code.startswith(("loss_norm", "unexplained"))], \
        [f.line() for f in result.findings]
