"""The verdict as a pure function of stored run records: one row per wrapper arm, a cell per catalog dimension."""
from __future__ import annotations

from dataclasses import dataclass, field

from evalkit import names
from evalkit.analysis.arms import Arm, ArmKey, baseline_for, group_arms, wrapper_arms
from evalkit.analysis.compare import (
    EQUIVALENCE,
    Budget,
    Comparison,
    MetricSpec,
    adjust,
    compare_budget,
    compare_metric,
    scale_problem,
)
from evalkit.analysis.curves import first_divergence, seed_curves
from evalkit.analysis.finite import nonfinite_runs
from evalkit.analysis.records import RunRecord
from evalkit.analysis.stats import check_margin
from evalkit.probes.catalog import dimension, dimension_names
from evalkit.verdict.checks import evidence_warnings
from evalkit.verdict.dimensions import (
    NOT_RUN,
    PASS,
    DimensionResult,
    judge_consistency,
    judge_performance,
    judge_probe,
    judge_runs,
)
from evalkit.verdict.scenarios import Standing, load_scenarios, rank

THROUGHPUT, MEMORY = names.PERF_SAMPLES_PER_S, names.PERF_PEAK_MEM


@dataclass
class VerdictOptions:
    alpha: float = 0.05
    default_margin: float = 0.01
    margins: dict[str, float] = field(default_factory=dict)  # "metric" or "task:metric" -> margin
    throughput_min: float = 0.9
    memory_max: float = 1.1
    min_seeds: int = 3
    cv_warn: float = 0.10
    curve_column: str = "loss"
    curve_confidence: float = 0.99
    curve_min_run: int = 3
    curve_rtol: float = 1e-4          # band floor: relative differences below this never count
    scenario: str = "balanced"
    scenarios: dict[str, dict[str, float]] = field(default_factory=load_scenarios)
    references: list[str] = field(default_factory=list)   # arms set as their trainer's reference version (versions.py)

    def __post_init__(self):
        """The library refuses a bad margin with the CLI's words, before any comparison runs."""
        check_margin(self.default_margin, "default margin")
        for key, margin in self.margins.items():
            check_margin(margin, f"margin for {key}")

    def margin_for(self, task: str, metric: str, tagged: float | None) -> float:
        """Command-line override for task:metric, then for metric, then the run's tag, then default."""
        for key in (f"{task}:{metric}", metric):
            if key in self.margins:
                return self.margins[key]
        return tagged if tagged is not None and 0 < tagged < float("inf") else self.default_margin


@dataclass
class Row:
    key: ArmKey
    baseline: ArmKey | None
    n_jobs: int
    n_finished: int
    dimensions: dict[str, DimensionResult]
    comparisons: list[Comparison]
    divergence_step: int | None


@dataclass
class Verdict:
    rows: list[Row]
    arms: dict[ArmKey, Arm]
    warnings: list[str]
    standings: list[Standing]
    options: VerdictOptions


def row_label(key: ArmKey) -> str:
    return f"{key.trainer}/{key.mode} @ {key.task} [{key.caliber}]"


def metric_spec(arm: Arm, options: VerdictOptions) -> MetricSpec | None:
    first = arm.first()
    if first is None:
        return None
    margin = options.margin_for(arm.key.task, first.val_metric, first.margin)
    return MetricSpec(f"val/{first.val_metric}", first.higher_is_better, margin, first.metric_scale)


def _metric_key(arm: Arm, options: VerdictOptions) -> str:
    spec = metric_spec(arm, options)
    return spec.key if spec else names.VAL_LOSS


def build_verdict(records: list[RunRecord], options: VerdictOptions | None = None) -> Verdict:
    options = options or VerdictOptions()
    arms = group_arms(records)
    budgets = [Budget(THROUGHPUT, "throughput", options.throughput_min, True),
               Budget(MEMORY, "peak memory", options.memory_max, False)]
    pending = [_compare(arm, baseline_for(arm.key, arms), budgets, options) for arm in wrapper_arms(arms)]
    adjust([c for _, _, comps, _ in pending for c in comps], options.alpha)
    rows = [_row(arm, base, comps, why, options) for arm, base, comps, why in pending]
    warnings = evidence_warnings(arms, lambda a: _metric_key(a, options), options.min_seeds, options.cv_warn)
    return Verdict(rows, arms, warnings, _standings(rows, options), options)


def _compare(arm: Arm, base: Arm | None, budgets, options: VerdictOptions):
    """(arm, baseline, comparisons, why-none): comparisons are adjusted later, all together."""
    if not arm.jobs:
        return arm, base, [], "no training jobs in this mode: only its probes"
    if base is None:
        return arm, None, [], "no baseline at this caliber"
    if not arm.finished:
        return arm, base, [], "no finished runs"
    spec = metric_spec(arm, options)
    problem = None if nonfinite_runs(arm.finished, spec.key) else scale_problem(
        [arm.samples(spec.key).values, base.samples(spec.key).values], spec)
    comps = [] if problem else [compare_metric(arm, base, spec, options.alpha)]
    comps += [compare_budget(arm, base, b, options.alpha) for b in budgets]
    found = [c for c in comps if c is not None]
    why = problem or ("" if any(c.kind == EQUIVALENCE for c in found) else f"no {spec.key} values")
    return arm, base, found, why


def _row(arm: Arm, base: Arm | None, comps: list[Comparison], why_not: str, options: VerdictOptions) -> Row:
    divergence = None
    if base is not None and arm.finished:
        column = options.curve_column
        divergence = first_divergence(seed_curves(arm.finished, column), seed_curves(base.finished, column),
                                      options.curve_confidence, options.curve_min_run, options.curve_rtol)
    equivalences = [c for c in comps if c.kind == EQUIVALENCE]
    dims = {d: judge_probe(arm, d) for d in dimension_names()}
    # A probe's answer, when the arm has one, is the column's: it was measured for that question (paired,
    # interleaved, one switch at a time); the sweep's own comparison stays in the report's tables. Only where no
    # probe ran at all (a crashed probe is a cell of its own) does the sweep's judgment its dimension declares
    # (`Dimension.sweep`) fill it, and says so; the sweep's runs are judged beside a probe that ran (`judge_runs`).
    for d in dimension_names():
        sweep = dimension(d).sweep
        if sweep == "runs":
            ran = dims[d].status
            dims[d] = judge_runs(arm, d, nonfinite_runs(arm.finished, _metric_key(arm, options)))
            if ran == NOT_RUN and dims[d].status == PASS:       # a pass on the sweep's jobs alone: said
                dims[d] = from_sweep(dims[d], d)
        elif sweep == "equivalence" and dims[d].status == NOT_RUN:
            dims[d] = from_sweep(judge_consistency(equivalences, divergence, why_not or "no final validation values"),
                                 d)
        elif sweep == "budgets" and dims[d].status == NOT_RUN:
            dims[d] = from_sweep(judge_performance(comps, "" if comps else why_not), d)
    note = version_note(arm)
    if note:     # defaults mode at another release than the quick start followed: said beside every judged cell
        dims = {d: r if r.status == NOT_RUN else
                DimensionResult(r.status, f"{r.figure}; {note}" if r.figure else note, r.reasons)
                for d, r in dims.items()}
    return Row(arm.key, base.key if base else None, len(arm.jobs), len(arm.finished), dims, comps, divergence)


def version_note(arm: Arm) -> str | None:
    """`quick start of 2.6.6 followed; 2.7.0 installed` for a defaults-mode arm that ran another release of its
    wrapper than the one whose quick start its adapter follows; None otherwise."""
    if arm.key.mode != "defaults":
        return None
    cited = next((r.tag(names.QUICK_START_VERSION) for r in arm.runs if r.tag(names.QUICK_START_VERSION)), "")
    installed = next((r.tag(names.WRAPPER_VERSION) for r in arm.runs if r.tag(names.WRAPPER_VERSION)), "")
    if not cited or not installed or cited == installed:
        return None
    return f"quick start of {cited} followed; {installed} installed"


SWEEP_SOURCE = "sweep, no probe"


def from_sweep(result: DimensionResult, dim: str) -> DimensionResult:
    """A column judged by the sweep's own comparison, marked as such in its figure and first reason."""
    if result.status == NOT_RUN:
        return result
    why = (f"no {dim} probe ran for this arm: judged from the sweep's own jobs (whole jobs of each arm, not the "
           f"probe's measurement made for this question); `evalkit probe={dim}` measures it")
    figure = f"{result.figure}; {SWEEP_SOURCE}" if result.figure else SWEEP_SOURCE
    return DimensionResult(result.status, figure, [*result.reasons, why])


def _standings(rows: list[Row], options: VerdictOptions) -> list[Standing]:
    weights = options.scenarios[options.scenario]
    return rank({row_label(r.key): {d: res.status for d, res in r.dimensions.items()} for r in rows}, weights)
