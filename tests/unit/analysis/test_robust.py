"""The robust spread on synthetic samples with a known standard deviation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.analysis.robust import robust_sd


def test_it_estimates_a_normal_samples_standard_deviation():
    rng = np.random.default_rng(0)
    assert robust_sd(0.05 * rng.standard_normal(20_000)) == pytest.approx(0.05, rel=0.03)


def test_one_wild_value_barely_moves_it_where_the_standard_deviation_moves_a_lot():
    rng = np.random.default_rng(1)
    pairs = 0.1 + 0.02 * rng.standard_normal(8)
    wild = np.append(pairs[:-1], -0.5)
    assert robust_sd(wild) < 0.05 < np.std(wild, ddof=1)
    assert math.isnan(robust_sd([1.0]))
