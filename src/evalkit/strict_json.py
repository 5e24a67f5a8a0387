"""JSON has no NaN or inf: the one place that turns them into null before a document is written."""
from __future__ import annotations

import math
from typing import Any


def finite_only(value: Any) -> Any:
    """`value` with every non-finite float (nested in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_only(v) for v in value]
    return value
