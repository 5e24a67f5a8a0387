"""Issue 11, items 4-9 on single comparisons: every printed figure agrees with the test behind it."""
import math

import numpy as np
import pytest

from evalkit.analysis import compare
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.records import RunRecord
from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.cli import main

MARGIN_RULE = "the margin must be a positive number"


def arm(trainer, values, seeds=None, metric="val/mse", tags=None):
    seeds = range(len(values)) if seeds is None else seeds
    runs = [RunRecord(f"{trainer}{i}", "FINISHED",
                      {"evalkit.role": "job", "evalkit.seed": str(s), **(tags or {})}, {metric: float(v)})
            for i, (s, v) in enumerate(zip(seeds, values))]
    return Arm(ArmKey("t", "c", trainer, "aligned"), runs)


def decided(w, b, spec, others=()):
    c = compare.compare_metric(w, b, spec, 0.05)
    compare.adjust([c, *others], 0.05)
    return c


def standardized(n, rng):
    z = rng.standard_normal(n)
    return (z - z.mean()) / z.std(ddof=1)


SPEC = compare.MetricSpec("val/mse", higher_is_better=False, margin=0.01)


# ---------------------------------------------------------------- item 5: the interval the decision used
def test_equivalent_prints_the_90_percent_interval_inside_the_margin():
    """Mean log ratio +0.5 %, se 0.2 % over 5 pairs: the 90 % TOST interval is inside ±1 %, the 95 % one is not."""
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = np.log(1.005) + 0.002 * np.sqrt(5) * standardized(5, np.random.default_rng(5))
    c = decided(arm("w", base * np.exp(log_ratio)), arm("baseline", base), SPEC)
    assert c.outcome == compare.EQUIVALENT and c.level == pytest.approx(0.90)
    assert -0.01 < c.delta_low < c.delta < c.delta_high < 0.01, (c.delta_low, c.delta_high)
    from evalkit.verdict.dimensions import delta_figure

    assert delta_figure(c).endswith("90% CI"), delta_figure(c)
    assert "[+0.07,+0.93]" in delta_figure(c), delta_figure(c)


def test_holm_widens_the_printed_interval_to_the_level_actually_used():
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = 0.001 * np.sqrt(5) * standardized(5, np.random.default_rng(6))
    same = arm("baseline", base)
    others = [compare.compare_metric(arm(f"o{i}", base * 1.03), same, SPEC, 0.05) for i in range(3)]
    c = decided(arm("w", base * np.exp(log_ratio)), same, SPEC, others)
    assert c.outcome == compare.EQUIVALENT
    assert c.p_good_adj == pytest.approx(4 * c.p_good)       # the smallest of 4: Holm multiplier 4
    assert c.level == pytest.approx(1 - 2 * 0.05 / 4)        # ... so its TOST ran at alpha/4: a 97.5 % interval
    assert -0.01 < c.delta_low < c.delta_high < 0.01


def test_deviation_prints_the_95_percent_interval_beyond_the_margin():
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = np.log(1.03) + 0.002 * np.sqrt(5) * standardized(5, np.random.default_rng(7))
    c = decided(arm("w", base * np.exp(log_ratio)), arm("baseline", base), SPEC)
    assert c.outcome == compare.DEVIATION and c.level == pytest.approx(0.95)
    assert 0.01 < c.delta_low < c.delta_high


# ---------------------------------------------------------------- item 6: the margin is what the text says
@pytest.mark.parametrize("ratio, outcome", [(0.99005, compare.EQUIVALENT), (1.00995, compare.EQUIVALENT),
                                            (0.98995, compare.DEVIATION), (1.01005, compare.DEVIATION)])
def test_one_percent_margin_accepts_exactly_0_99_to_1_01(ratio, outcome):
    """Bit-identical seeds offset by a constant ratio (no noise): the decision is the margin itself."""
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    c = decided(arm("w", base * ratio), arm("baseline", base), SPEC)
    assert c.outcome == outcome, (ratio, c.outcome)
    assert c.margin == 0.01 and c.bounds == (pytest.approx(math.log(0.99)), pytest.approx(math.log(1.01)))


# ---------------------------------------------------------------- item 7: the scale is declared, not guessed
def score_records(scale: str | None, shift: float):
    """A metric around zero (it crosses it) with a wrapper offset by `shift` in absolute units."""
    rng = np.random.default_rng(8)
    base = rng.normal(0.0, 0.02, 5)
    runs = []
    for trainer, values in (("baseline", base), ("w", base + shift + rng.normal(0, 0.0002, 5))):
        for seed, value in enumerate(values):
            tags = {"evalkit.role": "job", "evalkit.trainer": trainer, "evalkit.seed": str(seed),
                    "evalkit.task": "t", "evalkit.caliber": "c", "evalkit.val_metric": "score",
                    "evalkit.val_metric_higher_is_better": "true"}
            if scale:
                tags["evalkit.val_metric_scale"] = scale
            runs.append(RunRecord(f"{trainer}{seed}", "FINISHED", tags, {"val/score": float(value)}))
    return runs


def test_declared_absolute_scale_judges_a_zero_crossing_metric_by_its_difference():
    v = build_verdict(score_records("absolute", 0.001), VerdictOptions())
    c = v.rows[0].comparisons[0]
    assert c.scale == "absolute" and c.outcome == compare.EQUIVALENT, (c.scale, c.outcome, c.delta)
    assert c.delta == pytest.approx(0.001, abs=0.0002)
    assert v.rows[0].dimensions["consistency"].figure.startswith("Δ+0.001"), v.rows[0].dimensions["consistency"]


def test_a_relative_metric_with_a_non_positive_value_is_not_switched_silently():
    cell = build_verdict(score_records("relative", 0.001), VerdictOptions()).rows[0].dimensions["consistency"]
    assert cell.status == "not run"
    assert cell.figure == ("val/score has values <= 0: a relative margin needs positive values "
                           "(declare the metric's scale absolute)"), cell.figure


def test_one_zero_accuracy_seed_does_not_move_the_comparison_to_another_scale():
    """Accuracy is declared absolute: one seed at 0 changes nothing about how the others are judged."""
    acc = np.array([0.0, 0.61, 0.62, 0.60, 0.63])
    spec = compare.MetricSpec("val/accuracy", True, 0.01, scale="absolute")
    c = decided(arm("w", acc + 0.001, metric="val/accuracy"), arm("baseline", acc, metric="val/accuracy"), spec)
    assert c.outcome == compare.EQUIVALENT and c.delta == pytest.approx(0.001)


def test_runs_without_a_scale_tag_default_by_metric():
    from evalkit.analysis.records import metric_scale

    assert metric_scale("mse", "") == "relative" and metric_scale("perplexity", "") == "relative"
    assert metric_scale("accuracy", "") == "absolute"
    assert metric_scale("accuracy", "relative") == "relative"   # a tag always wins


def test_tasks_declare_their_scale():
    from evalkit.tasks import catalog as tasks

    sizes = {"n_train": 4, "n_val": 4, "hidden": 4}
    assert tasks.mlp_regression(0, **sizes, in_dim=4, depth=1, out_dim=2, noise=0.1).metric.scale == "relative"
    assert tasks.cnn_classification(0, **sizes, image_size=4, channels=1, out_dim=2, noise=0.1).metric.scale == \
        "absolute"
    assert tasks.tiny_lm(0, **sizes, vocab_size=8, seq_len=4, depth=1, n_heads=1).metric.scale == "relative"


# ---------------------------------------------------------------- item 8: margin=0 is refused up front
def test_zero_margin_is_refused_by_the_library_with_the_cli_message(capsys):
    with pytest.raises(ValueError, match=MARGIN_RULE):
        compare.MetricSpec("val/mse", False, 0.0)
    with pytest.raises(ValueError, match=MARGIN_RULE):
        VerdictOptions(margins={"mse": 0.0})
    with pytest.raises(ValueError, match=MARGIN_RULE):
        compare.MetricSpec("val/mse", False, float("nan"))
    assert main(["--margin", "mse=0", "--tracking-uri", "sqlite:////nonexistent/x.db"]) == 2
    assert MARGIN_RULE in capsys.readouterr().err


# ---------------------------------------------------------------- item 9: "beyond the margin" is tested
def test_a_shift_inside_the_margin_is_not_called_a_deviation_however_significant():
    """+0.5 % on every seed, tiny noise: significant, but not beyond the ±1 % margin."""
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = np.log(1.005) + 0.0005 * standardized(5, np.random.default_rng(9))
    c = decided(arm("w", base * np.exp(log_ratio)), arm("baseline", base), SPEC)
    assert c.outcome == compare.EQUIVALENT


def test_a_point_estimate_beyond_the_margin_is_not_a_deviation_until_its_interval_is():
    """+1.3 % with se 0.3 %: significantly different from 0 (the old rule said deviation), but the 95 %
    interval still reaches inside the margin."""
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = np.log(1.013) + 0.003 * np.sqrt(5) * standardized(5, np.random.default_rng(10))
    c = decided(arm("w", base * np.exp(log_ratio)), arm("baseline", base), SPEC)
    assert c.outcome == compare.INCONCLUSIVE and c.delta_low < 0.01 < c.delta_high


# ---------------------------------------------------------------- item 4: seeds needed is a real plan
def test_seeds_needed_exceeds_the_seeds_run_and_plans_at_the_holm_level():
    """Equivalent at alpha, not at alpha/12: the advice must be more than the 5 seeds run."""
    base = 0.05 * np.exp(np.linspace(-0.01, 0.01, 5))
    log_ratio = 0.003 * np.sqrt(5) * standardized(5, np.random.default_rng(11))
    same = arm("baseline", base)
    others = [compare.compare_metric(arm(f"o{i}", base * (1 + 0.03 * (i % 2))), same, SPEC, 0.05)
              for i in range(11)]
    c = decided(arm("w", base * np.exp(log_ratio)), same, SPEC, others)
    assert c.outcome == compare.INCONCLUSIVE and c.p_good < 0.05, (c.outcome, c.p_good)
    assert c.seeds_needed is not None and c.seeds_needed > 5, c.seeds_needed
    assert c.plan_alpha == pytest.approx(0.05 / 12)


def test_seeds_needed_is_never_the_count_already_run():
    """Two seeds, tiny spread, one of 12 comparisons: planned at alpha it read "seeds needed = 2"."""
    base = arm("baseline", [0.0500, 0.0510])
    others = [compare.compare_metric(arm(f"o{i}", [0.0515, 0.0525]), base, SPEC, 0.05) for i in range(11)]
    c = decided(arm("w", [0.05000, 0.05102]), base, SPEC, others)
    assert c.outcome == compare.INCONCLUSIVE and c.seeds_needed is not None and c.seeds_needed > 2, c.seeds_needed


def test_synthetic_verdict_still_decides_the_planted_cases():
    v = build_verdict(records([ArmPlan("baseline"), ArmPlan("good"), ArmPlan("bad", metric_shift=0.05)]),
                      VerdictOptions())
    status = {r.key.trainer: r.dimensions["consistency"].status for r in v.rows}
    assert status == {"good": "pass", "bad": "fail"}
