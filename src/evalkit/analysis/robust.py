"""A spread that one wild value does not inflate: for timings on a shared machine, where one job measured while
the machine changed speed would otherwise make a whole set of pairs look unstable."""
from __future__ import annotations

import math

import numpy as np

MAD_TO_SD = 1.4826          # the MAD of a normal sample times this estimates its standard deviation


def robust_sd(values) -> float:
    """The scaled median absolute deviation (NaN for fewer than two values)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return math.nan
    return float(MAD_TO_SD * np.median(np.abs(v - np.median(v))))
