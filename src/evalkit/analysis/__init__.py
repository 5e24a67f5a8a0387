"""The analyzer: pure functions over stored runs. It groups runs into arms, separates seed noise from
systematic deviation, and never re-runs training.

- `store`: read job runs and their CSV records from MLflow (one paged search, bulk artifacts).
- `arms`: group runs into arms and find each wrapper arm's baseline arm.
- `stats`, `planning`: difference/equivalence/budget tests on the declared scale, Holm, seeds needed.
- `design`: paired, unpaired, or both under Bonferroni, from the seeds two arms share.
- `finite`: runs whose loss or metric went NaN/inf, and the first step it happened.
- `noise`: spread over seeds and over repeats.
- `compare`: one wrapper arm against its baseline, per metric or budget.
- `curves`: per-step seed bands and the first divergence step.
"""
from evalkit.analysis.arms import Arm, ArmKey, Samples, baseline_for, group_arms, shared_seeds, wrapper_arms
from evalkit.analysis.compare import Budget, Comparison, MetricSpec, adjust, compare_budget, compare_metric
from evalkit.analysis.curves import Band, CurveSet, divergence_band, first_divergence, seed_curves
from evalkit.analysis.design import Design, claim_p_values, designs
from evalkit.analysis.finite import NonFinite, first_nonfinite, nonfinite_runs
from evalkit.analysis.noise import Spread, spread
from evalkit.analysis.planning import seeds_needed, seeds_needed_array
from evalkit.analysis.records import RunRecord
from evalkit.analysis.stats import (
    classify,
    holm,
    interval,
    margin_bounds,
    p_beyond,
    p_difference,
    p_equivalence,
    paired_test,
    welch_test,
)
from evalkit.analysis.store import StoreError, read_runs

__all__ = [
    "Arm", "ArmKey", "Band", "Budget", "Comparison", "CurveSet", "Design", "MetricSpec", "NonFinite", "RunRecord",
    "Samples", "Spread", "StoreError", "adjust", "baseline_for", "claim_p_values", "classify", "compare_budget",
    "compare_metric", "designs", "divergence_band", "first_divergence", "first_nonfinite", "group_arms", "holm",
    "interval", "margin_bounds", "nonfinite_runs", "p_beyond", "p_difference", "p_equivalence", "paired_test",
    "read_runs", "seed_curves", "seeds_needed", "seeds_needed_array", "shared_seeds", "spread", "welch_test",
    "wrapper_arms",
]
