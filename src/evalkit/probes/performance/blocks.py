"""The performance probe's statistics: from the blocks the arms took in turns to the per-step cost and its interval.

Input, per model depth: the steps per block and, per round, the seconds of the baseline's block and of the wrapper's
(the two ran one right after the other, on the same core). Per round and depth the added milliseconds per step
`(wrapper - baseline) / steps` and the log ratio `log(wrapper / baseline)`.

The interval holds for rounds that are not independent (the machine's state drifts over seconds): **batch means**.
The rounds are cut into `BATCHES` contiguous batches; each batch's mean is one observation, and the t interval over
the batches' means (BATCHES - 1 degrees of freedom) is the interval. Consecutive batches of a few rounds each are
nearly independent where single rounds are not; the same cut is applied to every quantity, so what the report
prints is what decided.

The fit: added ms per step = fixed + proportional x baseline ms per step, least squares over the sizes (at the
baseline's mean step time of each); its value at the reference step (`probe.performance.reference_step_ms`, the
step time of the user's model: `REFERENCE_STEP_MS` when not said), as a fraction of that step, is what the budget is
judged on. The fit is linear in the sizes' added times, so the fraction computed batch by batch (each
batch's added times, the same sizes' step times) averages to the whole run's; its interval is the batch means'
interval of those per-batch fractions. One depth only: no fit, the fraction is that depth's ratio minus one (a
fixed cost is then counted as proportional: the pessimistic reading), at that depth's own step (the baseline's mean
step time is then the reference step the report names: on a team's task, its model's step).

Between processes (issue 44): the batch means hold the noise of one pair of processes, not what differs from one
pair to the next (where the allocator put each tensor, what else the process loaded): two runs of one program differ
by more than either interval says. The fraction's interval adds `PROCESS_SD` (a standard deviation, as a fraction of
the reference step, measured between runs: its comment) to the batch means' standard error, in quadrature; no
number of rounds narrows it below that.

Looks: the rounds stop at the first planned look (`looks`: 32, 64, 128, ... rounds, up to `max_rounds`, and the
last round when the time limit ends them) whose interval lies wholly on one side of the budget. Every look uses
the Bonferroni level `decision_level(max_rounds)`: over all the looks a run may take, the chance that any of
them shows a false side is at most 5 %.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as st

BATCHES = 16                # batch means: contiguous batches of rounds
FIRST_LOOK = 32             # rounds before the first look (two per batch)
FAMILY_ALPHA = 0.05         # over every look of one run
REFERENCE_STEP_MS = 100.0   # "on a model whose step takes 100 ms": the default of probe.performance.reference_step_ms
# Between pairs of processes, as a fraction of the reference step (scripts/bench_performance_probe.py at the quick
# preset, 6 runs each, the spread of the runs' estimates beyond the standard errors their intervals were built from):
# on mlp_regression an identical copy 0.44 % (sd 0.56 % against 0.34 %), Lightning 0.00 % (0.35 against 0.36); on
# resnet18 an identical copy 0.00 % (0.38 against 0.40), Lightning 0.29 % (0.39 against 0.26). 0.5 % holds the
# largest. test_blocks_calibration.py (between processes): what it does to the intervals' coverage and to the calls.
PROCESS_SD = 0.005


def looks(max_rounds: int) -> list[int]:
    """The rounds at which the sequential rule may stop: 32, 64, ... up to max_rounds (which is always one)."""
    out, n = [], FIRST_LOOK
    while n < max_rounds:
        out.append(n)
        n *= 2
    return out + [max_rounds]


def decision_level(max_rounds: int) -> float:
    """The two-sided level of every look's interval: 1 - 0.05 / (planned looks + one at the time limit)."""
    return 1 - FAMILY_ALPHA / (len(looks(max_rounds)) + 1)


@dataclass
class Interval:
    estimate: float
    low: float
    high: float
    half: float          # half the depth (the t quantile times the standard error)
    batches: int
    floor: float = 0.0   # the part of `half` no number of rounds narrows (the t quantile times PROCESS_SD)

    @property
    def text(self) -> str:
        return f"{self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}]"


@dataclass
class Size:
    """One depth's blocks: paired by round."""

    depth: int
    steps: int                       # optimizer steps per block (both arms)
    baseline_s: np.ndarray           # per round
    wrapper_s: np.ndarray

    @property
    def rounds(self) -> int:
        return len(self.baseline_s)

    @property
    def baseline_ms(self) -> float:
        return float(1000 * self.baseline_s.mean() / self.steps)

    @property
    def wrapper_ms(self) -> float:
        return float(1000 * self.wrapper_s.mean() / self.steps)

    def added_ms(self) -> np.ndarray:
        return 1000 * (self.wrapper_s - self.baseline_s) / self.steps

    def log_ratio(self) -> np.ndarray:
        return np.log(self.wrapper_s / self.baseline_s)


def batch_means(values: np.ndarray, batches: int = BATCHES) -> np.ndarray:
    """The means of `batches` contiguous, near-equal batches (fewer when there are fewer values)."""
    parts = np.array_split(np.asarray(values, dtype=float), min(batches, len(values)))
    return np.array([p.mean() for p in parts])


def interval(per_batch: np.ndarray, level: float, between: float = 0.0) -> Interval:
    """The t interval over batch means (their mean is the estimate), `between` (a standard deviation between pairs of
    processes) added to their standard error in quadrature."""
    k = len(per_batch)
    estimate = float(per_batch.mean())
    if k < 2:
        return Interval(estimate, -math.inf, math.inf, math.inf, k)
    t = float(st.t.ppf(0.5 + level / 2, k - 1))
    half = t * math.hypot(float(per_batch.std(ddof=1)) / math.sqrt(k), between)
    return Interval(estimate, estimate - half, estimate + half, half, k, t * between)


@dataclass
class Estimate:
    sizes: list[Size]
    level: float
    added: dict[int, Interval]           # depth -> added ms per step
    ratio: dict[int, Interval]           # depth -> wrapper / baseline step time (exp of the log interval)
    fixed_ms: float | None               # the fit's intercept (None: one depth)
    proportional: float | None           # ... and slope
    fraction: Interval                   # added time at a reference_ms step, as a fraction of it
    reference_ms: float = REFERENCE_STEP_MS

    @property
    def rounds(self) -> int:
        return min(w.rounds for w in self.sizes)


def fit_weights(x: np.ndarray, reference_ms: float = REFERENCE_STEP_MS) -> np.ndarray:
    """c with fraction = c . added: the least-squares line through (x, added) evaluated at the reference step, over
    the reference step."""
    design = np.column_stack([np.ones_like(x), x])
    at_reference = np.array([1.0, reference_ms]) @ np.linalg.pinv(design)
    return at_reference / reference_ms


def estimate(sizes: list[Size], level: float, reference_ms: float = REFERENCE_STEP_MS) -> Estimate:
    """Every interval of the report, at `level`, from rounds that every depth has (the shortest depth's count); the
    fraction at a `reference_ms` step."""
    n = min(w.rounds for w in sizes)
    sizes = [Size(w.depth, w.steps, w.baseline_s[:n], w.wrapper_s[:n]) for w in sizes]
    added = {w.depth: interval(batch_means(w.added_ms()), level) for w in sizes}
    ratio = {}
    for w in sizes:
        log = interval(batch_means(w.log_ratio()), level)
        ratio[w.depth] = Interval(math.exp(log.estimate), math.exp(log.low), math.exp(log.high), log.half, log.batches)
    if len(sizes) == 1:
        only = sizes[0]
        per_batch = np.exp(batch_means(only.log_ratio())) - 1
        return Estimate(sizes, level, added, ratio, None, None, interval(per_batch, level, PROCESS_SD),
                        float(f"{only.baseline_ms:.3g}"))
    x = np.array([w.baseline_ms for w in sizes])
    per_batch_added = np.column_stack([batch_means(w.added_ms()) for w in sizes])    # batches x sizes
    c = fit_weights(x, reference_ms)
    design = np.column_stack([np.ones_like(x), x])
    fixed, proportional = np.linalg.pinv(design) @ per_batch_added.mean(axis=0)
    return Estimate(sizes, level, added, ratio, float(fixed), float(proportional),
                    interval(per_batch_added @ c, level, PROCESS_SD), reference_ms)


def decide(fraction: Interval, budget: float) -> str:
    """within | outside | undecided: where the interval lies against the budget."""
    if fraction.high < budget:
        return "within"
    if fraction.low > budget:
        return "outside"
    return "undecided"


def rounds_needed(fraction: Interval, budget: float, rounds: int) -> int | None:
    """About how many rounds in all the interval would need to decide, at its present spread and estimate (the
    rounds' part of the half depth shrinks as 1/sqrt(rounds), PROCESS_SD's does not); None when the estimate sits
    on the budget, nearer than PROCESS_SD's part (no number of rounds decides)."""
    distance = abs(fraction.estimate - budget)
    if distance <= fraction.floor or not math.isfinite(fraction.half):
        return None
    shrinking = fraction.half ** 2 - fraction.floor ** 2       # the rounds' part: as 1/rounds
    return max(rounds + 1, math.ceil(rounds * shrinking / (distance ** 2 - fraction.floor ** 2)))
