"""The analyzer: pure functions over stored runs. It groups runs into arms, separates seed noise from
systematic deviation, and never re-runs training.

- `store`: read job runs and their CSV records from MLflow (one paged search, bulk artifacts).
- `arms`: group runs into arms and find each wrapper arm's baseline arm.
- `stats`, `planning`: log-ratio difference/equivalence/budget tests, Holm, seeds needed.
- `noise`: spread over seeds and over repeats.
- `compare`: one wrapper arm against its baseline, per metric or budget.
- `curves`: per-step seed bands and the first divergence step.
"""
from evalkit.analysis.arms import Arm, ArmKey, Samples, baseline_for, group_arms, wrapper_arms
from evalkit.analysis.compare import Budget, Comparison, MetricSpec, adjust, compare_budget, compare_metric
from evalkit.analysis.curves import Band, CurveSet, divergence_band, first_divergence, seed_curves
from evalkit.analysis.noise import Spread, spread
from evalkit.analysis.planning import seeds_needed, seeds_needed_one_sided
from evalkit.analysis.records import RunRecord
from evalkit.analysis.stats import (
                                    classify,
                                    holm,
                                    interval,
                                    margin_bound,
                                    p_difference,
                                    p_equivalence,
                                    paired_test,
                                    welch_test,
)
from evalkit.analysis.store import StoreError, read_runs

__all__ = [
    "Arm", "ArmKey", "Band", "Budget", "Comparison", "CurveSet", "MetricSpec", "RunRecord", "Samples",
    "Spread", "StoreError", "adjust", "baseline_for", "classify", "compare_budget",
    "compare_metric", "divergence_band", "first_divergence", "group_arms", "holm", "interval", "margin_bound",
    "p_difference", "p_equivalence", "paired_test", "read_runs", "seed_curves", "seeds_needed",
    "seeds_needed_one_sided", "spread", "welch_test", "wrapper_arms",
]
