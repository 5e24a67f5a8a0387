"""The maintenance probe's judge (issue 14) on the recorded evidence and measurements of the e2e tier's four probe
runs (probe_runs.MAINTENANCE_RUNS, recorded by scripts/record_probe_fixtures.py into tests/fixtures/maintenance/): a
planted trainer whose wrapper is a fake distribution (tests/fakedist.py), its release history from a fake package
index, then from the cache offline (marked with its date), then unavailable (the index unreachable, no cache: said,
and everything else still judged); the verdict's column shows the figures beside the fail. The fourth (`nothing`,
issue 28): a trainer whose standard run crashes, with no module to import and no release history, is inconclusive,
naming each missing figure and how to get it, never a pass.
tests/e2e/test_probe_maintenance.py runs the four live and checks that their results still equal the recordings'."""
from __future__ import annotations

import pytest
from helpers import FIXTURES
from probe_runs import MAINTENANCE_RUNS, judged_recording, recording, verdict_cell


def test_every_run_of_the_e2e_tier_has_a_recording_with_its_measurements_and_nothing_else_does():
    recorded = {p.name.removesuffix(".json.gz") for p in (FIXTURES / "maintenance").glob("*.json.gz")}
    assert recorded == set(MAINTENANCE_RUNS) | {f"{n}.measured" for n in MAINTENANCE_RUNS}, \
        "run: python scripts/record_probe_fixtures.py --probe maintenance"


@pytest.mark.parametrize("name", sorted(set(MAINTENANCE_RUNS) - {"nothing"}))
def test_each_recording_holds_the_standard_run_and_the_measured_environment(name):
    jobs, measured = recording("maintenance", name)
    assert [(j.name, j.status) for j in jobs] == [("standard", "FINISHED")] and jobs[0].steps
    assert measured["distribution"] == "fakewrap" and measured["imports"] and measured["dependencies"]


def test_a_run_with_nothing_measured_but_its_dependencies_is_inconclusive_naming_what_is_missing():
    jobs, measured = recording("maintenance", "nothing")
    assert [(j.name, j.status) for j in jobs] == [("standard", "FAILED")]
    assert "imports" not in measured and measured["releases"]["source"] == "unavailable"
    result = judged_recording("maintenance", "nothing")
    assert result["inconclusive"] and not result["passed"] and result["findings"] == []
    first = result["notes"][0]
    assert first.startswith("a pass needs every figure; not measured: deprecations (the standard run ended FAILED: "
                            "RuntimeError: planted: the wrapper crashes before its first step: fix its cause")
    assert "import cost (the trainer names no module to import: set trainer.modules)" in first
    assert "release history (" in first and "run the probe with network access to the package index" in first
    assert "deprecations" not in result["figures"] and result["figures"]["dependencies"] == 0
    cell = verdict_cell("maintenance", result, "broken")
    assert cell.status == "inconclusive" and cell.status != "pass"


def test_the_wrappers_deprecations_are_counted_with_the_module_that_raised_them():
    result = judged_recording("maintenance", "online")
    assert result["figures"]["deprecations"] == 1 and result["figures"]["deprecation_occurrences"] == 12
    table = next(s for s in result["sections"] if s.startswith("| count"))
    assert "| 12 | DeprecationWarning | fakewrap (fakewrap) |" in table and "deprecated_loop.py" in table
    assert "maintenance.deprecations" in [f["code"] for f in result["findings"]]


def test_dependencies_and_a_bound_the_installed_torch_breaks_are_read_from_metadata():
    result = judged_recording("maintenance", "online")
    assert result["figures"]["dependencies"] == 2           # fakedep and fake-leaf; torch and numpy are the core
    conflict = next(f for f in result["findings"] if f["code"] == "maintenance.core_conflict")
    assert conflict["title"].startswith("fakewrap requires torch<2.10 (installed 2.13")
    assert not result["passed"] and not result["inconclusive"]
    assert result["figures"]["import_s"] > 0 and result["figures"]["import_mib"] > 3   # it writes 4 MiB


def test_release_history_comes_from_the_index_then_the_cache_marked_with_its_date():
    online, offline = judged_recording("maintenance", "online"), judged_recording("maintenance", "offline")
    assert online["figures"]["releases_per_year"] == 4 and online["figures"]["breaking_per_year"] == 1
    assert "(cached, as of 20" in offline["headline"] and "(cached" not in online["headline"]
    assert offline["figures"]["releases_per_year"] == 4


def test_an_unreachable_index_without_a_cache_says_unavailable_and_judges_the_rest():
    result = judged_recording("maintenance", "unreachable")
    assert "releases: unavailable" in result["headline"]
    assert "releases_per_year" not in result["figures"] and result["figures"]["dependencies"] == 2
    assert any(n.startswith("release history unavailable (") for n in result["notes"])


def test_the_verdicts_maintenance_column_shows_the_figures_beside_the_fail():
    result = judged_recording("maintenance", "online")
    cell = verdict_cell("maintenance", result, "deprecated")
    assert cell.status == "fail" and cell.figure == result["headline"]
    assert cell.figure.startswith("1 deprecations, import ") and "2 deps" in cell.figure
