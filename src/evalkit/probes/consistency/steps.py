"""Stage 1: the wrapper's and the baseline's records of one seed, step by step.

Per series (loss, LR, gradient norm, and the parameters after each step where both jobs recorded them) the
relative gap |w - b| / max(|w|, |b|) at every step both jobs ran (the parameters: the norm of the difference over
the larger norm). The pair is `identical` when every gap is exactly zero over the same steps, `within 1e-6` when
none exceeds `TOLERANCE`, else it diverges at the first step where one does. How a gap grows from there: its value
at the first diverging step, 10 and 100 steps later and at the last step, and a fitted rate (a least-squares line
through log10 of the gap from that step on: decades per step, read as "x10 every k steps").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evalkit.probes.evidence import JobEvidence

TOLERANCE = 1e-6                       # relative
SERIES = ("loss", "lr", "grad_norm")   # step-record columns, then "params"
LATER = (10, 100)                      # steps after the first diverging one at which the gap is shown
IDENTICAL, WITHIN, DIVERGED, UNCOMPARED = "identical", "within 1e-6", "diverged", "not compared"


@dataclass
class SeriesGap:
    """One series of a pair of jobs, step by step."""

    series: str
    steps: list[int]
    gaps: list[float]                  # relative gap per step (0 = equal, inf = one side non-finite)
    first_step: int | None = None      # first step whose gap exceeds TOLERANCE
    max_gap: float = 0.0
    growth: float | None = None        # fitted decades per step from first_step on (None: too few points)

    def gap_at(self, step: int) -> float | None:
        return self.gaps[self.steps.index(step)] if step in self.steps else None

    @property
    def later(self) -> dict[int, float | None]:
        """The gap `LATER` steps after the first diverging step (None where the run had no such step)."""
        return {} if self.first_step is None else {k: self.gap_at(self.first_step + k) for k in LATER}


@dataclass
class StepComparison:
    status: str                        # IDENTICAL | WITHIN | DIVERGED | UNCOMPARED
    steps: int = 0                     # steps both jobs ran
    first_step: int | None = None      # first diverging step, any series
    first_series: list[str] = field(default_factory=list)   # the series diverging there
    series: list[SeriesGap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def max_gap(self) -> float:
        return max((s.max_gap for s in self.series), default=0.0)

    def gap(self, name: str) -> SeriesGap | None:
        return next((s for s in self.series if s.series == name), None)

    def short(self) -> str:
        """The headline's words: 'identical 80 steps', 'within 1e-6 80 steps', 'diverges from step 7'."""
        if self.status == DIVERGED:
            return f"diverges from step {self.first_step}"
        return f"{self.status} {self.steps} steps" if self.status in (IDENTICAL, WITHIN) else self.status

    def text(self) -> str:
        """'identical 80 steps', 'within 1e-6 over 80 steps (max 3e-08)', 'diverges from step 7 (loss ...)'."""
        if self.status == IDENTICAL:
            return f"identical {self.steps} steps"
        if self.status == WITHIN:
            return f"within 1e-6 relative over {self.steps} steps (max {self.max_gap:.1e})"
        if self.status == DIVERGED:
            where = f"diverges from step {self.first_step} ({', '.join(self.first_series)}"
            diverged = [s for s in self.series if s.first_step is not None]
            shown = next((s for s in diverged if s.series == "loss"), diverged[0] if diverged else None)
            if shown is None:
                return where + ")"
            last = shown.steps[-1]
            return (f"{where}; {shown.series} gap {sci(shown.gap_at(shown.first_step))} -> "
                    f"{sci(shown.gap_at(last))} at step {last})")
        return "not compared" + (f": {self.notes[0]}" if self.notes else "")


def relative_gap(w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|w - b| / max(|w|, |b|) elementwise; 0 where equal (both NaN included), inf where one is not finite."""
    w, b = np.asarray(w, float), np.asarray(b, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.abs(w - b) / np.maximum(np.maximum(np.abs(w), np.abs(b)), 1e-300)
    same = (w == b) | (np.isnan(w) & np.isnan(b))
    gap = np.where(same, 0.0, gap)
    return np.where(np.isfinite(gap), gap, np.inf)


def compare_steps(wrapper: JobEvidence | None, baseline: JobEvidence | None) -> StepComparison:
    """Stage 1's comparison of two finished jobs' rank-0 records (either missing or unfinished: not compared)."""
    for arm, job in (("wrapper", wrapper), ("baseline", baseline)):
        if job is None:
            return StepComparison(UNCOMPARED, notes=[f"the {arm}'s job did not run"])
        if job.status != "FINISHED":
            return StepComparison(UNCOMPARED, notes=[f"the {arm}'s job {job.name} ended {job.status}"
                                                     + (f": {job.failure_reason}" if job.failure_reason else "")])
    w_rows, b_rows = _by_step(wrapper.steps), _by_step(baseline.steps)
    shared = sorted(set(w_rows) & set(b_rows))
    out = StepComparison(UNCOMPARED, steps=len(shared))
    if not shared:
        out.notes.append("no step recorded by both jobs")
        return out
    for name in SERIES:
        if all(w_rows[s].get(name) is None or b_rows[s].get(name) is None for s in shared):
            out.notes.append(f"{name} not compared: not recorded by both jobs")
            continue
        w = np.array([_float(w_rows[s].get(name)) for s in shared])
        b = np.array([_float(b_rows[s].get(name)) for s in shared])
        out.series.append(_series(name, shared, relative_gap(w, b)))
    params = sorted(set(wrapper.params) & set(baseline.params) & set(shared))
    if params and all(wrapper.params[s].shape == baseline.params[s].shape for s in params):
        out.series.append(_series("params", params, np.array([_norm_gap(wrapper.params[s], baseline.params[s])
                                                              for s in params])))
    extra = _step_count_gap(sorted(w_rows), sorted(b_rows))
    _decide(out, extra)
    return out


def _decide(out: StepComparison, extra: tuple[int, str] | None) -> None:
    firsts = [(s.first_step, s.series) for s in out.series if s.first_step is not None]
    if extra is not None:
        firsts.append((extra[0], "steps"))
        out.notes.append(f"step counts differ: {extra[1]}")
    if firsts:
        out.first_step = min(step for step, _ in firsts)
        out.first_series = [name for step, name in firsts if step == out.first_step]
        out.status = DIVERGED
    elif not out.series:
        out.notes.append("no series recorded by both jobs")
    else:
        out.status = IDENTICAL if all(g == 0 for s in out.series for g in s.gaps) else WITHIN


def _series(name: str, steps: list[int], gaps: np.ndarray) -> SeriesGap:
    over = np.nonzero(gaps > TOLERANCE)[0]
    first = int(over[0]) if over.size else None
    out = SeriesGap(name, list(steps), [float(g) for g in gaps], None if first is None else steps[first],
                    float(np.max(gaps)) if gaps.size else 0.0)
    if first is not None:
        out.growth = _growth(np.asarray(steps[first:], float), gaps[first:])
    return out


def _growth(steps: np.ndarray, gaps: np.ndarray) -> float | None:
    """Decades per step of a least-squares line through log10(gap) (positive, finite gaps; 3 at least)."""
    keep = np.isfinite(gaps) & (gaps > 0)
    if keep.sum() < 3 or np.ptp(steps[keep]) == 0:
        return None
    return float(np.polyfit(steps[keep], np.log10(gaps[keep]), 1)[0])


def growth_text(growth: float | None) -> str:
    if growth is None:
        return "-"
    if growth <= 1e-3:
        return "no growth" if growth > -1e-3 else f"shrinks x10 every {-1 / growth:.0f} steps"
    return f"x10 every {1 / growth:.0f} steps"


def _step_count_gap(w_steps: list[int], b_steps: list[int]) -> tuple[int, str] | None:
    """(first step only one job ran, why) when the two jobs ran different steps."""
    only = sorted(set(w_steps) ^ set(b_steps))
    if not only:
        return None
    return only[0], (f"the wrapper ran {len(w_steps)} step(s) (last {w_steps[-1] if w_steps else '-'}), "
                     f"the baseline {len(b_steps)} (last {b_steps[-1] if b_steps else '-'})")


def _by_step(rows: list[dict]) -> dict[int, dict]:
    return {int(r["step"]): r for r in rows if isinstance(r.get("step"), (int, float))}


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _norm_gap(w: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.linalg.norm(w)), float(np.linalg.norm(b)))
    diff = float(np.linalg.norm(w - b))
    if diff == 0:
        return 0.0
    return diff / scale if scale > 0 and math.isfinite(diff) else math.inf


def sci(value: float | None) -> str:
    """A gap in short scientific notation ('-' where there is none)."""
    return "-" if value is None else "0" if value == 0 else f"{value:.1e}"
