"""The overall ranking, among arms judged on the same dimensions only.

A score is the weighted mean over the dimensions an arm was judged on (scenarios.py), so a score over one dimension
says nothing against a score over seven: arms are grouped by the dimensions they were judged on, the widest coverage
first, and ranked within their group only. A wrapper's other modes (its documented quick start) stand beside its
aligned row (leads.py), never ranked as arms of their own.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evalkit.analysis.arms import ArmKey
from evalkit.probes.catalog import dimension_names
from evalkit.text import shorten
from evalkit.verdict.build import Row, Verdict, row_label
from evalkit.verdict.dimensions import NOT_RUN
from evalkit.verdict.leads import leads
from evalkit.verdict.plain import and_list
from evalkit.verdict.scenarios import Standing

NOTE = ("Arms are ranked only against arms judged on the same dimensions: a score leaves out what was not judged, so "
        "scores over different dimensions are not comparable. A wrapper's documented quick start (defaults mode) is "
        "shown beside its aligned row, not ranked as an arm of its own.")
HEADERS = ["#", "arm", "score", "coverage", "fails"]
QUICK_START_HEADER = "documented quick start"


@dataclass
class Group:
    judged: tuple[str, ...]
    standings: list[Standing] = field(default_factory=list)       # best first
    beside: dict[str, list[Row]] = field(default_factory=dict)    # a standing's label -> its wrapper's other modes
    names: dict[str, str] = field(default_factory=dict)           # a standing's label -> the arm as shown

    @property
    def title(self) -> str:
        if len(self.judged) == len(dimension_names()):
            return f"Judged on all {len(dimension_names())} dimensions"
        if not self.judged:
            return "Judged on no dimension"
        missing = [d for d in dimension_names() if d not in self.judged]
        return f"Judged on {and_list(list(self.judged))} only (not on {and_list(missing)})"


def groups(verdict: Verdict) -> list[Group]:
    """The leading rows' standings grouped by the dimensions they were judged on, the widest coverage first."""
    found = {row_label(lead.row.key): lead for lead in leads(verdict.rows)}
    shown = _shown([lead.row.key for lead in found.values()])
    out: dict[tuple[str, ...], Group] = {}
    for standing in verdict.standings:          # best first already
        lead = found.get(standing.label)
        if lead is None:
            continue
        group = out.setdefault(standing.judged, Group(standing.judged))
        group.standings.append(standing)
        group.beside[standing.label] = lead.beside
        group.names[standing.label] = shown[lead.row.key]
    return sorted(out.values(), key=lambda g: (-g.standings[0].coverage, -len(g.standings), g.judged))


def _shown(keys: list[ArmKey]) -> dict[ArmKey, str]:
    """'trainer/mode', with the task and caliber only where two arms shown would read alike."""
    counts = Counter(k.label for k in keys)
    return {k: k.label if counts[k.label] == 1 else row_label(k) for k in keys}


def with_quick_start(found: list[Group]) -> bool:
    return any(rows for g in found for rows in g.beside.values())


def table_rows(group: Group, quick_start: bool) -> list[list[str]]:
    rows = []
    for i, s in enumerate(group.standings):
        row = [str(i + 1), group.names.get(s.label, s.label), f"{s.score:.2f}", f"{100 * s.coverage:.0f}%",
               ", ".join(s.fails) or "-"]
        rows.append(row + ([quick_start_cell(group.beside.get(s.label, []))] if quick_start else []))
    return rows


def quick_start_cell(rows: list[Row]) -> str:
    """The other modes' judged cells, in short: 'semantics fail (8 findings: ...)'."""
    parts = []
    for row in rows:
        lead = "" if row.key.mode == "defaults" else f"{row.key.mode}: "
        cells = [f"{d} {row.dimensions[d].cell()}" for d in dimension_names() if row.dimensions[d].status != NOT_RUN]
        parts.append(lead + ("; ".join(cells) or "nothing judged"))
    return shorten("; ".join(parts), 120) or "-"
