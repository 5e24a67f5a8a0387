"""Which rows lead the report's first screen and its ranking, and which stand beside them.

A wrapper's aligned row (its settings aligned to the hand-written loop) leads; the same wrapper's rows in another
mode (defaults: what its documented quick start gives you) stand beside each of its aligned rows instead of being
shown, or ranked, as wrappers of their own. A wrapper without an aligned row leads with its own rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from evalkit.verdict.build import Row

LEADING_MODE = "aligned"


@dataclass
class Lead:
    row: Row
    beside: list[Row] = field(default_factory=list)   # the same wrapper in its other modes


def leads(rows: list[Row]) -> list[Lead]:
    """One Lead per aligned row (its wrapper's other modes beside it), and one per row of a wrapper that has no
    aligned row; in the rows' order."""
    aligned = {r.key.trainer for r in rows if r.key.mode == LEADING_MODE}
    out = []
    for row in rows:
        if row.key.mode == LEADING_MODE:
            out.append(Lead(row, [r for r in rows if r.key.trainer == row.key.trainer and r.key.mode != LEADING_MODE]))
        elif row.key.trainer not in aligned:
            out.append(Lead(row))
    return out
