"""Stages 2 and 3: the final validation metric of the wrapper's seeds against the baseline's same seeds.

Each job becomes the analyzer's `RunRecord` (its final metric, its seed, its curves for the non-finite check) and
the jobs of one switch and arm an `Arm`; `analysis.compare.compare_metric` tests the two arms as the verdict does
(paired on the shared seeds: `analysis.design`), and `adjust` applies Holm over every comparison of the probe
(stage 2 and each switch) before deciding: equivalent, deviation (a systematic shift beyond the task's margin),
inconclusive, or non-finite (the wrapper's training went NaN/inf). The noise warning reads the spread of the PAIRED
differences (wrapper minus baseline, seed by seed): the seed's own effect, shared by both arms, cancels there. The
raw spread across seeds (a seed draws its own data) is shown, never warned on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evalkit import names
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.compare import (
    INCONCLUSIVE,
    NONFINITE,
    RELATIVE,
    Comparison,
    MetricSpec,
    adjust,
    compare_metric,
)
from evalkit.analysis.finite import nonfinite_runs
from evalkit.analysis.noise import relative_transform
from evalkit.analysis.records import RunRecord
from evalkit.probes.consistency.plan import BASELINE, WRAPPER, JobKey
from evalkit.probes.evidence import JobEvidence

ALPHA = 0.05            # the verdict's default level (verdict.build.VerdictOptions.alpha)
CV_WARN = 0.10          # the verdict's default spread warning (VerdictOptions.cv_warn), here on paired differences
DEFAULT_MARGIN = 0.01   # the verdict's default margin, for jobs without the task's margin tag


@dataclass
class FinalComparison:
    """One switch's final metric, wrapper against baseline, over the seeds both ran."""

    switch: str
    metric: str                                     # the compared run metric, e.g. "val/mse"
    wrapper: dict[int, float] = field(default_factory=dict)    # seed -> final value (finished jobs)
    baseline: dict[int, float] = field(default_factory=dict)
    comparison: Comparison | None = None
    paired_sd: float | None = None                  # relative spread of the paired differences
    raw_sd: float | None = None                     # relative spread of the baseline's values across seeds
    problem: str = ""                               # why nothing was tested ("" when tested)

    @property
    def outcome(self) -> str:
        return self.comparison.outcome if self.comparison is not None else INCONCLUSIVE

    @property
    def relative(self) -> bool:
        return self.comparison is None or self.comparison.scale == RELATIVE

    def delta_text(self) -> str:
        """'Δ+0.12% [-0.30,+0.50]' (relative) or 'Δ+0.0012 [-0.003,+0.005]' (absolute); '' without a test."""
        c = self.comparison
        if c is None or c.outcome == NONFINITE or not math.isfinite(c.estimate):
            return ""
        if c.scale == RELATIVE:
            bounds = (f" [{100 * c.delta_low:+.2f},{100 * c.delta_high:+.2f}]"
                      if math.isfinite(c.low) and math.isfinite(c.high) else "")
            return f"Δ{100 * c.delta:+.2f}%{bounds}"
        bounds = f" [{c.delta_low:+.3g},{c.delta_high:+.3g}]" if math.isfinite(c.low) and math.isfinite(c.high) else ""
        return f"Δ{c.delta:+.3g}{bounds}"

    def margin_text(self) -> str:
        c = self.comparison
        if c is None:
            return ""
        return f"±{100 * c.margin:g}%" if c.scale == RELATIVE else f"±{c.margin:g}"

    def noise_warning(self) -> str | None:
        if self.paired_sd is None or self.paired_sd < CV_WARN:
            return None
        return (f"{self.switch}: the paired difference wrapper - baseline of {self.metric} spreads "
                f"{100 * self.paired_sd:.1f}% across seeds (>= {100 * CV_WARN:.0f}%): the wrapper's result moves "
                "with the seed unlike the baseline's; more seeds are needed to tell a shift from noise")


def compare_finals(jobs: dict[JobKey, JobEvidence], switches: list[str]) -> list[FinalComparison]:
    """One comparison per switch (in the given order), decided together (Holm over all of them)."""
    out = [_compare_switch(switch, {k: j for k, j in jobs.items() if k.switch == switch}) for switch in switches]
    tested = [f.comparison for f in out if f.comparison is not None]
    if tested:
        adjust(tested, ALPHA)
    return out


def _compare_switch(switch: str, jobs: dict[JobKey, JobEvidence]) -> FinalComparison:
    records = {key: run_record(job, key.seed) for key, job in jobs.items()}
    spec = metric_spec(list(records.values()))
    result = FinalComparison(switch, spec.key if spec else "val/?")
    arms = {arm: Arm(ArmKey("consistency", switch, arm, "probe"),
                     [r for k, r in sorted(records.items()) if k.arm == arm]) for arm in (WRAPPER, BASELINE)}
    if spec is None:
        result.problem = "no job finished with a validation metric"
        return result
    for arm, values in ((WRAPPER, result.wrapper), (BASELINE, result.baseline)):
        values.update({r.seed: r.metrics[spec.key] for r in arms[arm].finished if spec.key in r.metrics})
    broken = nonfinite_runs(arms[BASELINE].finished, spec.key)
    try:
        result.comparison = compare_metric(arms[WRAPPER], arms[BASELINE], spec, ALPHA)
    except ValueError as exc:   # the declared scale cannot judge the values
        result.problem = str(exc)
        return result
    if broken:
        result.problem = (f"the baseline itself went non-finite on seed(s) "
                          f"{', '.join(str(b.run.seed) for b in broken)}: those seeds are left out")
    if result.comparison is None:
        missing = [arm for arm in (WRAPPER, BASELINE) if not (result.wrapper if arm == WRAPPER else result.baseline)]
        result.problem = result.problem or f"no finished {' or '.join(missing)} job with a final {spec.key}"
    result.paired_sd, result.raw_sd = _spreads(result.wrapper, result.baseline)
    return result


def metric_spec(records: list[RunRecord]) -> MetricSpec | None:
    """The task's metric as its jobs were tagged (name, direction, scale, margin): the first finished job's,
    baseline first."""
    ordered = sorted(records, key=lambda r: r.trainer != BASELINE)
    first = next((r for r in ordered if r.finished and names.VAL_METRIC in r.tags), None)
    if first is None:
        return None
    return MetricSpec(f"val/{first.val_metric}", first.higher_is_better, first.margin or DEFAULT_MARGIN,
                      first.metric_scale)


def run_record(job: JobEvidence, seed: int) -> RunRecord:
    """The analyzer's record of a probe job: role job (so the arm counts it), its seed, its final metric."""
    metric = job.tags.get(names.VAL_METRIC) or "loss"
    tags = {**job.tags, names.ROLE: names.ROLE_JOB, names.SEED: str(seed), names.REPEAT: "0"}
    final = final_value(job.val, metric)
    metrics = {} if final is None else {f"val/{metric}": final}
    return RunRecord(job.run_id, job.status, tags, metrics, steps=_curves(job.steps, ("step", "loss")),
                     val=_curves(job.val, ("step", metric, "loss")))


def final_value(rows: list[dict], column: str) -> float | None:
    """The metric of the last validation (by step); None when there is none."""
    rows = [r for r in rows if isinstance(r.get("step"), (int, float)) and r.get(column) is not None]
    if not rows:
        return None
    try:
        return float(max(rows, key=lambda r: r["step"])[column])
    except (TypeError, ValueError):
        return None


def _curves(rows: list[dict], columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    out = {}
    for column in columns:
        if rows and all(column in r for r in rows):
            out[column] = np.array([_number(r[column]) for r in rows], float)
    return out


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _spreads(wrapper: dict[int, float], baseline: dict[int, float]) -> tuple[float | None, float | None]:
    """(spread of the paired differences, spread of the baseline's values), relative (`noise.relative_transform`),
    over the seeds both arms ran with finite values; None below two seeds."""
    seeds = sorted(s for s in set(wrapper) & set(baseline) if math.isfinite(wrapper[s]) and math.isfinite(baseline[s]))
    if len(seeds) < 2:
        return None, None
    w, b = np.array([wrapper[s] for s in seeds]), np.array([baseline[s] for s in seeds])
    forward = relative_transform(w, b)[0]
    return float(np.std(forward(w) - forward(b), ddof=1)), float(np.std(forward(b), ddof=1))
