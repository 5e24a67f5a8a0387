"""Per-step curves over seeds: the baseline's band and the first step a wrapper leaves it.

The band says, step by step, how far the wrapper's seed-mean curve may stray from the baseline's
if the wrapper behaved like the baseline, at `confidence`:

- seeds shared by both arms (paired; runs without a seed tag are never paired): per seed, the
  relative difference wrapper/baseline - 1; the band is baseline mean × (1 ± t · sd / sqrt(n)) over
  the shared seeds. Pairing removes the seed's own data-order noise, which dominates per-step losses;
- otherwise (unpaired): baseline mean ± t · sd_b · sqrt(1/n_b + 1/n_w).

Either band is widened to at least `rtol` of the mean, so bit-level noise between identical runs
does not count. The wrapper leaves the band when it stays outside for `min_run` consecutive logged
steps; requiring a run of steps keeps per-step false alarms along a long curve in check.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalkit.analysis.arms import shared_seeds
from evalkit.analysis.records import RunRecord


@dataclass(frozen=True)
class CurveSet:
    """Curves of one arm on a common step axis: one row per seed (repeats averaged), NaN = absent."""

    steps: np.ndarray
    values: np.ndarray
    seeds: np.ndarray

    @property
    def n_seeds(self) -> int:
        return self.values.shape[0]

    def mean(self) -> np.ndarray:
        return _nan_stat(np.nanmean, self.values)

    def sd(self) -> np.ndarray:
        return _nan_stat(lambda v, axis: np.nanstd(v, axis=axis, ddof=1), self.values)


def empty_curves() -> CurveSet:
    return CurveSet(np.empty(0, int), np.empty((0, 0)), np.empty(0, int))


def _nan_stat(fn, values: np.ndarray) -> np.ndarray:
    if values.shape[0] == 0:
        return np.full(values.shape[1], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns and single seeds
        return fn(values, axis=0)


def seed_curves(runs: list[RunRecord], column: str, source: str = "steps") -> CurveSet:
    """Stack `column` of each run's `source` records ("steps" or "val") by step; average repeats."""
    usable = [(r, getattr(r, source)) for r in runs]
    usable = [(r, t) for r, t in usable if "step" in t and column in t and len(t["step"])]
    if not usable:
        return empty_curves()
    steps = np.unique(np.concatenate([t["step"] for _, t in usable])).astype(int)
    run_seeds = [r.seed if r.seed is not None else -1 - i for i, (r, _) in enumerate(usable)]
    seeds, rows = np.unique(run_seeds, return_inverse=True)
    cells, values = [], []
    for row, (_, table) in zip(rows, usable):
        ok = np.isfinite(table[column])
        cells.append(row * len(steps) + np.searchsorted(steps, table["step"][ok].astype(int)))
        values.append(table[column][ok])
    cells, size = np.concatenate(cells), len(seeds) * len(steps)
    sums = np.bincount(cells, weights=np.concatenate(values), minlength=size).reshape(len(seeds), -1)
    counts = np.bincount(cells, minlength=size).reshape(len(seeds), -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return CurveSet(steps, np.where(counts > 0, sums / counts, np.nan), seeds)


def align(a: CurveSet, b: CurveSet) -> tuple[np.ndarray, CurveSet, CurveSet]:
    """The two curve sets restricted to the steps both logged."""
    steps, ia, ib = np.intersect1d(a.steps, b.steps, return_indices=True)
    return steps, CurveSet(steps, a.values[:, ia], a.seeds), CurveSet(steps, b.values[:, ib], b.seeds)


@dataclass(frozen=True)
class Band:
    steps: np.ndarray
    center: np.ndarray     # baseline mean
    half: np.ndarray       # half-width around it
    outside: np.ndarray    # per step: the wrapper is outside
    paired: bool


def _critical(n: np.ndarray, confidence: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return stats.t.ppf(0.5 + confidence / 2, n - 1)


def divergence_band(wrapper: CurveSet, baseline: CurveSet, confidence: float = 0.99,
                    rtol: float = 1e-4) -> Band:
    """The baseline's band on the steps both arms logged, paired when they share two or more seeds."""
    steps, w, b = align(wrapper, baseline)
    center = b.mean()
    floor = rtol * np.abs(center)
    shared, wi, bi = shared_seeds(w.seeds, b.seeds)
    with np.errstate(invalid="ignore", divide="ignore"):
        if len(shared) >= 2:
            rel = CurveSet(steps, w.values[wi] / b.values[bi] - 1.0, shared)
            n = np.sum(np.isfinite(rel.values), axis=0)
            half_rel = np.fmax(_critical(n, confidence) * rel.sd() / np.sqrt(n), rtol)
            return Band(steps, center, half_rel * np.abs(center), np.abs(rel.mean()) > half_rel, True)
        n_b = np.sum(np.isfinite(b.values), axis=0)
        half = _critical(n_b, confidence) * b.sd() * np.sqrt(1.0 / n_b + 1.0 / max(w.n_seeds, 1))
        half = np.fmax(half, floor)
        return Band(steps, center, half, np.abs(w.mean() - center) > half, False)


def first_divergence(wrapper: CurveSet, baseline: CurveSet, confidence: float = 0.99,
                     min_run: int = 3, rtol: float = 1e-4) -> int | None:
    """First step from which the wrapper stays outside the baseline band for `min_run` consecutive
    common steps; None when it never does (or there is nothing to compare)."""
    if wrapper.n_seeds == 0 or baseline.n_seeds == 0:
        return None
    band = divergence_band(wrapper, baseline, confidence, rtol)
    if band.steps.size == 0:
        return None
    run = min(min_run, band.steps.size)
    hits = np.flatnonzero(np.convolve(band.outside.astype(int), np.ones(run, int), "valid") == run)
    return int(band.steps[hits[0]]) if hits.size else None
