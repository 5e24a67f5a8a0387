"""One probe of each kind on one adapter, end to end: `evalkit -m probe=<each probe found> trainer=baseline`, each
at the smallest settings it accepts (a probe's settings are its own), every multirun into one store and one sweep id
(about 3 minutes here), read back.

The baseline is the adapter whose every outcome is known (the e2e probe tests plant the wrong ones): each probe
passes with its evidence recorded, and the stability probe's kills and resumes continue bit for bit (the smoke
tier's kill and resume). The performance probe runs here only to prove its path: this tier shares the machine,
so nothing it timed is asserted (its decisions are tested alone, in tests/e2e/test_probe_performance.py).
The maintenance probe stays offline (its release figures come from a cache in the test's folder)."""
from __future__ import annotations

import json

import pytest
from helpers import ok, run_evalkit, store_uri

from evalkit import names
from evalkit.probes.catalog import probe_names

PROBES = probe_names()
SWEEP = "smoke-probes"
# Each probe's smallest settings (a probe not named here runs at its own).
SMALLEST = {"semantics": ["probe.world_sizes=[1]", "probe.clip=[false]"], "consistency": ["probe.seeds=2"],
            "performance": ["probe.performance.depths=[2]", "probe.performance.max_rounds=32"],
            "stability": ["probe.world_sizes=[1]"],
            "maintenance": ["probe.maintenance.import_repeats=1", "probe.maintenance.offline=true"]}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("probes")
    cache = {"maintenance": [f"probe.maintenance.cache_dir={workdir / 'index'}"]}
    for probe in PROBES:
        ok(run_evalkit(workdir, f"probe={probe}", "trainer=baseline", *SMALLEST.get(probe, []), *cache.get(probe, []),
                       multirun=True, timeout=1200, env={names.SWEEP_NAME_ENV: SWEEP}))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri(workdir))
    exp = client.get_experiment_by_name("evalkit").experiment_id
    runs = client.search_runs([exp], f"tags.`{names.ROLE}` = 'probe'", max_results=100)
    results = {}
    for run in runs:
        dimension = run.data.tags[names.PROBE]
        with open(client.download_artifacts(run.info.run_id, f"probe/{dimension}.json")) as fh:
            results[dimension] = (run, json.load(fh))
    return client, exp, results


def test_each_probe_ran_once_into_one_sweep_with_its_jobs_as_children(probed):
    client, exp, results = probed
    assert sorted(results) == sorted(PROBES)
    assert {run.data.tags[names.SWEEP_ID] for run, _ in results.values()} == {SWEEP}    # one sweep id
    assert None not in {run.data.tags.get("mlflow.parentRunId") for run, _ in results.values()}   # each multirun's
    for dimension, (run, result) in results.items():
        assert run.info.status == "FINISHED", dimension
        assert run.data.tags[names.TRAINER] == "baseline" and run.data.tags[names.MODE] == "aligned"
        assert result["dimension"] == dimension and isinstance(result["findings"], list), dimension
        children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
        assert children and all(c.data.tags[names.ROLE] == "probe_job" for c in children), dimension


@pytest.mark.parametrize("dimension", [p for p in PROBES if p != "performance"])
def test_the_baseline_passes_every_probe_that_judges_it_against_itself(probed, dimension):
    _, _, results = probed
    run, result = results[dimension]
    assert result["passed"] is True and not result["inconclusive"], result["headline"]
    assert run.data.metrics[names.probe_pass(dimension)] == 1.0


def test_the_evidence_behind_each_pass_is_recorded(probed):
    _, _, results = probed

    def metrics(dimension):
        return results[dimension][0].data.metrics

    assert results["semantics"][1]["findings"] == [] and metrics("semantics")["probe/semantics/steps_checked"] > 0
    assert metrics("consistency")["probe/consistency/identical"] == 1.0
    assert metrics("consistency")["probe/consistency/steps_compared"] > 0
    assert 0 < metrics("functional")["probe/functional/items_passed"] == metrics("functional")[
        "probe/functional/items_total"]
    # the kills and resumes: every item judged and passed, resumes continuing bit for bit
    stability = metrics("stability")
    assert 0 < stability["probe/stability/items_passed"] == stability["probe/stability/items_total"]
    assert stability["probe/stability/resumes_bit_for_bit"] >= 1 and stability["probe/stability/unsafe_loads"] == 0
    customization = metrics("customization")
    assert customization["probe/customization/loss_steps_matching"] == customization[
        "probe/customization/loss_steps_checked"] > 0


def test_the_performance_probe_records_its_timings_and_start_up(probed):
    """Its path only: the figures exist and are positive (what they decide is tested alone, in e2e)."""
    run, result = probed[2]["performance"]
    timed = {k: v for k, v in run.data.metrics.items() if k.startswith("probe/performance/d2/")}
    assert timed["probe/performance/d2/baseline_ms"] > 0 and timed["probe/performance/d2/wrapper_ms"] > 0
    assert 0 < run.data.metrics["probe/performance/rounds"] <= 32
    assert any(k.startswith("probe/performance/startup/") for k in run.data.metrics)
    assert result["figures"] and {"passed", "inconclusive", "findings"} <= set(result)
