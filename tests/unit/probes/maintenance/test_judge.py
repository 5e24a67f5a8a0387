"""The maintenance probe's judge on synthetic measurements: each figure against its configured threshold, the
wrapper's own deprecations told from torch's, bounds that block torch's next minor release, release figures from
the cache marked with their date, and unavailable ones said and never scored: a pass needs every figure, so a
missing one leaves the probe inconclusive, naming it and how to get it (issue 28)."""
from __future__ import annotations

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.maintenance.judge import blocks_next_minor, judge

LIMITS = {"max_deprecations": 1, "max_import_s": 6.0, "max_import_mib": 400.0, "max_dependencies": 3,
          "max_install_mib": 100.0, "max_breaking_per_year": 2.0, "max_release_age_days": 365,
          "allow_core_upper_bounds": False}


def standard(*warnings: dict, status: str = "FINISHED") -> JobEvidence:
    job = JobEvidence("standard", "std-run", status, {})
    job.summary = {"deprecations": list(warnings)}
    return job


def warning(dist: str | None, count: int = 1, on: str | None = None, message: str = "old") -> dict:
    return {"category": "FutureWarning", "message": message, "module": f"{dist}.x", "distribution": dist,
            "count": count, "attributed_to": ["/v/site-packages/w/a.py:3"], "attributed_distribution": on}


def measured(**over) -> dict:
    base = {
        "limits": dict(LIMITS), "distribution": "fakewrap", "version": "1.2.0", "core": ["torch", "numpy", "sympy"],
        "dependencies": {"root": "fakewrap", "root_version": "1.2.0", "root_size_bytes": 2**20, "count": 3,
                         "packages": [{"name": "fakedep", "version": "1.0", "size_bytes": 2**20},
                                      {"name": "torch", "version": "2.13.0", "size_bytes": 700 * 2**20},
                                      {"name": "sympy", "version": "1.0", "size_bytes": 2**20}],
                         "constraints": [{"package": "torch", "declared_by": "fakewrap", "specifier": "<4,>=2",
                                          "installed_version": "2.13.0", "satisfied": True}], "missing": []},
        "imports": {"median_seconds": 1.5, "median_mib_added": 120.0, "error": None},
        "releases": {"source": "index", "as_of": "2026-12-01T10:00:00+00:00", "breaking_per_year": 1,
                     "releases": 6, "breaking_rule": "major", "days_since_installed_release": 40,
                     "releases_since_installed": 0, "installed_version": "1.2.0", "latest_version": "1.2.0"},
        "candidates": [], "notes": []}
    base.update(over)
    return base


def test_an_environment_within_every_threshold_passes_with_its_figures():
    result = judge([standard(warning("torch", 5))], measured())
    assert result.passed and result.findings == []
    assert result.figures["dependencies"] == 1 and result.figures["dependencies_all"] == 3   # torch's own excluded
    assert result.figures["install_mib"] == 2.0 and result.figures["deprecations"] == 0
    assert result.headline == "0 deprecations, import 1.5 s/+120 MiB, 1 deps (2 MiB), 1 breaking/yr of 6 releases"


def test_only_the_wrappers_own_deprecations_count_including_a_torch_warning_on_its_line():
    result = judge([standard(warning("torch", 5), warning("fakewrap", 3), warning("typing-extensions", 2,
                                                                                 on="fakewrap", message="b"))],
                   measured())
    assert result.figures["deprecations"] == 2 and result.figures["deprecation_occurrences"] == 5
    assert [f.code for f in result.findings] == ["maintenance.deprecations"]
    table = next(s for s in result.sections if s.startswith("| count"))
    assert table.count("| yes |") == 2 and table.count("| no |") == 1 and "w/a.py:3" in table


def test_each_threshold_is_the_configured_one():
    over = measured(imports={"median_seconds": 7.0, "median_mib_added": 500.0, "error": None})
    assert [f.code for f in judge([standard()], over).findings] == ["maintenance.import_s", "maintenance.import_mib"]
    relaxed = measured(imports=over["imports"], limits={**LIMITS, "max_import_s": 8.0, "max_import_mib": 600.0})
    assert judge([standard()], relaxed).passed
    breaking = measured(releases={**measured()["releases"], "breaking_per_year": 3})
    assert [f.code for f in judge([standard()], breaking).findings] == ["maintenance.breaking"]


def test_a_bound_that_blocks_torchs_next_minor_release_or_is_not_satisfied_fails():
    assert not blocks_next_minor("<4,>=2", "2.13.0+cpu") and blocks_next_minor("<2.14", "2.13.0+cpu")
    assert blocks_next_minor("==2.13.0", "2.13.0") and not blocks_next_minor(">=2", "2.13.0")
    deps = measured()["dependencies"]
    pinned = {**deps, "constraints": [{**deps["constraints"][0], "specifier": "<2.14,>=2"}]}
    assert [f.code for f in judge([standard()], measured(dependencies=pinned)).findings] == [
        "maintenance.core_upper_bound"]
    allowed = measured(dependencies=pinned, limits={**LIMITS, "allow_core_upper_bounds": True})
    assert judge([standard()], allowed).passed
    broken = {**deps, "constraints": [{**deps["constraints"][0], "specifier": "<2.10", "satisfied": False}]}
    assert [f.code for f in judge([standard()], measured(dependencies=broken)).findings] == [
        "maintenance.core_conflict"]


def test_release_figures_from_the_cache_carry_their_date_and_unavailable_ones_are_not_scored():
    cached = measured(releases={**measured()["releases"], "source": "cache", "reason": "connection refused"})
    result = judge([standard()], cached)
    assert "(cached, as of 2026-12-01)" in result.headline
    assert any(n.startswith("release figures from the cache as of 2026-12-01: connection refused")
               for n in result.notes)
    gone = judge([standard()], measured(releases={"source": "unavailable", "reason": "offline, no cache"}))
    assert gone.inconclusive and not gone.passed and gone.findings == []
    assert "releases: unavailable" in gone.headline and "breaking_per_year" not in gone.figures
    assert gone.notes[0] == ("a pass needs every figure; not measured: release history (offline, no cache: run the "
                             "probe with network access to the package index (probe.maintenance.index_url), or "
                             "offline with the cache such a run wrote (probe.maintenance.cache_dir)")
    assert any("release history unavailable (offline, no cache)" in n for n in gone.notes)
    over = measured(releases={"source": "unavailable", "reason": "offline"}, limits={**LIMITS, "max_dependencies": 0})
    assert judge([standard()], over).status == "fail"           # a finding decides whatever is missing


def test_a_stale_install_and_a_candidate_that_cannot_be_installed_are_said():
    stale = measured(releases={**measured()["releases"], "days_since_installed_release": 500,
                               "releases_since_installed": 4, "latest_version": "2.0.0"})
    assert [f.code for f in judge([standard()], stale).findings] == ["maintenance.stale"]
    cand = {"name": "mosaicml", "installed": False, "source": "index", "latest_version": "0.32.1",
            "conflicts": ["mosaicml requires torch<2.7.1,>=2.6.0, installed 2.13.0+cpu"]}
    result = judge([standard()], measured(candidates=[cand]))
    assert any(n.startswith("candidate mosaicml 0.32.1 (not installed) cannot be installed beside this "
                            "environment: mosaicml requires torch<2.7.1") for n in result.notes)


def test_a_failed_standard_run_is_said_and_the_baseline_has_nothing_to_measure():
    result = judge([standard(status="FAILED")], measured())
    assert any("the standard run ended FAILED" in n for n in result.notes) and "deprecations" not in result.figures
    assert result.inconclusive and result.notes[0].startswith("a pass needs every figure; not measured: deprecations")
    baseline = judge([standard()], {"limits": LIMITS, "distribution": "", "notes": ["plain torch"]})
    assert baseline.passed and baseline.figures == {"deprecations": 0.0, "deprecation_occurrences": 0.0}


def test_nothing_measured_is_inconclusive_naming_each_missing_figure_and_how_to_get_it():
    """Issue 28 (c): the standard run failed, no import figure, releases unavailable: never a pass."""
    crashed = standard(status="FAILED")
    crashed.tags = {"evalkit.failure_reason": "RuntimeError: planted"}
    nothing = measured(imports=None, releases={"source": "unavailable", "reason": "index unreachable, no cache"})
    result = judge([crashed], nothing)
    assert result.status == "inconclusive" and result.findings == []
    first = result.notes[0]
    assert first.startswith("a pass needs every figure; not measured: deprecations (the standard run ended FAILED: "
                            "RuntimeError: planted: fix its cause and run the probe again)")
    assert "import cost (the trainer names no module to import: set trainer.modules)" in first
    assert "release history (index unreachable, no cache: run the probe with network access" in first
    assert result.reason == first
    gone = judge([crashed], {"limits": LIMITS, "distribution": "fakewrap", "version": None,
                             "notes": ["fakewrap is not installed: pip install -e '.[fake]'"]})
    assert gone.inconclusive and gone.headline == "nothing measured"
    assert "(fakewrap is not installed: pip install -e '.[fake]')" in gone.notes[0]
    plain_torch = judge([crashed], {"limits": LIMITS, "distribution": "", "notes": []})
    assert plain_torch.inconclusive and plain_torch.notes[0].startswith("a pass needs every figure; not measured: "
                                                                        "deprecations")


def test_import_repeats_straddling_a_limit_decide_nothing_and_each_threshold_has_its_calibration_line():
    straddle = measured(imports={"median_seconds": 5.9, "median_mib_added": 120.0, "error": None,
                                 "seconds": [5.5, 5.9, 6.4], "mib_added": [120.0, 120.0, 120.0]})
    result = judge([standard()], straddle)
    assert result.inconclusive and result.notes[0].startswith("import_s: its 3 repeats (5.5-6.4 s) straddle the limit")
    above = measured(imports={"median_seconds": 6.5, "median_mib_added": 120.0, "error": None,
                              "seconds": [6.2, 6.5, 6.9], "mib_added": [120.0] * 3})
    assert [f.code for f in judge([standard()], above).findings] == ["maintenance.import_s"]
    lines = [n for n in judge([standard()], measured()).notes if n.startswith("threshold ")]
    assert len(lines) == 7 and all(": a team budget" in n for n in lines)
