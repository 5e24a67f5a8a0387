"""Each dimension of the probe catalog, judged for one wrapper arm from stored evidence: its probe's
`probe/<dim>/pass` metric (1 / 0) and status tag on the arm's runs ("not run" until a probe logs them), and the
training sweep's own judgments a dimension may declare (`Dimension.sweep`): `runs` (any failed or killed job fails
it, a run whose loss or metric went NaN/inf fails it, named with its seed and first non-finite step), `equivalence`
(of the final validation metric, and the loss curve's divergence step; a non-finite run fails it before any test),
`budgets` (throughput and peak-memory ratios against the overhead budget).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from evalkit import names
from evalkit.analysis import finite
from evalkit.analysis.arms import Arm
from evalkit.analysis.compare import BUDGET, NONFINITE, OUTSIDE, RELATIVE, WITHIN, Comparison
from evalkit.analysis.finite import NonFinite
from evalkit.analysis.planning import MAX_SEEDS
from evalkit.analysis.records import trainer_overrides
from evalkit.analysis.stats import DEVIATION, EQUIVALENT

PASS, FAIL, INCONCLUSIVE, NOT_RUN = "pass", "fail", "inconclusive", "not run"
BUDGET_LABELS = {names.PERF_SAMPLES_PER_S: "thr", names.PERF_PEAK_MEM: "mem"}


@dataclass
class DimensionResult:
    status: str
    figure: str = ""
    reasons: list[str] = field(default_factory=list)

    def cell(self) -> str:
        return f"{self.status} ({self.figure})" if self.figure else self.status

    def as_dict(self) -> dict:
        return {"status": self.status, "figure": self.figure, "reasons": list(self.reasons)}


def judge_runs(arm: Arm, dim: str, nonfinite: list[NonFinite] = ()) -> DimensionResult:
    """Every job ran to its end with a finite loss (`nonfinite`: the finished runs that did not), beside the probe of
    `dim` (the one that declares `sweep="runs"`): its failure or its undecided answer is the cell's."""
    jobs, broken = arm.jobs, arm.broken
    probe = judge_probe(arm, dim)
    if not jobs:  # an arm seen only through probe runs
        return probe
    if broken or nonfinite:
        figures = [f"{len(broken)}/{len(jobs)} runs failed"] if broken else []
        if nonfinite:
            figures.append(f"{len(nonfinite)}/{len(jobs)} runs non-finite {finite.since(nonfinite)}: "
                           f"{finite.seeds_text(nonfinite)}")
        reasons = _broken_reasons(broken) + ([nonfinite_reason(nonfinite, len(jobs))] if nonfinite else [])
        return DimensionResult(FAIL, "; ".join(figures), reasons + probe.reasons)
    if not arm.finished:
        return DimensionResult(INCONCLUSIVE, f"0/{len(jobs)} runs finished")
    figure = f"{len(arm.finished)}/{len(jobs)} runs ok"
    if probe.status == FAIL:
        return DimensionResult(FAIL, figure + ", probe failed", probe.reasons)
    if probe.status == INCONCLUSIVE:     # its machinery crashed or it could not decide: the runs alone are no pass
        return DimensionResult(INCONCLUSIVE, f"{figure}, {probe.figure}", probe.reasons)
    return DimensionResult(PASS, figure)


def _broken_reasons(broken) -> list[str]:
    """One line per distinct failure: which runs (id, seed/repeat) ended how, and why."""
    by_reason: dict[tuple[str, str], list] = {}
    for r in broken:
        by_reason.setdefault((r.status, r.failure_reason), []).append(r)
    lines = []
    for (status, reason), runs in by_reason.items():
        which = ", ".join(f"{r.run_id[:8]} (seed {r.seed}/repeat {r.repeat})" for r in runs[:5])
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        lines.append(f"{len(runs)} run(s) {status}: {reason} [{which}{more}]")
    return lines


def judge_probe(arm: Arm, dim: str) -> DimensionResult:
    """pass/fail/inconclusive from the arm's probe runs (`probe/<dim>/pass` metrics, the status tag when the
    probe could not decide). A probe with a headline shows it; one that counts findings shows their number and,
    on a fail, the first one (its reason tag); otherwise how many probe runs passed."""
    key, status = names.probe_pass(dim), names.probe_status(dim)
    runs = [r for r in arm.runs if key in r.metrics or r.tags.get(status) == INCONCLUSIVE]
    crashed = [r for r in arm.runs if _crashed(r, dim) and r not in runs]
    running = [r for r in arm.runs if _left_running(r, dim) and r not in runs]
    runs += crashed + running
    if not runs:
        return DimensionResult(NOT_RUN)
    failed = [r for r in runs if key in r.metrics and r.metrics[key] < 0.5]
    undecided = [r for r in runs if key not in r.metrics and r not in crashed and r not in running]
    counted = [r.metrics[f"probe/{dim}/findings"] for r in runs if f"probe/{dim}/findings" in r.metrics]
    headlines = [r.tags[names.probe_headline(dim)] for r in (failed or undecided or runs)
                 if r.tags.get(names.probe_headline(dim))]
    figure = f"{len(runs) - len(failed) - len(undecided)}/{len(runs)} probes pass"
    if headlines:
        figure = headlines[0] + (f" (+{len(runs) - 1} probe runs)" if len(runs) > 1 else "")
    elif counted:
        figure = f"{int(sum(counted))} finding{'' if sum(counted) == 1 else 's'}"
        if failed and failed[0].tags.get(names.probe_reason(dim)):
            figure += ": " + _first_finding(failed[0].tags[names.probe_reason(dim)])
    if crashed:
        figure = (f"{figure}, " if headlines or counted else "") + f"{len(crashed)}/{len(runs)} probe runs crashed"
    if running:
        figure = (f"{figure}, " if headlines or counted or crashed else "") + \
            f"{len(running)}/{len(runs)} probe runs still RUNNING"
    wrapper_crashed = [r for r in crashed if r.tags.get(names.PROBE_CRASHED_JOB)]
    if failed or wrapper_crashed:
        return DimensionResult(FAIL, figure, [_probe_reason(r, dim) for r in failed]
                               + [_crash_reason(r, dim) for r in crashed])
    if undecided or crashed or running:
        return DimensionResult(INCONCLUSIVE, figure, [_probe_reason(r, dim, "could not decide") for r in undecided]
                               + [_crash_reason(r, dim) for r in crashed] + [_running_reason(r, dim) for r in running])
    return DimensionResult(PASS, figure)


def _crashed(run, dim: str) -> bool:
    """A probe run of `dim` that ended without judging (FAILED or KILLED: the probe itself crashed)."""
    return run.role == names.ROLE_PROBE and run.probe == dim and run.status in ("FAILED", "KILLED") \
        and names.probe_pass(dim) not in run.metrics


def _left_running(run, dim: str) -> bool:
    """A probe run of `dim` still RUNNING without an answer: at work, or its controller died (an OOM kill)."""
    return run.role == names.ROLE_PROBE and run.probe == dim and run.status == "RUNNING" \
        and names.probe_pass(dim) not in run.metrics


def _running_reason(run, dim: str) -> str:
    again = f"`evalkit probe={dim} {trainer_overrides(run.trainer)} trainer.mode={run.mode}`"
    return (f"{dim} probe run {run.run_id[:8]} is still RUNNING with no answer: either it is at work (build the "
            f"verdict again once it ends) or its controller died (an OOM kill, a lost node): `evalkit-ship <its run "
            f"directory>` ends it, then run the probe again ({again})")


def _crash_reason(run, dim: str) -> str:
    """Whose crash it was: a job of the wrapper that crashed unplanted (a fail of the wrapper's), or evalkit's own
    probe machinery (nothing judged: inconclusive), with the command that runs the probe again."""
    why = run.tags.get(names.FAILURE_REASON) or "no failure reason recorded"
    again = f"`evalkit probe={dim} {trainer_overrides(run.trainer)} trainer.mode={run.mode}`"
    job = run.tags.get(names.PROBE_CRASHED_JOB)
    if job:
        return (f"{dim} probe run {run.run_id[:8]} ended {run.status} before judging because the wrapper's job "
                f"crashed where nothing was planted ({job}); the probe then stopped ({why}); after a fix, {again}")
    return (f"{dim} probe run {run.run_id[:8]} ended {run.status} before judging ({why}): evalkit's own probe "
            f"machinery stopped, not a job of the wrapper, so nothing was judged; run the probe again ({again})")


def _first_finding(reason: str, limit: int = 90) -> str:
    """The first finding's words out of a reason `N finding(s); first: <line> (+M more)`, cut to `limit`."""
    first = reason.split("first: ", 1)[-1].split(" - ", 1)[0].split(" [", 1)[0]   # words and step, no job list
    return first if len(first) <= limit else first[:limit - 1] + "…"


def _probe_reason(run, dim: str, outcome: str = "failed") -> str:
    prefix = f"probe/{dim}/"
    figures = ", ".join(f"{k[len(prefix):]}={v:g}" for k, v in sorted(run.metrics.items())
                        if k.startswith(prefix) and k != prefix + "pass")
    why = run.tags.get(names.probe_reason(dim), "")
    parts = [p for p in (why, figures) if p]
    where = f"probe run {run.run_id[:8]}" + (f" (seed {run.seed})" if run.seed is not None else "")
    return f"{dim} probe {outcome} in {where}" + (": " + "; ".join(parts) if parts else "")


def judge_consistency(comparisons: list[Comparison], divergence: int | None, why_not: str = "") -> DimensionResult:
    """Fail on any systematic deviation, pass when every metric is shown equivalent. The loss
    curve's divergence step is reported beside the decision, which rests on the final metric."""
    if not comparisons:
        return DimensionResult(NOT_RUN, why_not)
    diverged = next((c for c in comparisons if c.outcome == NONFINITE), None)
    if diverged is not None:
        return DimensionResult(FAIL, finite.summary(diverged.nonfinite, diverged.n),
                               [f"{diverged.metric}: " + nonfinite_reason(diverged.nonfinite, diverged.n)])
    curve = f"; loss leaves band @{divergence}" if divergence is not None else ""
    deviating = [c for c in comparisons if c.outcome == DEVIATION]
    if deviating:
        return DimensionResult(FAIL, delta_figure(deviating[0]) + curve,
                               [consistency_reason(c) + curve.replace(";", ",") for c in deviating])
    if all(c.outcome == EQUIVALENT for c in comparisons):
        return DimensionResult(PASS, delta_figure(comparisons[0]) + curve)
    undecided = next(c for c in comparisons if c.outcome != EQUIVALENT)
    return DimensionResult(INCONCLUSIVE, delta_figure(undecided) + "; " + need_text(undecided) + curve)


def judge_performance(comparisons: list[Comparison], why_not: str = "") -> DimensionResult:
    """Fail when a ratio is significantly outside its budget, pass when all are shown inside."""
    budgets = [c for c in comparisons if c.kind == BUDGET]
    if not budgets:
        return DimensionResult(NOT_RUN, why_not or "no throughput or memory summaries")
    figure = ", ".join(budget_figure(c, with_interval=i == 0) for i, c in enumerate(budgets))
    outside = [c for c in budgets if c.outcome == OUTSIDE]
    if outside:
        return DimensionResult(FAIL, figure, [budget_reason(c) for c in outside])
    if all(c.outcome == WITHIN for c in budgets):
        return DimensionResult(PASS, figure)
    undecided = next(c for c in budgets if c.outcome != WITHIN)
    return DimensionResult(INCONCLUSIVE, figure + "; " + need_text(undecided))


def nonfinite_reason(found: list[NonFinite], total: int) -> str:
    return f"training diverged in {len(found)}/{total} runs: {finite.detail(found)}"


def pct(x: float) -> str:
    return f"{100 * x:+.2f}" if math.isfinite(x) else "?"


def level_text(level: float) -> str:
    """90 -> '90%', 0.99583 -> '99.58%': enough digits to tell the level from 100 %."""
    if not math.isfinite(level):
        return "?"
    digits = max(0, math.ceil(-math.log10(max(1 - level, 1e-12))) - 1)
    text = f"{100 * level:.{digits}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + "%"


def amount(c: Comparison, x: float) -> str:
    """A difference as printed: '+0.50' (percent, relative scale) or '+0.0012' (metric units)."""
    if not math.isfinite(x):
        return "?"
    return pct(x) if c.scale == RELATIVE else f"{x:+.3g}"


def delta_figure(c: Comparison) -> str:
    """'Δ+0.50% [+0.07,+0.93] 90% CI': the estimate and the interval the decision used, at its level."""
    unit = "%" if c.scale == RELATIVE else ""
    if not (math.isfinite(c.delta_low) and math.isfinite(c.delta_high)):
        return f"Δ{amount(c, c.delta)}{unit}, no interval"
    return f"Δ{amount(c, c.delta)}{unit} [{amount(c, c.delta_low)},{amount(c, c.delta_high)}] {level_text(c.level)} CI"


def margin_text(c: Comparison) -> str:
    return f"±{100 * c.margin:.3g}%" if c.scale == RELATIVE else f"±{c.margin:.3g}"


def ratio_text(x: float) -> str:
    return f"{x:.2f}" if math.isfinite(x) else "?"


def budget_figure(c: Comparison, with_interval: bool = True) -> str:
    label = BUDGET_LABELS.get(c.metric, c.metric)
    finite = math.isfinite(c.ratio_low) and math.isfinite(c.ratio_high)
    interval = (f" [{ratio_text(c.ratio_low)},{ratio_text(c.ratio_high)}] {level_text(c.level)} CI"
                if with_interval and finite else "")
    return f"{label} {ratio_text(c.ratio)}x{interval}"


def need_text(c: Comparison) -> str:
    if c.n < 2 or not math.isfinite(c.unit_sd):
        return "need >= 2 seeds per arm to measure noise"
    if c.seeds_needed is None:
        if c.unit_sd == 0:
            return "undecidable: the runs do not vary and the estimate sits on the bound"
        return f"need > {MAX_SEEDS:,} seeds per arm at this spread"
    return f"need ~{c.seeds_needed} seeds per arm"


def consistency_reason(c: Comparison) -> str:
    worse = (c.delta < 0) == c.higher_is_better
    noise = (f"seed noise: wrapper {spread_text(c, c.noise_wrapper.seed_sd)}, "
             f"baseline {spread_text(c, c.noise_baseline.seed_sd)}")
    return (f"{c.metric} systematically {'worse' if worse else 'better'}: {delta_figure(c)} "
            f"beyond the {margin_text(c)} margin (Holm-adjusted p={c.p_bad_adj:.2g}, {c.design_text()}; {noise})")


def budget_reason(c: Comparison) -> str:
    label = "throughput" if c.higher_is_better else "peak memory"
    side = ">=" if c.higher_is_better else "<="
    return (f"{label} ratio {ratio_text(c.ratio)}x [{ratio_text(c.ratio_low)},{ratio_text(c.ratio_high)}] "
            f"{level_text(c.level)} CI significantly outside the budget {side} {c.margin:.2f}x "
            f"(Holm-adjusted p={c.p_bad_adj:.2g})")


def spread_text(c: Comparison, sd: float) -> str:
    """A seed spread as printed: percent on the relative scale (log sd), metric units otherwise."""
    if not math.isfinite(sd):
        return "n/a"
    return f"{100 * sd:.2f}%" if c.scale == RELATIVE else f"{sd:.3g}"
