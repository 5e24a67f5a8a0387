"""Issue 11, item 1: a wrapper whose training goes non-finite fails, naming the seeds and the first step.

Records are the synthetic ones with NaN planted the way a diverging run stores it: the step records'
loss is NaN from the step on, validation from there on is NaN, and so is the final metric.
"""
import math

import numpy as np

from evalkit.analysis import compare
from evalkit.analysis.arms import group_arms
from evalkit.analysis.finite import first_nonfinite
from evalkit.analysis.synthetic import ArmPlan, records
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.table import fail_reasons, terminal_report

SPEC = compare.MetricSpec("val/mse", higher_is_better=False, margin=0.01)


def plant_nan(runs, trainer, seeds, from_step, value=float("nan")):
    """Make `trainer`'s runs of `seeds` go non-finite from `from_step` on, as a diverging run records it."""
    for r in runs:
        if r.trainer == trainer and r.seed in seeds:
            r.steps["loss"] = np.where(r.steps["step"] >= from_step, value, r.steps["loss"])
            late = r.val["step"] >= from_step
            r.val = {k: (np.where(late, value, v) if k != "step" else v) for k, v in r.val.items()}
            r.metrics["val/mse"] = value
            r.metrics["val/loss"] = value
    return runs


def diverging(seeds, from_step=20, value=float("nan"), n_steps=50):
    runs = records([ArmPlan("baseline"), ArmPlan("diverging")], n_steps=n_steps)
    return plant_nan(runs, "diverging", seeds, from_step, value)


def row(verdict, trainer):
    return next(r for r in verdict.rows if r.key.trainer == trainer)


def test_first_nonfinite_step_is_read_from_the_step_records():
    runs = diverging({1}, from_step=23)
    bad = next(r for r in runs if r.trainer == "diverging" and r.seed == 1)
    found = first_nonfinite(bad, "val/mse")
    assert found is not None and found.step == 23 and found.where == "train loss", found
    good = next(r for r in runs if r.trainer == "diverging" and r.seed == 0)
    assert first_nonfinite(good, "val/mse") is None


def test_final_metric_alone_non_finite_has_no_step():
    runs = records([ArmPlan("baseline"), ArmPlan("w")])
    run = next(r for r in runs if r.trainer == "w")
    run.metrics["val/mse"] = math.inf
    found = first_nonfinite(run, "val/mse")
    assert found is not None and found.step is None and found.where == "final val/mse"


def test_two_nan_seeds_fail_consistency_and_functional_naming_seeds_and_step():
    v = build_verdict(diverging({1, 3}), VerdictOptions())
    dims = row(v, "diverging").dimensions
    consistency, functional = dims["consistency"], dims["functional"]
    print(consistency.cell(), "|", functional.cell())
    assert consistency.status == "fail", consistency.cell()
    assert consistency.figure == "non-finite from step 20 in 2/5 runs: seeds 1,3; sweep, no probe", consistency.cell()
    assert functional.status == "fail", functional.cell()
    assert functional.figure == "2/5 runs non-finite from step 20: seeds 1,3", functional.cell()
    reasons = "\n".join(fail_reasons(v))
    assert "val/mse: training diverged in 2/5 runs: first non-finite train loss at step 20 " \
           "(seed 1 step 20, seed 3 step 20)" in reasons, reasons
    comparison = next(c for c in row(v, "diverging").comparisons if c.kind == compare.EQUIVALENCE)
    assert comparison.outcome == compare.NONFINITE


def test_every_seed_nan_is_not_a_pass_and_not_not_run():
    v = build_verdict(diverging({0, 1, 2, 3, 4}, from_step=7), VerdictOptions())
    dims = row(v, "diverging").dimensions
    text = terminal_report(v)
    assert dims["functional"].status == "fail" and "5/5 runs ok" not in text, text
    assert dims["functional"].figure == "5/5 runs non-finite from step 7: seeds 0,1,2,3,4"
    assert dims["consistency"].status == "fail", dims["consistency"].cell()
    assert "step 7" in dims["consistency"].figure


def test_inf_counts_like_nan_and_different_steps_are_listed():
    runs = diverging({2}, from_step=30, value=math.inf)
    plant_nan(runs, "diverging", {4}, 12)
    dims = row(build_verdict(runs, VerdictOptions()), "diverging").dimensions
    assert dims["consistency"].figure == "non-finite from step 12 in 2/5 runs: seeds 2,4; sweep, no probe"


def test_compare_metric_marks_the_comparison_non_finite_and_leaves_it_out_of_holm():
    arms = group_arms(diverging({1}))
    wrapper = next(a for k, a in arms.items() if k.trainer == "diverging")
    base = next(a for k, a in arms.items() if k.trainer == "baseline")
    c = compare.compare_metric(wrapper, base, SPEC, 0.05)
    assert c.outcome == compare.NONFINITE and [n.run.seed for n in c.nonfinite] == [1]
    other = compare.compare_metric(base, base, SPEC, 0.05)
    compare.adjust([c, other], 0.05)
    assert c.outcome == compare.NONFINITE and c.seeds_needed is None
    assert other.p_good_adj == other.p_good, "a comparison without a test must not count in Holm's family"


def test_a_diverging_baseline_is_warned_about():
    runs = records([ArmPlan("baseline"), ArmPlan("w")])
    plant_nan(runs, "baseline", {2}, 10)
    text = "\n".join(build_verdict(runs, VerdictOptions()).warnings)
    assert "baseline/aligned" in text and "1 baseline run(s) trained to a non-finite loss (seed 2 from step 10)" \
        in text, text


def test_synthetic_fixture_plants_a_diverging_arm():
    runs = records([ArmPlan("baseline"), ArmPlan("nan", nonfinite_seeds=(0, 2), nonfinite_from=15)])
    dims = row(build_verdict(runs, VerdictOptions()), "nan").dimensions
    assert dims["consistency"].figure == "non-finite from step 15 in 2/5 runs: seeds 0,2; sweep, no probe"
    assert all(r.tags["evalkit.val_metric_scale"] == "relative" for r in runs)


def test_one_diverging_seed_reads_in_the_singular():
    runs = records([ArmPlan("baseline"), ArmPlan("nan", nonfinite_seeds=(2,), nonfinite_from=15)])
    dims = row(build_verdict(runs, VerdictOptions()), "nan").dimensions
    assert dims["functional"].figure == "1/5 runs non-finite from step 15: seed 2"
    assert dims["consistency"].cell() == "fail (non-finite from step 15 in 1/5 runs: seed 2; sweep, no probe)"
