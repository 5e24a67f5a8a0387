"""The compile judge on the recorded evidence of the e2e tier's compile runs (tests/probe_variants/compile.py,
recorded by scripts/record_probe_fixtures.py --probe compile into tests/fixtures/compile/): the baseline compiled by
hand beside itself passes, the planted loop that drops the compile request and the one that halves every compiled
update fail naming it; on recorded evidence the judge's outcomes are exact."""
from __future__ import annotations

import pytest
from helpers import FIXTURES
from probe_runs import judged_recording, probe_status, recording
from probe_variants.compile import OUTCOMES, RUNS


def test_every_run_of_the_e2e_tier_has_a_recording_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "compile").glob("*.json.gz")}
    assert recorded == set(RUNS), "run: python scripts/record_probe_fixtures.py --probe compile"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_recording_is_judged_as_planted(name):
    result = judged_recording("compile", name)
    assert probe_status(result) == OUTCOMES[name], result["notes"]


def test_the_baseline_compiled_by_hand_changes_no_step_and_its_compiled_step_is_timed():
    result = judged_recording("compile", "baseline")
    f = result["figures"]
    assert result["findings"] == [] and f["changed_semantics"] == 0
    assert f["graphs"] >= 1 and f["graph_breaks"] == 0 and f["evalkit_graph_breaks"] == 0
    assert f["loss_rel_diff_max"] < 1e-5            # compiled kernels round float32 otherwise, no more
    assert f["rounds"] == 16 and f["compiled_over_eager_low"] <= f["compiled_over_eager_high"]


def test_a_dropped_compile_request_is_caught_even_though_every_step_is_right():
    result = judged_recording("compile", "ignores")
    assert [f["code"] for f in result["findings"]] == ["compile.not_compiled"]
    assert result["figures"]["graphs"] == 0 and result["figures"]["changed_semantics"] == 0


def test_a_compiled_path_computing_half_the_update_is_caught_from_its_first_step():
    jobs, _ = recording("compile", "halves")
    assert {j.name for j in jobs} == {"truth-eager", "truth-compiled", "truth-baseline-compiled"}
    result = judged_recording("compile", "halves")
    assert {f["code"] for f in result["findings"]} == {"compile.changes_step"}
    assert min(f["first_step"] for f in result["findings"]) == 1
    assert result["figures"]["loss_rel_diff_max"] > 1e-4
