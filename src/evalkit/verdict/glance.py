"""The report's first screen: one short paragraph per wrapper in plain words, its quick start beside it.

Per wrapper (its aligned row, leads.py), in the order a team with its own loop asks (each probe's `Dimension.asks`):
what differs from that loop and the setting that aligns it, whether the results match, what it can run, what it costs
per step and in memory, what breaks under kill, corrupt and OOM drills, what it costs to customize and to keep; then
the dimensions not judged and what would judge them. Beside it, what the documented quick start gives you (the
wrapper's defaults-mode rows). Figures' names, run ids and every reason stay in the report's detail below; a
paragraph holds at most PARAGRAPH_MAX characters, a quick start QUICK_START_MAX.
"""
from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass

from evalkit.analysis.arms import Arm, ArmKey
from evalkit.analysis.records import trainer_overrides
from evalkit.probes.catalog import dimension, dimension_names
from evalkit.text import shorten
from evalkit.verdict.build import Row, Verdict
from evalkit.verdict.dimensions import FAIL, NOT_RUN
from evalkit.verdict.leads import LEADING_MODE, leads
from evalkit.verdict.plain import and_list, differences, evidence, sentence

PARAGRAPH_MAX, QUICK_START_MAX = 900, 450
QUICK_START = "What the documented quick start gives you"
INTRO = ("One paragraph per wrapper, measured against your hand-written loop (evalkit's baseline) with the wrapper's "
         "settings aligned to it; beside it, what the wrapper's documented quick start gives you. Every figure, "
         "interval, run id and reason is in the sections below.")


@dataclass
class Entry:
    title: str
    paragraph: str
    quick_start: str = ""      # "" when no other mode of the wrapper was judged


def glance(verdict: Verdict) -> list[Entry]:
    """One entry per leading row (an aligned row, or the row of a wrapper that has none)."""
    found = leads(verdict.rows)
    keys = [lead.row.key for lead in found]
    return [Entry(_title(lead.row.key, keys), paragraph(lead.row, verdict.arms.get(lead.row.key)),
                  quick_start(lead.beside, verdict.arms)) for lead in found]


def _title(key: ArmKey, keys: list[ArmKey]) -> str:
    """The wrapper's name, with its task, caliber or mode only where they tell two entries apart."""
    title = key.trainer if key.mode == LEADING_MODE else f"{key.trainer} ({key.mode} mode)"
    if len({k.task for k in keys}) > 1:
        title += f" · {key.task}"
    if Counter((k.trainer, k.task) for k in keys)[(key.trainer, key.task)] > 1:
        title += f" · caliber {key.caliber}"
    return title


def paragraph(row: Row, arm: Arm | None) -> str:
    """Each judged dimension's sentence, then what was not judged: that tail is never the part cut to fit."""
    said = [sentence(evidence(row, arm, d)) for d in dimension_names("asks") if row.dimensions[d].status != NOT_RUN]
    tail = not_judged(row)
    room = PARAGRAPH_MAX - (len(tail) + 1 if tail else 0)
    return " ".join(part for part in (shorten(" ".join(said), room), tail) if part)


def not_judged(row: Row) -> str:
    """'Not judged: stability and maintenance (no probe ran for them); `evalkit probe=<dimension> ...` judges each.'"""
    dims = [d for d in dimension_names("asks") if row.dimensions[d].status == NOT_RUN]
    if not dims:
        return ""
    by_why: dict[str, list[str]] = {}
    for d in dims:
        by_why.setdefault(row.dimensions[d].figure or "no probe ran", []).append(d)
    said = "; ".join(f"{and_list(group)} ({why})" for why, group in by_why.items())
    command = f"`evalkit probe=<dimension> {trainer_overrides(row.key.trainer)} trainer.mode={row.key.mode}`"
    return shorten(f"Not judged: {said}; {command} judges each.", 260)


def quick_start(rows: list[Row], arms: dict[ArmKey, Arm]) -> str:
    """The wrapper's other modes in a few sentences: its differences from your loop with the setting that aligns each
    (the first three), its other judged dimensions, and which were judged at all."""
    parts = []
    for row in rows:
        lead = "" if row.key.mode == "defaults" else f"In {row.key.mode} mode: "
        said = []
        for dim in dimension_names("asks"):
            if row.dimensions[dim].status == NOT_RUN:
                continue
            e = evidence(row, arms.get(row.key), dim)
            said.append(f"Differs from your loop in {differences(e, 3, True)}." if dimension(dim).differences
                        and e.status == FAIL and e.findings else sentence(e))
        judged = [d for d in dimension_names("asks") if row.dimensions[d].status != NOT_RUN]
        if judged and len(judged) < len(dimension_names("asks")):
            said.append(f"Only its {and_list(judged)} {'was' if len(judged) == 1 else 'were'} judged in this mode.")
        parts.append(lead + (" ".join(said) or "Nothing was judged in this mode."))
    return shorten(" ".join(parts), QUICK_START_MAX)


def glance_text(verdict: Verdict, width: int = 100) -> str:
    """The first screen for a terminal: each wrapper's name, its paragraph and its quick start, wrapped."""
    lines = ["At a glance (against your hand-written loop; every figure and reason follows)"]
    for entry in glance(verdict):
        lines += ["", entry.title] + textwrap.wrap(entry.paragraph, width, initial_indent="  ", subsequent_indent="  ")
        if entry.quick_start:
            lines += textwrap.wrap(f"{QUICK_START}: {entry.quick_start}", width, initial_indent="  > ",
                                   subsequent_indent="    ")
    return "\n".join(lines)
