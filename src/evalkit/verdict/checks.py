"""pyperf-style warnings about the evidence itself: too few seeds, unstable arms, missing pieces."""
from __future__ import annotations

import math

import numpy as np

from evalkit import names
from evalkit.analysis.arms import Arm, ArmKey, baseline_for, shared_seeds
from evalkit.analysis.finite import nonfinite_runs
from evalkit.analysis.noise import relative_transform, spread

THROUGHPUT = names.PERF_SAMPLES_PER_S


def arm_name(key: ArmKey) -> str:
    return f"{key.label} @ {key.task} [{key.caliber}]"


def evidence_warnings(arms: dict[ArmKey, Arm], metric_of, min_seeds: int, cv_warn: float) -> list[str]:
    """Warnings for every arm; `metric_of(arm)` names the arm's final validation metric key."""
    warnings: list[str] = []
    for key, arm in arms.items():
        name = arm_name(key)
        warnings += _seed_warnings(name, arm, min_seeds)
        base = None if key.is_baseline else baseline_for(key, arms)
        paired = _paired_warnings(name, arm, base, metric_of(arm), cv_warn) if base is not None else None
        warnings += paired or []
        warnings += _spread_warnings(name, arm, metric_of(arm), cv_warn, check_repeats=True,
                                     check_spread=paired is None)
        warnings += _spread_warnings(name, arm, THROUGHPUT, cv_warn, check_repeats=False)
        if key.is_baseline and arm.broken:
            reasons = sorted({r.failure_reason for r in arm.broken})
            warnings.append(f"{name}: {len(arm.broken)} baseline run(s) failed ({'; '.join(reasons)}): "
                            "the control itself is not healthy")
        diverged = nonfinite_runs(arm.finished, metric_of(arm)) if key.is_baseline else []
        if diverged:
            which = ", ".join(f"seed {f.run.seed} " + (f"from step {f.step}" if f.step is not None else f.where)
                              for f in diverged[:8])
            warnings.append(f"{name}: {len(diverged)} baseline run(s) trained to a non-finite loss ({which}): "
                            "the control itself is not healthy; they are left out of every comparison")
        if not key.is_baseline and arm.finished and baseline_for(key, arms) is None:
            warnings.append(f"{name}: no finished baseline arm at this task and caliber; nothing to compare")
    return warnings


def _seed_warnings(name: str, arm: Arm, min_seeds: int) -> list[str]:
    out = []
    if arm.unfinished:
        out.append(f"{name}: {len(arm.unfinished)} run(s) still running or scheduled; left out")
    n = len(arm.seeds)
    if arm.finished and n < min_seeds:
        out.append(f"{name}: only {n} seed(s) finished; at least {min_seeds} are needed to tell "
                   "seed noise from a systematic shift (5+ recommended)")
    return out


def _paired_warnings(name: str, arm: Arm, base: Arm, metric: str, cv_warn: float) -> list[str] | None:
    """The noise that matters to a paired comparison: how much the wrapper's difference from the baseline varies
    from seed to seed (a task whose seeds spread widely can still give a steady paired difference). None when
    fewer than two seeds are shared: then the arm's own spread is all there is."""
    w, b = arm.samples(metric), base.samples(metric)
    if len(w) < 2 or len(b) < 2:
        return None
    transform = relative_transform(w.values, b.values)[0]
    (w_seeds, w_means), (b_seeds, b_means) = w.per_seed(transform), b.per_seed(transform)
    shared, iw, ib = shared_seeds(w_seeds, b_seeds)
    if len(shared) < 2:
        return None
    sd = float(np.std(w_means[iw] - b_means[ib], ddof=1))
    if not math.isfinite(sd) or sd < cv_warn:
        return []
    return [f"{name}: its paired difference from the baseline in {metric} varies by {100 * sd:.0f}% from seed to "
            f"seed over {len(shared)} shared seeds (>= {100 * cv_warn:.0f}%): more seeds are needed to tell a shift "
            "from seed noise"]


def _spread_warnings(name: str, arm: Arm, metric: str, cv_warn: float, check_repeats: bool,
                     check_spread: bool = True) -> list[str]:
    """Spread warnings; repeats are checked for training results only (timings always vary)."""
    samples = arm.samples(metric)
    if len(samples) < 2:
        return []
    noise = spread(samples, relative_transform(samples.values)[0])
    out = []
    if check_spread and math.isfinite(noise.cv) and noise.cv >= cv_warn:
        out.append(f"{name}: {metric} is unstable, std is {100 * noise.cv:.0f}% of the mean over "
                   f"{noise.n_runs} runs (>= {100 * cv_warn:.0f}%)")
    if (check_repeats and math.isfinite(noise.repeat_sd) and math.isfinite(noise.seed_sd)
            and noise.repeat_sd > 0.5 * noise.seed_sd and noise.repeat_sd > 1e-6):
        out.append(f"{name}: repeats of one seed spread {100 * noise.repeat_sd:.2f}% in {metric}, "
                   f"comparable to the seed spread {100 * noise.seed_sd:.2f}%: the runs are not "
                   "reproducible at this caliber")
    return out
