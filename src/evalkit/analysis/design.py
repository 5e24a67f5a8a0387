"""Which tests a comparison of final values runs, from the seeds the two arms share.

- paired, when at least 80 % of each arm's seeds are shared (all of them, or one failed or extra run
  among five): the few unshared seeds could add little, and pairing cancels the seed's own effect;
- unpaired (Welch), when they share fewer than two (runs without a seed tag are never paired);
- otherwise both, paired on the shared seeds and unpaired on every seed, each at half the level
  (Bonferroni x2), the comparison taking the stronger: no run is thrown away, and choosing after
  looking at the data does not inflate the error rate (picking the narrower interval would: with 2
  shared seeds of 10 per arm its false-positive rate is 0.08 at alpha 0.05; Bonferroni's is 0.045).
The rule looks at seed counts only, never at the values, so each design keeps its level. 80 % is where
pairing alone stops beating the split even with no seed effect at all (its variance is n/n_shared times
the unpaired one, about what halving the level costs).
Everything broadcasts over leading axes, so a Monte-Carlo calibration runs the analyzer's own code.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalkit.analysis.arms import shared_seeds
from evalkit.analysis.stats import LogRatioTest, p_beyond, p_equivalence, paired_test, welch_test

PAIRED, UNPAIRED = "paired", "unpaired"
PAIRED_SHARE = 0.8      # pair alone when the shared seeds are at least this share of each arm's seeds


@dataclass(frozen=True)
class Design:
    """One test of a comparison: paired on the shared seeds or unpaired on all of them."""

    name: str            # PAIRED | UNPAIRED
    test: LogRatioTest
    n_wrapper: int       # seeds (units) in the test, per arm
    n_baseline: int
    left_out: int = 0    # seeds of either arm the test does not use (unshared seeds of a paired test)


def designs(w_ids: np.ndarray, w_values: np.ndarray, b_ids: np.ndarray, b_values: np.ndarray) -> list[Design]:
    """The tests a comparison of per-seed values runs (values on the test scale, last axis = the sorted
    ids; leading axes broadcast, e.g. Monte-Carlo draws)."""
    shared, wi, bi = shared_seeds(w_ids, b_ids)
    n = len(shared)
    out = []
    if n >= 2:
        left_out = len(w_ids) + len(b_ids) - 2 * n
        out.append(Design(PAIRED, paired_test(w_values[..., wi], b_values[..., bi]), n, n, left_out))
    if n < 2 or n < PAIRED_SHARE * max(len(w_ids), len(b_ids)):
        out.append(Design(UNPAIRED, welch_test(w_values, b_values), len(w_ids), len(b_ids)))
    return out


def claim_p_values(tests: list[Design], lower: float, upper: float) -> tuple[np.ndarray, np.ndarray]:
    """(p_good, p_bad) of a comparison decided by the stronger of its designs (Bonferroni over them)."""
    k = len(tests)
    good = np.min([p_equivalence(d.test, lower, upper) for d in tests], axis=0)
    bad = np.min([p_beyond(d.test, lower, upper) for d in tests], axis=0)
    return np.minimum(k * good, 1.0), np.minimum(k * bad, 1.0)
