"""How a validation metric's mean becomes its value (`Metric.finalize` names one), torch-free: the controller's
shipper merges the ranks' sums with them."""
from __future__ import annotations

import math
from typing import Callable

FINALIZERS: dict[str, Callable[[float], float]] = {"identity": lambda mean: mean, "exp": math.exp}
