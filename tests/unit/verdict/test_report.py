"""The verdict as a pure function of records: dimensions, warnings, scenario ranking, report rendering."""
import json
import re

import pytest

from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.publish import render_report
from evalkit.verdict.scenarios import ScenarioError, load_scenarios, rank
from evalkit.verdict.table import fail_reasons, terminal_report

TINKERER = {"customization": 1.0, "stability": 0.0, "maintenance": 0.0}     # easy to bend, fragile
OPERATOR = {"customization": 0.0, "stability": 1.0, "maintenance": 1.0}     # rigid, solid


def verdict_for(*plans, **options):
    return build_verdict(records([ArmPlan("baseline"), *plans]), VerdictOptions(**options))


def row(verdict, trainer):
    return next(r for r in verdict.rows if r.key.trainer == trainer)


def test_probe_metrics_plug_into_their_dimensions():
    v = verdict_for(ArmPlan("tinker", probes=TINKERER), ArmPlan("plain"))
    dims = row(v, "tinker").dimensions
    assert dims["customization"].status == "pass" and dims["stability"].status == "fail"
    assert dims["semantics"].status == "not run"
    assert dims["stability"].figure == "0/5 probes pass"
    assert row(v, "plain").dimensions["customization"].status == "not run"
    assert any("stability probe failed" in r for r in fail_reasons(v))


@pytest.mark.parametrize("scenario, first", [("research", "tinker"), ("platform", "operator")])
def test_scenario_weights_change_the_ranking_but_not_the_table(scenario, first):
    v = verdict_for(ArmPlan("tinker", probes=TINKERER), ArmPlan("operator", probes=OPERATOR), scenario=scenario)
    assert v.standings[0].label.startswith(first + "/"), [s.label for s in v.standings]
    balanced = verdict_for(ArmPlan("tinker", probes=TINKERER), ArmPlan("operator", probes=OPERATOR))
    assert [r.dimensions for r in v.rows] == [r.dimensions for r in balanced.rows]
    text = terminal_report(v)
    assert text.index("wrapper ") < text.index("Overall ranking") and f"scenario '{scenario}'" in text


def test_not_run_dimensions_leave_the_score_and_lower_the_coverage():
    weights = load_scenarios()["balanced"]
    full = {d: "pass" for d in weights}
    partial = dict(full, semantics="not run", maintenance="not run")
    table = {"full": full, "partial": partial, "bad": dict(full, functional="fail")}
    standings = {s.label: s for s in rank(table, weights)}
    n = len(weights)                 # every probe in the catalog, each of weight 1 in this scenario
    assert standings["partial"].score == 1.0 and standings["partial"].coverage == pytest.approx((n - 2) / n)
    assert standings["bad"].score == pytest.approx((n - 1) / n) and standings["bad"].fails == ("functional",)


def test_scenarios_file_adds_and_validates(tmp_path):
    good = tmp_path / "s.yaml"
    good.write_text("startup:\n  performance: 2\n  functional: 1\n")
    scenarios = load_scenarios(good)
    assert scenarios["startup"]["performance"] == 2.0 and scenarios["startup"]["maintenance"] == 0.0
    assert "research" in scenarios and "platform" in scenarios
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": {"speed": 1}}))
    with pytest.raises(ScenarioError, match=r"bad.json: scenario 'x' names unknown dimensions \['speed'\]"):
        load_scenarios(bad)


def test_inconclusive_cells_say_how_many_seeds_would_decide():
    v = verdict_for(ArmPlan("w", seeds=(10, 11, 12), seed_sd=0.03, metric_shift=0.004))
    cell = row(v, "w").dimensions["consistency"].cell()
    assert re.match(r"inconclusive \(Δ[+-]\d\.\d\d% \[.*\] \d+(\.\d+)?% CI; need ~\d+ seeds per arm; "
                    r"sweep, no probe\)", cell), cell


def test_margin_override_per_task_and_metric():
    shifted = ArmPlan("w", metric_shift=0.02)
    assert row(verdict_for(shifted), "w").dimensions["consistency"].status == "fail"
    loose = verdict_for(shifted, margins={"mlp_regression:mse": 0.05})
    assert row(loose, "w").dimensions["consistency"].status == "pass"


def test_evidence_warnings_pyperf_style():
    plans = [ArmPlan("baseline", failed_seeds=(9,), seeds=(0, 1, 2, 3, 4, 9)), ArmPlan("few", seeds=(0, 1)),
             ArmPlan("jittery", throughput_sd=0.3), ArmPlan("orphan", caliber="hw=cuda|bs=32")]
    v = build_verdict(records(plans), VerdictOptions())
    text = "\n".join(v.warnings)
    assert "1 baseline run(s) failed (RuntimeError: planted failure)" in text
    assert "few/aligned" in text and "only 2 seed(s)" in text
    assert re.search(r"jittery/aligned.*perf/samples_per_s is unstable, std is \d+% of the mean", text), text
    assert "orphan/aligned" in text and "no finished baseline arm" in text
    orphan = row(v, "orphan").dimensions
    assert orphan["consistency"].cell() == "not run (no baseline at this caliber)"
    assert orphan["functional"].status == "pass"


def test_rendered_report_is_complete_and_strict_json():
    v = verdict_for(ArmPlan("good"), ArmPlan("slow", throughput=500.0, failed_seeds=(4,)))
    files = render_report(v, {"experiment": "evalkit"})
    assert len(files.plots) == 3 and all(p.png.startswith(b"\x89PNG") for p in files.plots)
    assert files.html.count("data:image/png;base64,") == 3
    for heading in ("Per-dimension verdict", "Overall ranking", "Reasons for every fail",
                    "Stability and noise warnings", "Plots", "Comparisons", "Method"):
        assert heading in files.html and f"## {heading}" in files.markdown
    assert "throughput ratio 0.50x" in files.markdown
    json.dumps(files.data, allow_nan=False)
    assert files.data["rows"][1]["dimensions"]["performance"]["status"] == "fail"


def test_the_noise_warning_of_a_wrapper_is_its_paired_difference_not_the_seeds_spread():
    plans = [ArmPlan("baseline", seed_sd=0.3), ArmPlan("steady", seed_sd=0.3),
             ArmPlan("wobbly", seed_sd=0.3, run_sd=0.3)]
    text = "\n".join(build_verdict(records(plans), VerdictOptions()).warnings)
    assert re.search(r"baseline/aligned.*val/mse is unstable, std is \d+% of the mean", text), text
    assert "steady/aligned" not in text, text              # seeds spread 30%, the paired difference hardly
    assert re.search(r"wobbly/aligned.*paired difference from the baseline in val/mse varies by \d+%", text), text


def test_the_report_opens_with_the_verdict_at_a_glance_and_groups_rows_and_warnings_by_task_and_caliber():
    from evalkit.analysis.synthetic import DEFAULT_CALIBER

    plans = [ArmPlan("few", seeds=(0, 1)), ArmPlan("rare", seeds=(0, 1)), ArmPlan("slow", throughput=500.0),
             ArmPlan("orphan", caliber="hw=cuda|bs=32")]
    md = render_report(verdict_for(*plans), {"experiment": "evalkit"}, with_plots=False).markdown
    sections = md.split("\n## ")
    assert sections[1].startswith("At a glance") and sections[2].startswith("Per-dimension verdict")
    glance = sections[1].split("\n### ")
    slow = next(e for e in glance if e.startswith("slow\n"))
    assert re.search(r"throughput 0\.\d\dx your loop's .*outside the >= 0\.90x budget", slow), slow
    orphan = next(e for e in glance if e.startswith("orphan\n"))
    assert "Not judged: " in orphan and "consistency and performance (no baseline at this caliber)" in orphan
    table = sections[2]
    assert f"### mlp_regression · caliber {DEFAULT_CALIBER} · baseline baseline/aligned" in table
    assert "### mlp_regression · caliber hw=cuda|bs=32 · baseline none" in table
    assert DEFAULT_CALIBER not in table.split("### ")[1].split("\n", 1)[1]    # the caliber is the heading's only
    warnings = next(s for s in sections if s.startswith("Stability and noise warnings"))
    seeds = [line for line in warnings.splitlines() if "only 2 seed(s) finished" in line]
    assert len(seeds) == 1 and seeds[0].startswith("- few/aligned, rare/aligned: only 2 seed(s)"), warnings
    assert "### mlp_regression · caliber hw=cuda|bs=32" in warnings
