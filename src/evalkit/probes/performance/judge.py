"""The performance probe's judge: the per-step cost the wrapper adds, and whether it stays within the budget.

Decided at the largest width (the model closest to a real one; unstable there: inconclusive, whatever the
smaller widths say): the step-time ratio wrapper/baseline is
within the budget when its one-sided test shows it below `STEP_LIMIT` (throughput at least 0.9x the baseline's,
the verdict's default budget), outside when it shows it above; training memory likewise against `MEMORY_LIMIT`.
A memory figure that cannot decide is reported, not judged; a step time that cannot decide, or widths that are
all unstable, leave the probe inconclusive. The headline is the fitted per-step cost (measure.fit_cost).
"""
from __future__ import annotations

import math

import numpy as np

from evalkit.analysis.stats import p_above, p_below, paired_test
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.performance.measure import (
    LEVEL,
    REFERENCE_STEP_MS,
    Fit,
    JobTiming,
    WidthResult,
    compare_width,
    fit_cost,
    startup_medians,
)
from evalkit.probes.performance.plan import BASELINE, WRAPPER
from evalkit.probes.performance.report import sections

STEP_LIMIT = 1 / 0.9        # step time wrapper/baseline: throughput >= 0.9x
MEMORY_LIMIT = 1.1          # training memory wrapper/baseline
ALPHA = 1 - LEVEL


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    timings = [JobTiming.of(j) for j in jobs]
    widths = [compare_width(w, [t for t in timings if t.width == w]) for w in sorted({t.width for t in timings})]
    failed = [j for j in jobs if j.status != "FINISHED" or not j.summary.get("step_time_median_s")]
    notes = [f"job {j.name} {j.status.lower()}: {j.failure_reason or 'no step time recorded'}" for j in failed[:3]]
    notes += [f"h{r.width} not judged: {'; '.join(r.problems)}" for r in widths if r.problems]
    fit = fit_cost(widths)
    startup = startup_medians(timings)
    result = ProbeResult("performance", passed=False, notes=notes, figures=_figures(widths, fit, startup),
                         sections=sections(widths, fit, startup, timings))
    judged = widths[-1] if widths else None
    if judged is None or not judged.stable or judged.ratio is None:
        result.inconclusive = True
        where = f"h{judged.width}" if judged else "any width"
        result.notes.insert(0, f"the timing at {where} (the largest width, where the probe decides) is not stable: "
                               "not judged")
        if judged is not None and judged.ratio is not None:
            r = judged.ratio
            cost = f"{fit.fixed.estimate:+.2f} ms/step [{fit.fixed.low:+.2f},{fit.fixed.high:+.2f}], " if fit else ""
            result.headline = (f"timing unstable: {cost}step {r.estimate:.2f}x [{r.low:.2f},{r.high:.2f}] "
                               f"@h{judged.width}")
        else:
            result.headline = f"timing not measured @{where}"
        return result
    time_call, mem_call = _decide(judged, "ratio", STEP_LIMIT), _decide(judged, "mem_ratio", MEMORY_LIMIT)
    result.headline = _headline(fit, judged, mem_call)
    if "outside" in (time_call, mem_call):
        result.notes.insert(0, _outside_note(judged, time_call, mem_call))
    elif time_call == "within":
        result.passed = True
        if mem_call == "undecided":
            result.notes.append(f"training memory at h{judged.width} not decided: {judged.mem_ratio.text}x")
    else:
        result.inconclusive = True
        result.notes.insert(0, f"step time {judged.ratio.text}x at h{judged.width}: neither shown within "
                               f"{STEP_LIMIT:.3f}x nor above it; more repeats (probe.repeats) would decide")
    return result


def _decide(width: WidthResult, attribute: str, limit: float) -> str:
    """within | outside | undecided | unmeasured: the one-sided tests of the paired log ratio against `limit`."""
    if getattr(width, attribute) is None:
        return "unmeasured"
    arms = ([b.step_ms for b, _ in width.pairs], [w.step_ms for _, w in width.pairs]) if attribute == "ratio" else (
        [b.train_mem for b, w in width.pairs if b.train_mem and w.train_mem],
        [w.train_mem for b, w in width.pairs if b.train_mem and w.train_mem])
    test = paired_test(np.log(arms[1]), np.log(arms[0]))
    if float(p_above(test, math.log(limit))) < ALPHA:
        return "outside"
    if float(p_below(test, math.log(limit))) < ALPHA:
        return "within"
    return "undecided"


def _headline(fit: Fit | None, judged: WidthResult, mem_call: str) -> str:
    """The per-step cost, the step ratio where it was decided, and the training memory when it decided
    against the wrapper (in MiB too: a toy model's few MiB make large ratios)."""
    ratio = judged.ratio
    line = f"step {ratio.estimate:.2f}x [{ratio.low:.2f},{ratio.high:.2f}] @h{judged.width}"
    if fit is not None:
        f = fit.fixed
        line = f"{f.estimate:+.2f} ms/step [{f.low:+.2f},{f.high:+.2f}], {line}"
    if mem_call == "outside":
        m, added = judged.mem_ratio, judged.mem_added
        line += f", training memory {m.estimate:.2f}x [{m.low:.2f},{m.high:.2f}] ({added.estimate:+.1f} MiB)"
    return line


def _outside_note(judged: WidthResult, time_call: str, mem_call: str) -> str:
    parts = []
    if time_call == "outside":
        parts.append(f"step time {judged.ratio.text}x the baseline's, above the budget {STEP_LIMIT:.3f}x")
    if mem_call == "outside":
        parts.append(f"training memory {judged.mem_ratio.text}x the baseline's, above the budget {MEMORY_LIMIT}x")
    return f"at h{judged.width}: " + "; ".join(parts)


def _figures(widths: list[WidthResult], fit: Fit | None, startup: dict) -> dict[str, float]:
    figures: dict[str, float] = {}
    for r in widths:
        key = f"h{r.width}"
        figures[f"{key}/baseline_ms"], figures[f"{key}/wrapper_ms"] = r.baseline_ms, r.wrapper_ms
        figures[f"{key}/stable"] = float(r.stable)
        for name, paired in (("ratio", r.ratio), ("added_ms", r.added_ms), ("mem_ratio", r.mem_ratio),
                             ("mem_added_mib", r.mem_added)):
            if paired is not None:
                figures[f"{key}/{name}"] = paired.estimate
                figures[f"{key}/{name}_low"], figures[f"{key}/{name}_high"] = paired.low, paired.high
    if fit is not None:
        figures["added_ms_per_step"], figures["added_ms_per_step_low"] = fit.fixed.estimate, fit.fixed.low
        figures["added_ms_per_step_high"] = fit.fixed.high
        if fit.proportional is not None:
            figures["added_proportional"] = fit.proportional.estimate
        figures[f"added_fraction_at_{REFERENCE_STEP_MS:.0f}ms"] = fit.at_reference.estimate
    for arm, milestones in startup.items():
        for m, seconds in milestones.items():
            figures[f"startup/{m}_s/{arm}"] = seconds
    if BASELINE in startup and WRAPPER in startup:
        for m in startup[WRAPPER].keys() & startup[BASELINE].keys():
            figures[f"startup/{m}_s/added"] = startup[WRAPPER][m] - startup[BASELINE][m]
    return {k: v for k, v in figures.items() if v is not None and math.isfinite(v)}
