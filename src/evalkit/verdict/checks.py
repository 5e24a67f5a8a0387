"""pyperf-style warnings about the evidence itself: too few seeds, unstable arms, missing pieces."""
from __future__ import annotations

import math

from evalkit import names
from evalkit.analysis.arms import Arm, ArmKey, baseline_for
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
        warnings += _spread_warnings(name, arm, metric_of(arm), cv_warn, check_repeats=True)
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


def _spread_warnings(name: str, arm: Arm, metric: str, cv_warn: float, check_repeats: bool) -> list[str]:
    """Spread warnings; repeats are checked for training results only (timings always vary)."""
    samples = arm.samples(metric)
    if len(samples) < 2:
        return []
    noise = spread(samples, relative_transform(samples.values)[0])
    out = []
    if math.isfinite(noise.cv) and noise.cv >= cv_warn:
        out.append(f"{name}: {metric} is unstable, std is {100 * noise.cv:.0f}% of the mean over "
                   f"{noise.n_runs} runs (>= {100 * cv_warn:.0f}%)")
    if (check_repeats and math.isfinite(noise.repeat_sd) and math.isfinite(noise.seed_sd)
            and noise.repeat_sd > 0.5 * noise.seed_sd and noise.repeat_sd > 1e-6):
        out.append(f"{name}: repeats of one seed spread {100 * noise.repeat_sd:.2f}% in {metric}, "
                   f"comparable to the seed spread {100 * noise.seed_sd:.2f}%: the runs are not "
                   "reproducible at this caliber")
    return out
