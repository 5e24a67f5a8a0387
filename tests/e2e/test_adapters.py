"""What every bundled wrapper must do through the real `evalkit` command: a new wrapper inherits these tests from its
YAML alone (they are parametrized over `conf/trainer/`), beside its own tests/e2e/test_adapter_<wrapper>.py for
what only it reports. The aligned fp32 run against the baseline, bit for bit, is tests/smoke/test_matrix.py's.

- bf16_mixed with grad_accum=2: trained in bfloat16 as observed from the outside, two micro-batches of 32 samples
  in each of the 50 optimizer steps, the baseline's metrics;
- world size 2: both ranks in the run, each validation merged over them; resumed from the step-20 checkpoint the
  wrapper wrote (whatever it names it), the run continues at step 21 with the continuous run's loss and LR, bit
  for bit.

A combination the wrapper documents as unsupported (its refusal citing a page of its docs) is skipped, naming it;
any other failure fails."""
from __future__ import annotations

import os

import pytest
import yaml
from adapter_runs import assert_resumed_at_step_21
from helpers import REPO, read_records

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.refusals import DOCUMENTED, refusal_of
from evalkit.trainers import bundled_trainers, installed_trainers

WRAPPERS = [t for t in bundled_trainers() if t != "baseline"]


def installed(trainer: str) -> None:
    ready, missing = installed_trainers()
    if trainer not in ready:
        pytest.skip(f"{trainer} is not installed: {missing.get(trainer, 'pip install -e .[all]')}")


def finished_or_documented(run, trainer: str) -> None:
    """Fails on a run that did not finish, unless the wrapper refused citing a page of its own docs (then skips,
    naming the page): the refusal is read as the probes read it (probes/refusals.py)."""
    if run.info.status == "FINISHED":
        return
    path = REPO / "src" / "evalkit" / "conf" / "trainer" / f"{trainer}.yaml"
    config = {"trainer": yaml.safe_load(path.read_text())}
    refusal = refusal_of(JobEvidence("job", run.info.run_id, run.info.status, config, dict(run.data.tags)))
    if refusal is not None and refusal.kind == DOCUMENTED:
        pytest.skip(f"{trainer}: {refusal.cited()}")
    pytest.fail(f"{run.info.status}: {run.data.tags.get('evalkit.failure_reason', '')[:2000]}")


@pytest.mark.parametrize("trainer", WRAPPERS)
def test_bf16_with_accumulation_runs_in_bfloat16_two_micro_batches_per_step(adapter_runs, trainer):
    installed(trainer)
    client, run = adapter_runs(trainer).bf16()
    finished_or_documented(run, trainer)
    assert run.data.tags["evalkit.observed_precision"] == "bfloat16"
    assert "evalkit.precision_mismatch" not in run.data.tags
    steps = read_records(client, run.info.run_id)
    assert [r["step"] for r in steps] == [str(s) for s in range(1, 51)]
    assert all(r["micro_batches"] == "2" and r["samples"] == "64" for r in steps), steps[:2]
    assert {"train/loss", "train/lr", "val/mse", "val/loss"} <= set(run.data.metrics)


@pytest.mark.parametrize("trainer", WRAPPERS)
def test_world_size_2_merges_both_ranks_and_resumes_from_step_20_bit_for_bit(adapter_runs, trainer):
    installed(trainer)
    client, continuous, resumed, checkpoint = adapter_runs(trainer).ddp()
    finished_or_documented(continuous, trainer)
    assert "perf/peak_mem_bytes_rank1" in continuous.data.metrics
    val = read_records(client, continuous.info.run_id, "val_rank0.csv")
    assert [r["step"] for r in val] == ["25", "40"] and all(r["ranks"] == "2" and r["samples"] == "128" for r in val)
    assert resumed is not None and os.path.exists(checkpoint)
    finished_or_documented(resumed, trainer)
    full, rest = assert_resumed_at_step_21(client, continuous, resumed)
    assert [(r["loss"], r["lr"]) for r in rest] == [(full[r["step"]]["loss"], full[r["step"]]["lr"]) for r in rest]
    assert resumed.data.tags["evalkit.resumed_at_step"] == "20"
