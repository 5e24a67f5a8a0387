"""Noise within an arm: spread over seeds and, separately, over repeats of one seed.

Spreads are relative: standard deviations of log values (≈ coefficient of variation for small
spreads), or of values divided by the mean magnitude when a metric can be zero or negative.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from evalkit.analysis.arms import Samples

Transform = Callable[[np.ndarray], np.ndarray]


def relative_transform(*value_sets: np.ndarray) -> tuple[Transform, Callable[[float], float]]:
    """(forward, back) to a scale where differences are relative, for the evidence warnings only.

    log / expm1 when every value is positive; otherwise division by the pooled mean magnitude,
    whose differences already read as relative ones. Comparisons never use it: their scale is the one
    the metric declares (`compare.transform`), not one guessed from the data.
    """
    values = np.concatenate([np.asarray(v, float) for v in value_sets]) if value_sets else np.ones(1)
    if values.size == 0 or np.all(values > 0):
        return np.log, lambda d: float(np.expm1(d))
    scale = float(np.mean(np.abs(values))) or 1.0
    return (lambda x: np.asarray(x, float) / scale), float


@dataclass(frozen=True)
class Spread:
    n_runs: int
    n_seeds: int
    max_repeats: int
    seed_sd: float      # relative spread of per-seed means (NaN below 2 seeds)
    repeat_sd: float    # pooled relative spread of repeats around their seed's mean (NaN without)
    cv: float           # plain std/mean over all runs, for pyperf-style warnings

    def as_dict(self) -> dict:
        return {k: _json_float(v) for k, v in self.__dict__.items()}


def spread(samples: Samples, transform: Transform = np.log) -> Spread:
    if len(samples) == 0:
        return Spread(0, 0, 0, float("nan"), float("nan"), float("nan"))
    seeds, means = samples.per_seed(transform)
    _, inverse, counts = np.unique(samples.seeds, return_inverse=True, return_counts=True)
    residuals = transform(samples.values) - means[inverse]
    repeat_df = len(samples) - len(seeds)
    repeat_sd = float(np.sqrt(np.sum(residuals**2) / repeat_df)) if repeat_df > 0 else float("nan")
    seed_sd = float(np.std(means, ddof=1)) if len(seeds) > 1 else float("nan")
    mean = float(np.mean(samples.values))
    cv = float(np.std(samples.values, ddof=1) / abs(mean)) if len(samples) > 1 and mean else float("nan")
    return Spread(len(samples), len(seeds), int(counts.max()), seed_sd, repeat_sd, cv)


def _json_float(value):
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
