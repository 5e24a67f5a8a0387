"""A report plot (a PNG with its title and caption), the one way figures become PNG bytes, and the thinning of
curves to at most `MAX_POINTS` steps (a plot cannot show more)."""
from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

MAX_POINTS = 400


@dataclass(frozen=True)
class Plot:
    name: str        # file name, e.g. "loss_mlp_regression_1.png"
    title: str
    png: bytes
    caption: str = ""   # what to look for, shown under the plot


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def thin(steps: np.ndarray) -> np.ndarray:
    if steps.size <= MAX_POINTS:
        return np.arange(steps.size)
    return np.unique(np.linspace(0, steps.size - 1, MAX_POINTS).astype(int))
