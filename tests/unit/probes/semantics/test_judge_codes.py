"""Every finding code the semantic judge can emit is fired by at least one planted test (issue 29): by a recorded run
of a planted loop or of a real wrapper (tests/fixtures/semantics/), judged here again, or by a plant in memory on the
recorded baseline or on streams with known truth, or by a planted loop trained in this process (`IN_MEMORY`: the test
that plants it, which must exist and name the code). A new code without a
plant fails here, naming it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import FIXTURES
from semantic_plants import codes, regroup, replant_updates
from semantics_runs import RECORDED_SEMANTICS, recorded_evidence

import evalkit.probes.semantics.judge as judge_module
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.oracle import Caliber

FAMILIES = ("unexplained", "lr", "sched", "loss", "window", "clip", "wd", "ddp", "order", "val", "forward", "steps",
            "precision", "micro", "optim", "threads", "job", "batch", "loss_norm")
CODE = re.compile(r'"((?:%s)\.[a-z_]+)"' % "|".join(FAMILIES))
NOT_CODES = {"precision.name", "precision.autocast_dtype", "precision.grad_scaler"}    # the plan's config keys

# code -> the test (module::function) that plants it in memory on the recorded baseline
IN_MEMORY = {
    "job.failed": "test_judge::test_failed_job_is_a_finding_with_its_reason",
    "micro.train_mode": "test_judge::test_records_checks",
    "threads.changed": "test_judge::test_a_wrapper_that_changes_the_thread_count_is_a_finding",
    "unexplained.lr": "test_judge::test_unknown_lr_is_unexplained_and_a_declared_deviation_is_quoted",
    "sched.count": "test_judge_codes::test_scheduler_stepped_without_moving_the_lr_is_a_count_finding",
    "val.repeated": "test_judge_codes::test_validation_samples_repeated_across_ranks_are_a_finding",
    "lr.rescaled_schedule": "test_judge_codes::test_a_schedule_run_at_another_pace_is_named_rescaled",
    "unexplained.windows": "test_judge_codes::test_micro_batches_grouped_by_no_known_layout_are_unexplained",
    "window.spans_epochs": "test_explain_coverage::test_windows_across_epochs_under_the_wrappers_own_order",
    "batch.partial": "test_explain_coverage::test_windows_counted_across_epochs_and_kept_incomplete_batches_are_named",
    "window.first_single": "test_explain_coverage::test_fabric_pages_accumulation_first_window_of_one_is_named",
    "ddp.not_sharded": "test_explain_coverage::test_ranks_that_trained_on_the_same_samples_unsynchronized_are_named",
    "ddp.unsynchronized": "test_explain_coverage::test_an_unsynchronized_rank_is_named_from_its_updates",
    **{f"loss_norm.{n}": "test_normalization_tokens::test_each_wrong_normalization_is_caught_and_named"   # in-process
       for n in ("micro_mean", "micro_sum", "token_sum", "accum_scaled")},
    "loss_norm.rank_mean": "test_normalization_ranks::test_a_per_rank_token_mean_is_told_from_the_global_one_and_named",
}


def emitted_codes() -> set[str]:
    """The code literals of the judge's modules (the plan's config keys aside)."""
    found = set()
    for path in Path(judge_module.__file__).parent.glob("*.py"):
        found |= set(CODE.findall(path.read_text()))
    return found - NOT_CODES


@pytest.fixture(scope="module")
def fired_by_recordings() -> set[str]:
    recordings = [*RECORDED_SEMANTICS.glob("*.json.gz"), *(FIXTURES / "semantics" / "wrappers").glob("*.json.gz")]
    return {f.code for path in recordings for f in judge(recorded_evidence(path)).findings}


def test_every_code_the_judge_can_emit_is_fired_by_a_planted_test(fired_by_recordings):
    emitted = emitted_codes()
    assert len(emitted) > 35 and "optim.other" in emitted and "wd.skipped" in emitted    # the scan reads the package
    unplanted = emitted - fired_by_recordings - set(IN_MEMORY)
    assert not unplanted, f"finding codes no planted test fires: {sorted(unplanted)}"
    assert set(IN_MEMORY) <= emitted, sorted(set(IN_MEMORY) - emitted)


@pytest.mark.parametrize("code", sorted(IN_MEMORY))
def test_each_plant_in_memory_exists_and_names_its_code(code):
    module, function = IN_MEMORY[code].split("::")
    text = Path(__file__).with_name(f"{module}.py").read_text()
    node = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    assert node is not None, f"{IN_MEMORY[code]} does not exist"
    assert f'"{code}"' in ast.get_source_segment(text, node), f"{IN_MEMORY[code]} does not assert {code}"


# ------------------------------------------------------------------ the plants no recording holds
def test_scheduler_stepped_without_moving_the_lr_is_a_count_finding(jobs):
    job = jobs["ws1-noclip"]
    for row in job.steps:
        row["sched_steps"] = 2 * (row["step"] - 1)       # twice per step, the LR as expected (a second scheduler)
    result = judge([job])
    assert codes(result) == ["sched.count"]
    assert "2 times per optimizer step" in result.findings[0].explained_by[0]


def test_validation_samples_repeated_across_ranks_are_a_finding(jobs):
    """A distributed sampler's padding (issue 43): the repeats are a finding, whether or not the wrapper's
    evaluation counted them once in its metric (trainer.val_dedup)."""
    for dedup, counted in ((False, "each counted again"), (True, "counted once")):
        job = jobs["ws1-noclip"]
        for row in job.val:
            row["repeated_samples"], row["deduplicated"] = 1, dedup or ""
        result = judge([job])
        assert codes(result) == ["val.repeated"]
        finding = result.findings[0]
        assert finding.first_step == job.val[0]["step"] and counted in finding.observed
        assert finding.size == f"{len(job.val)} validation run(s)"


def test_a_schedule_run_at_another_pace_is_named_rescaled(jobs):
    job = jobs["ws1-noclip"]
    cal = Caliber.of(job.config)
    for row in job.steps:
        row["lr"] = cal.lr_at(2 * (row["step"] - 1) + 1)
    replant_updates(job)
    result = judge([job])
    assert codes(result) == ["lr.rescaled_schedule"]
    assert "x2 shifted by +1" in result.findings[0].explained_by[0]


def test_micro_batches_grouped_by_no_known_layout_are_unexplained(jobs):
    job = jobs["ws1-noclip"]
    regroup(job, [2, 3, 3, 2] * 3)   # each epoch's 10 micro-batches in windows of 2, 3, 3, 2 instead of 3, 3, 3, 1
    replant_updates(job)
    assert codes(judge([job])) == ["unexplained.windows"]
