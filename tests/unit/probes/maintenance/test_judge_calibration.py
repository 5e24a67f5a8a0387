"""Calibration of the maintenance probe's team budgets (issue 44) at their boundary, through the judge, at the
defaults conf/probe/maintenance.yaml sets: known-good and known-bad synthetic measurements on both sides.

Exact figures (deprecations, dependencies, install MiB, breaking releases a year, release age) carry no noise: a
figure at its budget passes, one unit above it fails, every time (false-alarm rate 0, power 1; asserted per budget).

The import figures are the noisy ones: the judge fails only when every repeat lies above the budget, passes only
when every repeat lies at or below it, and is undecided (inconclusive) when the repeats straddle it. Synthetic
repeats with a known true median and a relative spread of 10 % (an import on a quiet machine) or 20 % (a loaded
one), at the quick preset's 3 repeats and the default 5. Measured (1000 draws per cell, rng seed 46; seconds and MiB
alike, the rule being the same):
  true median            0.8 x budget           1.0 x budget             1.25 x budget
  spread, repeats     fail    pass          fail    pass   undecided    fail    pass
  10 %, 3             0.0 %   96.5 %        13.3 %  12.4 %  74 %        97.1 %  0.0 %
  10 %, 5             0.0 %   94.1 %         3.0 %   3.6 %  93 %        95.0 %  0.0 %
  20 %, 3             0.3 %   66.7 %        13.3 %  12.4 %  74 %        65.8 %  0.1 %
  20 %, 5             0.0 %   49.6 %         3.0 %   3.6 %  93 %        49.2 %  0.0 %
So a wrapper 20 % under the budget is (almost) never failed and one 25 % over it (almost) never passed. The rule
("every repeat on one side") is no test of the median: more repeats lower both wrong calls on the line, but also
the power on both sides where the spread is large (on a loaded machine, 5 repeats leave half the clear cases
inconclusive, 3 repeats a third).
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import CONF
from omegaconf import OmegaConf

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.maintenance.judge import judge
from evalkit.probes.maintenance.settings import PRESETS

LIMITS = dict(OmegaConf.to_container(OmegaConf.load(CONF / "probe" / "maintenance.yaml"))["maintenance"])
MIB = 2**20
DRAWS = 1000


def standard(deprecations: int = 0) -> JobEvidence:
    job = JobEvidence("standard", "std-run", "FINISHED", {})
    job.summary = {"deprecations": [{"category": "DeprecationWarning", "message": f"old {i}", "module": "fakewrap.x",
                                     "distribution": "fakewrap", "count": 1, "attributed_to": [],
                                     "attributed_distribution": None} for i in range(deprecations)]}
    return job


def measured(seconds=(1.5,), mib=(120.0,), dependencies: int = 1, install_mib: float = 2.0, breaking: float = 0,
             age_days: int = 40) -> dict:
    """A wrapper's measurements: `dependencies` added packages of `install_mib` MiB together (itself included),
    its import repeats, its release figures (the installed version behind the latest by `age_days`)."""
    packages = [{"name": f"dep{i}", "version": "1.0", "size_bytes": 0} for i in range(dependencies)]
    return {
        "limits": dict(LIMITS), "distribution": "fakewrap", "version": "1.2.0", "core": ["torch", "numpy"],
        "dependencies": {"root": "fakewrap", "root_version": "1.2.0", "root_size_bytes": int(install_mib * MIB),
                         "count": dependencies, "packages": packages, "constraints": [], "missing": []},
        "imports": {"seconds": list(seconds), "mib_added": list(mib), "median_seconds": float(np.median(seconds)),
                    "median_mib_added": float(np.median(mib)), "error": None},
        "releases": {"source": "index", "as_of": "2026-12-01T10:00:00+00:00", "breaking_per_year": breaking,
                     "releases": 6, "breaking_rule": "major", "days_since_installed_release": age_days,
                     "releases_since_installed": 1, "installed_version": "1.2.0", "latest_version": "1.3.0"},
        "candidates": [], "notes": []}


def status(result) -> str:
    return "inconclusive" if result.inconclusive else "pass" if result.passed else "fail"


def test_the_budgets_are_the_configured_defaults():
    assert (LIMITS["max_deprecations"], LIMITS["max_import_s"], LIMITS["max_import_mib"]) == (3, 6.0, 400.0)
    assert (LIMITS["max_dependencies"], LIMITS["max_install_mib"]) == (40, 600.0)
    assert (LIMITS["max_breaking_per_year"], LIMITS["max_release_age_days"], LIMITS["import_repeats"]) == (2.0, 365, 5)
    assert "probe.maintenance.import_repeats=3" in PRESETS["quick"].settings


def test_a_wrapper_well_inside_every_budget_passes():
    result = judge([standard()], measured())
    assert status(result) == "pass", result.notes


EXACT = {   # budget -> (measurements at it, measurements one unit above it, the finding's code)
    "max_deprecations": ({"deprecations": 3}, {"deprecations": 4}, "maintenance.deprecations"),
    "max_dependencies": ({"dependencies": 40}, {"dependencies": 41}, "maintenance.dependencies"),
    "max_install_mib": ({"install_mib": 600.0}, {"install_mib": 601.0}, "maintenance.install_mib"),
    "max_breaking_per_year": ({"breaking": 2}, {"breaking": 3}, "maintenance.breaking"),
    "max_release_age_days": ({"age_days": 365}, {"age_days": 366}, "maintenance.stale"),
}


@pytest.mark.parametrize("budget", sorted(EXACT))
def test_an_exact_figure_at_its_budget_passes_and_one_unit_above_fails(budget):
    at, above, code = EXACT[budget]
    run = lambda over: judge([standard(over.pop("deprecations", 0))], measured(**over))   # noqa: E731
    good, bad = run(dict(at)), run(dict(above))
    assert status(good) == "pass", (budget, good.notes)
    assert status(bad) == "fail" and [f.code for f in bad.findings] == [code], (budget, [f.code for f in bad.findings])


def import_calls(which: str, truth: float, spread: float, repeats: int) -> dict[str, float]:
    """Rates of the judge's calls on `repeats` import repeats spread lognormally around `truth` x the budget."""
    limit = LIMITS["max_import_s" if which == "seconds" else "max_import_mib"]
    rng = np.random.default_rng(46)
    counts = {"pass": 0, "fail": 0, "inconclusive": 0}
    for draw in limit * truth * np.exp(spread * rng.standard_normal((DRAWS, repeats))):
        over = {"seconds": draw} if which == "seconds" else {"mib": draw}
        counts[status(judge([standard()], measured(**over)))] += 1
    return {k: v / DRAWS for k, v in counts.items()}


@pytest.mark.parametrize("which", ["seconds", "mib"])
@pytest.mark.parametrize("spread, repeats, good_pass, bad_fail", [(0.10, 3, 0.93, 0.93), (0.10, 5, 0.91, 0.91),
                                                                  (0.20, 3, 0.61, 0.60), (0.20, 5, 0.44, 0.44)])
def test_the_import_budget_separates_twenty_percent_under_from_twenty_five_percent_over(which, spread, repeats,
                                                                                        good_pass, bad_fail):
    good, bad = import_calls(which, 0.8, spread, repeats), import_calls(which, 1.25, spread, repeats)
    assert good["fail"] <= 0.005 and good["pass"] >= good_pass, good      # 0-0.3 % fail; pass 96.5, 94, 67, 50 %
    assert bad["pass"] <= 0.005 and bad["fail"] >= bad_fail, bad          # 0-0.1 % pass; fail 97, 95, 66, 49 %


@pytest.mark.parametrize("repeats, wrong", [(3, 0.16), (5, 0.05)])
def test_an_import_on_the_budget_is_mostly_undecided(repeats, wrong):
    """True median at the budget: fail and pass each about 1 / 2**repeats (measured 13.3 / 12.4 % at 3 repeats,
    3.0 / 3.6 % at 5), undecided the rest."""
    calls = import_calls("seconds", 1.0, 0.10, repeats)
    assert calls["fail"] <= wrong and calls["pass"] <= wrong and calls["inconclusive"] >= 1 - 2 * wrong, calls
