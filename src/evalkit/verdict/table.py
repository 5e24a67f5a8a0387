"""The verdict as text: the first screen in plain words, the per-dimension table, the scenario ranking beside it,
fail reasons, warnings."""
from __future__ import annotations

from itertools import groupby

from evalkit.probes.catalog import dimension_names
from evalkit.verdict import ranking
from evalkit.verdict.build import Row, Verdict, row_label
from evalkit.verdict.dimensions import FAIL
from evalkit.verdict.glance import glance_text
from evalkit.verdict.versions import version_pairs, versions_text

ARM_HEADERS = ["wrapper", "mode", "runs"]


def arm_cells(row: Row) -> list[str]:
    return [row.key.trainer, row.key.mode, f"{row.n_finished}/{row.n_jobs}"]


def dimension_cells(row: Row) -> list[str]:
    return [row.dimensions[d].cell() for d in dimension_names()]


def grid(headers: list[str], rows: list[list[str]]) -> str:
    """A plain fixed-width table with a rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def terminal_table(verdict: Verdict) -> str:
    """One block per task and caliber (calibers are long), one row per wrapper and mode."""
    if not verdict.rows:
        return "no wrapper arms to judge (only baseline runs found)"
    blocks = []
    by_group = groupby(verdict.rows, key=lambda r: (r.key.task, r.key.caliber))
    for (task, caliber), rows in by_group:
        rows = list(rows)
        base = rows[0].baseline
        title = f"task {task}  caliber {caliber}  baseline {base.label if base else 'none'}"
        body = grid(ARM_HEADERS + list(dimension_names()), [arm_cells(r) + dimension_cells(r) for r in rows])
        blocks.append(title + "\n" + body)
    return "\n\n".join(blocks)


def ranking_table(verdict: Verdict) -> str:
    """The scenario ranking, one table per set of dimensions judged (ranking.py), quick starts beside."""
    name = verdict.options.scenario
    weights = verdict.options.scenarios[name]
    header = (f"Overall ranking, scenario '{name}' (weights: "
              + ", ".join(f"{d} {weights[d]:g}" for d in dimension_names())
              + "); dimensions not run are left out of the score.\n" + ranking.NOTE)
    found = ranking.groups(verdict)
    quick = ranking.with_quick_start(found)
    headers = ranking.HEADERS + ([ranking.QUICK_START_HEADER] if quick else [])
    return "\n\n".join([header] + [f"{g.title}\n" + grid(headers, ranking.table_rows(g, quick)) for g in found])


def fail_reasons(verdict: Verdict) -> list[str]:
    """'<arm>: <dimension>: <reason>' for every failed dimension of every row."""
    out = []
    for row in verdict.rows:
        for dim in dimension_names():
            result = row.dimensions[dim]
            if result.status == FAIL:
                for reason in result.reasons or [result.figure]:
                    out.append(f"{row_label(row.key)}: {dim}: {reason}")
    return out


def terminal_report(verdict: Verdict) -> str:
    """The first screen in plain words, then the table, the ranking, every fail's reason and the warnings."""
    parts = [glance_text(verdict) if verdict.rows else "", terminal_table(verdict),
             ranking_table(verdict) if verdict.rows else ""]
    parts.append(versions_text(version_pairs(verdict)))
    reasons = fail_reasons(verdict)
    parts.append("Reasons for every fail:\n" + "\n".join(f"  - {r}" for r in reasons) if reasons
                 else "No dimension failed.")
    if verdict.warnings:
        parts.append("Warnings:\n" + "\n".join(f"  ! {w}" for w in verdict.warnings))
    return "\n\n".join(p for p in parts if p)
