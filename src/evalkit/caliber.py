"""The caliber tag (`evalkit.caliber`): the conditions a run's figures were measured at, in one line.

Only runs of one caliber are compared (analysis/arms.py groups them by this string), so every writer formats it
here from its parts: a job's controller (controller/job/run.py) and each probe's `caliber()`.
"""
from __future__ import annotations

from collections.abc import Sequence

SEPARATOR = "|"


def caliber_tag(kind: str = "", /, **parts: object) -> str:
    """`kind|key=value|...` in the order given, e.g. `hw=cpu|thr=2|bs=32|prec=fp32|ws=1,2`. `kind` (a probe's
    name for its own conditions) comes first when given. A value is written as `str` would, a float short (`0.05`),
    a list or tuple joined by commas; True writes the key alone (a switch), None or False leaves the part out.
    A `|` inside a part would split the tag: ValueError."""
    written = [kind] if kind else []
    for key, value in parts.items():
        if value is None or value is False:
            continue
        written.append(key if value is True else f"{key}={_value(value)}")
    for part in written:
        if SEPARATOR in part:
            raise ValueError(f"a caliber part may not hold {SEPARATOR!r}: {part!r}")
    return SEPARATOR.join(written)


def _value(value: object) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str):    # a list, a tuple, an OmegaConf ListConfig
        return ",".join(_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
