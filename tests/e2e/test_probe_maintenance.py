"""The maintenance probe end to end (issue 14): real `evalkit probe=maintenance` runs of a planted trainer whose
wrapper is a fake distribution built by the test (tests/fakedist.py), with the package index a fake one served by
the test (helpers.FakeIndex), then the same offline (its cache, marked with its date), then unreachable with no cache
("unavailable", and the probe still judges everything else), and a trainer whose standard run crashes with nothing
else measured (`nothing`: inconclusive, never a pass): probe_runs.MAINTENANCE_RUNS. What the judge makes of them
(the wrapper's deprecations with the module that raised them, its dependencies and the torch bound it breaks, the
release history from the index or the cache, the verdict's column) is asserted in the unit tier on their recorded
evidence and measurements (tests/unit/probes/maintenance/test_judge_recorded.py); here the index is asked once and
never offline, the store holds what the probe runner logged, the verdict reads it, and each live result must still
equal its recording's (then run scripts/record_probe_fixtures.py --probe maintenance)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from fakedist import build_site
from helpers import ok, probe_result, store_uri
from probe_runs import (
    MAINTENANCE_RUNS,
    FakeIndex,
    judged_recording,
    maintenance_index,
    rerecord,
    result_shape,
    run_probe_variant,
)

from evalkit import names


def result_of(workdir) -> tuple:
    return probe_result(workdir, "maintenance")[1:]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    site = build_site(tmp_path_factory.mktemp("site"))
    cache = tmp_path_factory.mktemp("cache")
    dirs = {name: tmp_path_factory.mktemp(name) for name in MAINTENANCE_RUNS}
    with FakeIndex() as index:
        settings = maintenance_index(index.url, cache, tmp_path_factory.mktemp("empty-cache"))
        ok(run_probe_variant(dirs["online"], "maintenance", "online", *settings["online"], site=site))
        hits_online = list(index.hits)
        with ThreadPoolExecutor(2) as pool:
            later = [pool.submit(run_probe_variant, dirs[name], "maintenance", name, *settings[name], site=site)
                     for name in ("offline", "unreachable", "nothing")]
            for proc in later:
                ok(proc.result())
        hits_after = list(index.hits)
    by_name = {name: (*result_of(d), store_uri(d)) for name, d in dirs.items()}
    return by_name, hits_online, hits_after, cache


def test_the_wrapper_fails_the_probe(results):
    (by_name, *_) = results
    run, _, _ = by_name["online"]
    assert run.data.metrics[names.probe_pass("maintenance")] == 0.0


def test_release_history_comes_from_the_index_then_the_cache(results):
    by_name, hits_online, hits_after, cache = results
    assert hits_online == ["/fakewrap/json"] and (cache / "fakewrap.json").is_file()
    assert hits_after == hits_online                         # offline: the index was never asked


def test_an_unreachable_index_without_a_cache_still_finishes(results):
    (by_name, *_) = results
    run, _, _ = by_name["unreachable"]
    assert run.info.status == "FINISHED"


def test_a_run_with_nothing_to_pass_on_is_inconclusive_never_a_pass(results):
    """Issue 28 (c): the standard run crashed, no import figure, no release history: no pass is logged."""
    (by_name, *_) = results
    run, live, _ = by_name["nothing"]
    assert run.info.status == "FINISHED" and names.probe_pass("maintenance") not in run.data.metrics
    assert live["inconclusive"] and live["notes"][0].startswith("a pass needs every figure; not measured: ")


@pytest.mark.parametrize("name", sorted(MAINTENANCE_RUNS))
def test_each_live_run_is_judged_as_its_recording(results, name):
    (by_name, *_) = results
    _, live, _ = by_name[name]
    exact = ("deprecations", "deprecation_occurrences", "dependencies", "releases_per_year", "breaking_per_year")
    assert result_shape(live, *exact) == result_shape(judged_recording("maintenance", name), *exact), \
        f"{name}: {rerecord('maintenance')}"


def test_the_verdicts_maintenance_column_shows_the_probes_headline(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    (by_name, *_) = results
    run, _, uri = by_name["online"]
    _, _, records = store.read_runs(uri, "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    cell = row.dimensions["maintenance"]
    assert row.key.trainer == "deprecated" and cell.status == "fail"
    assert cell.figure == run.data.tags[names.probe_headline("maintenance")]
