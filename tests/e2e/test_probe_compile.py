"""The compile probe end to end: real `evalkit probe=compile` runs (tests/probe_variants/compile.py) on the baseline
(its loop compiled by hand, eager and compiled, then 16 timed rounds of both taking turns) and on
tests/planted/compile_loop.py dropping the compile request (`ignores`) or halving every compiled update (`halves`).
Exact outcomes: the baseline passes, each planted loop fails naming its plant; each live result must equal its
recording's (then run scripts/record_probe_fixtures.py --probe compile). The baseline's run times its jobs: nothing
else of the test session runs meanwhile (`machine_alone`)."""
from __future__ import annotations

import pytest
from helpers import ok, probe_result
from probe_runs import judged_recording, rerecord, result_shape, run_probe_variant
from probe_variants.compile import OUTCOMES, RUNS

from evalkit import names

EXACT = ("graphs", "graph_breaks", "changed_semantics")
PLANTED = {"ignores": "compile.not_compiled", "halves": "compile.changes_step"}


@pytest.fixture(scope="module")
def probes(machine_alone, tmp_path_factory):
    out = {}
    for name in RUNS:
        workdir = tmp_path_factory.mktemp(f"compile-{name}")
        ok(run_probe_variant(workdir, "compile", name))
        out[name] = probe_result(workdir, "compile")     # (client, run, result)
    return out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_live_run_is_judged_as_planted_and_as_its_recording(probes, name):
    _, run, live = probes[name]
    assert run.data.tags[names.probe_status("compile")] == OUTCOMES[name], live["notes"]
    if name in PLANTED:
        assert [f["code"] for f in live["findings"]] == [PLANTED[name]]
    assert result_shape(live, *EXACT) == result_shape(judged_recording("compile", name), *EXACT), \
        f"{name}: {rerecord('compile')}"


def test_the_baseline_compiled_cold_and_its_timed_arms_took_turns(probes):
    client, run, result = probes["baseline"]
    exp = client.get_experiment_by_name("evalkit").experiment_id
    children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    assert {c.info.status for c in children} == {"FINISHED"} and len(children) == 4
    figures = result["figures"]
    assert figures["rounds"] == 16 and figures["compile_s"] > 1.0 and figures["graphs"] >= 1
    assert figures["compiled_over_eager_low"] < figures["compiled_over_eager"] < figures["compiled_over_eager_high"]
