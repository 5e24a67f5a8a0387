"""The semantic probe's token caliber (issue 33): tiny_lm's padded sequences, whose micro-batches hold different numbers
of target tokens, where a careful loop takes the token mean over the WHOLE window.

Each loop is the planted loop (tests/planted/planted_loop.py) or the baseline, trained in this process on the probe's
own token job (its config as the probe plans it, `probe.tokens=true`) with evalkit's observers attached and its
records written as the shipper writes them (`semantic_plants.record_in_process`: well under a second a job); the
judge reads that evidence as it reads a stored job. Each wrong normalization is caught and named by its code; the
correct loop and the baseline pass, with the normalization they used named in the notes."""
from __future__ import annotations

import sys

import pytest
import torch
from helpers import PLANTED, compose_config
from semantic_plants import codes, record_in_process

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.controller.probe_run import probe_job_config
from evalkit.probes.catalog import load_probe
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.oracle import Caliber, GradientOracle, expected_windows
from evalkit.probes.semantics.plan import tokens_job_name

sys.path.insert(0, str(PLANTED))
from planted_loop import PlantedAdapter  # noqa: E402

PROBE = load_probe("semantics")

PROBE_SETTINGS = ["trainer=baseline", "probe=semantics", "probe.world_sizes=[1]", "probe.clip=[false]",
                  "probe.optimizers=[sgd]", "probe.short_epoch=false", "probe.tokens=true"]
# planted wrong -> (code, first step, words its finding must hold)
WRONG = {
    "loss_norm.micro_mean": ("loss_norm.micro_mean", 1, "mean of micro-batch means"),
    "loss_norm.micro_sum": ("loss_norm.micro_sum", 1, "micro-batch means summed"),
    "loss_norm.token_sum": ("loss_norm.token_sum", 1, "per-micro-batch sum"),
    "loss_norm.accum_scaled": ("loss_norm.accum_scaled", 1, "scaled by the accumulation count: multiplied by"),
}


@pytest.fixture(scope="module")
def token_job():
    """(name, config) of the probe's token job, as the runner composes it."""
    cfg = compose_config(*PROBE_SETTINGS)
    jobs, _ = PROBE.plan(cfg, {})
    (job,) = [j for j in jobs if j.name == tokens_job_name(1)]
    return job.name, probe_job_config(cfg, PROBE, job)


@pytest.fixture(scope="module")
def recorded(token_job, tmp_path_factory):
    """recorded(loop) -> the token job's evidence, each loop trained once per module ("baseline": the baseline)."""
    done = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def get(loop: str):
        if loop not in done:
            adapter = BaselineAdapter() if loop == "baseline" else PlantedAdapter(options={"wrong": loop})
            done[loop] = record_in_process(adapter, *token_job, tmp_path_factory.mktemp("tokens"))
        return done[loop]

    yield get
    torch.set_num_threads(threads)


def test_the_token_job_runs_tiny_lm_with_windows_of_different_token_counts(token_job):
    name, config = token_job
    assert name == "ws1-tokens" and config.task.name == "tiny_lm" and config.train.grad_accum == 3
    oracle = GradientOracle(config)
    windows = expected_windows(Caliber.of(config))
    counts = [[oracle.terms(ids) for ids in w.ids[0]] for w in windows]
    assert any(len(set(c)) > 1 for c in counts), counts          # the mean of means differs from the token mean
    assert [len(c) for c in counts[:4]] == [3, 3, 3, 1]             # and an epoch ends on a short window


@pytest.mark.parametrize("loop", ["none", "baseline"])
def test_the_token_mean_over_the_window_passes_and_is_named(recorded, loop):
    result = judge([recorded(loop)])
    assert result.passed and not result.findings and not result.inconclusive, [f.line() for f in result.findings]
    assert result.figures["steps_checked"] == result.figures["steps_asked"] == 10
    assert any("normalized as the token mean over the window" in n for n in result.notes), result.notes


def test_the_baseline_says_it_normalizes_by_the_windows_token_count(recorded):
    assert "window's token count" in recorded("baseline").effective["loss_division"]


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_each_wrong_normalization_is_caught_and_named(recorded, wrong):
    code, first, words = WRONG[wrong]
    assert code in ("loss_norm.micro_mean", "loss_norm.micro_sum", "loss_norm.token_sum", "loss_norm.accum_scaled")
    result = judge([recorded(wrong)])
    assert codes(result) == [code], [f.line() for f in result.findings]
    finding = result.findings[0]
    assert finding.first_step == first and words in finding.title and finding.explained_by[0] == finding.title
    assert "window's token count" in finding.knob


def test_a_wrong_normalization_the_adapter_declares_is_quoted_by_its_code(recorded):
    """The transformers Trainer's own deviation, declared under the code family, matched by code (never words)."""
    job = recorded("loss_norm.micro_sum")
    text = "a compute_loss that ignores num_items_in_batch is handed micro-batch means the Trainer no longer divides"
    job.effective = {**job.effective, "deviations": [{"code": "loss_norm", "text": text}]}
    (finding,) = judge([job]).findings
    assert finding.code == "loss_norm.micro_sum" and finding.declared == text


def test_the_mlp_truth_caliber_is_unchanged_by_the_token_rule(token_job):
    """On a task with a fixed number of loss terms the oracle counts none: the window's mean of means is expected."""
    cfg = compose_config(*PROBE_SETTINGS)
    jobs, _ = PROBE.plan(cfg, {})
    (free,) = [j for j in jobs if j.name == "ws1-noclip"]
    oracle = GradientOracle(probe_job_config(cfg, PROBE, free))
    assert oracle.loss_terms is None and oracle.terms([0, 1]) is None
