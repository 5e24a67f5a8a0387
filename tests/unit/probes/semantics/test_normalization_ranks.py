"""The token caliber at world size 2 (issue 44): each rank's micro-batches hold different numbers of target tokens, so
a loop where each rank divides its token losses by its OWN tokens (a per-rank token mean, DDP then averaging the
ranks: the transformers Trainer with `average_tokens_across_devices=False`) differs from the token mean over the
window's tokens on ALL ranks, which the careful loop takes; at world size 1 the two cannot be told apart.

The evidence is the recorded baseline's world-size-2 job (tests/fixtures/semantics/baseline.json: two ranks' records)
moved onto the probe's token job at world size 2: the micro-batches evalkit's order gives each rank, the expected LR,
and the parameters re-simulated in float64 with each rule written out here (`semantic_plants.replant_updates`), so that
only the normalization differs."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import compose_config
from omegaconf import OmegaConf
from semantic_plants import codes, replant_updates, set_stream

from evalkit.controller.probe_run import probe_job_config
from evalkit.probes.catalog import load_probe
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.oracle import Caliber, expected_lr, expected_windows
from evalkit.probes.semantics.plan import tokens_job_name

PROBE = load_probe("semantics")


SETTINGS = ["trainer=baseline", "probe=semantics", "probe.world_sizes=[1,2]", "probe.clip=[false]",
            "probe.optimizers=[sgd]", "probe.short_epoch=false", "probe.tokens=true"]


def token_config(world_size: int) -> dict:
    """The probe's token job's resolved config at the smallest world size, at `world_size` (ddp beyond 1)."""
    cfg = compose_config(*SETTINGS)
    jobs, _ = PROBE.plan(cfg, {})
    (job,) = [j for j in jobs if j.name == tokens_job_name(1)]
    config = OmegaConf.to_container(probe_job_config(cfg, PROBE, job), resolve=True)
    config["distributed"] = {**config["distributed"], "name": "ddp" if world_size > 1 else "none",
                             "world_size": world_size}
    return config


def token_mean(step, per_rank: bool) -> np.ndarray:
    """-lr x the window's gradient: each micro-batch's token-mean gradient times its tokens, over the tokens of its
    own rank (`per_rank`, the ranks then averaged as DDP averages) or of the window on every rank."""
    if per_rank:
        g = np.mean([sum(n * g for n, g in zip(step.counts[r], gs)) / sum(step.counts[r])
                     for r, gs in step.grads.items()], axis=0)
    else:
        total = sum(sum(c) for c in step.counts.values())
        g = sum(n * g for r, gs in step.grads.items() for n, g in zip(step.counts[r], gs)) / total
    return -step.lr * g


@pytest.fixture(scope="module")
def planted(recorded):
    """planted(per_rank) -> the world-size-2 token job's evidence, its updates from `token_mean`."""
    import copy

    def make(per_rank: bool):
        job = copy.deepcopy(recorded["ws2-noclip"])
        job.name, job.config, job.optimizer = tokens_job_name(2), token_config(2), []
        cal = Caliber.of(job.config)
        set_stream(job, {w.step: w.ids for w in expected_windows(cal)})
        for row in job.steps:
            row["lr"] = expected_lr(cal, int(row["step"]))
        replant_updates(job, lambda s: token_mean(s, per_rank))
        return job

    return make


def test_the_ranks_windows_hold_different_token_counts(planted):
    """What makes the two rules differ: in a window, the ranks' own token counts are not equal."""
    from evalkit.probes.semantics.oracle import GradientOracle

    config = token_config(2)
    oracle = GradientOracle(config)
    windows = expected_windows(Caliber.of(config))
    assert sorted(windows[0].ids) == [0, 1]
    per_rank = [[sum(oracle.terms(ids) for ids in w.ids[r]) for r in (0, 1)] for w in windows]
    assert sum(a != b for a, b in per_rank) >= 8, per_rank


def test_at_world_size_2_the_global_token_mean_passes(planted):
    result = judge([planted(False)])
    assert result.passed and not result.findings and not result.inconclusive, [f.line() for f in result.findings]
    assert result.figures["steps_checked"] == result.figures["steps_asked"] == 10
    assert any("normalized as the token mean over the window" in n for n in result.notes), result.notes


def test_a_per_rank_token_mean_is_told_from_the_global_one_and_named(planted):
    result = judge([planted(True)])
    assert codes(result) == ["loss_norm.rank_mean"], [f.line() for f in result.findings]
    finding = result.findings[0]
    assert finding.first_step == 1 and finding.job == "ws2-tokens"
    assert "per-rank token mean" in finding.title and "its own target tokens" in finding.title
    assert finding.explained_by[0] == finding.title
    assert "all ranks" in finding.knob


def test_the_plan_runs_the_token_job_at_world_size_2_too():
    """Where the plan runs world-size-2 jobs, the token job runs there as well (gloo on CPU), on the same token
    caliber and seed as at world size 1: one job more."""
    cfg = compose_config(*SETTINGS)
    jobs, _ = PROBE.plan(cfg, {})
    names = [j.name for j in jobs]
    assert names == ["ws1-noclip", "ws2-noclip", "ws1-tokens", "ws2-tokens"], names
    one, two = ({**j.overrides} for j in jobs if j.name in ("ws1-tokens", "ws2-tokens"))
    assert two.pop("distributed.world_size") == 2 and two.pop("distributed.name") == "ddp"
    assert one.pop("distributed.world_size") == 1 and one.pop("distributed.name") == "none"
    assert one == two and one["task"] == "tiny_lm"
    only_one, _ = PROBE.plan(compose_config(*SETTINGS[:2], "probe.world_sizes=[1]", *SETTINGS[3:]), {})
    assert [j.name for j in only_one] == ["ws1-noclip", "ws1-tokens"]
    assert [j.name for j in PROBE.plan(cfg, {n: None for n in names[:3]})[0]] == ["ws2-tokens"]
