"""The verdict report: one list of blocks rendered twice, as markdown (plots as PNG files beside it)
and as one self-contained HTML page (plots embedded as base64 PNG)."""
from __future__ import annotations

import base64
import html
import json
import math
import re
from dataclasses import dataclass, field
from itertools import groupby

from evalkit import names
from evalkit.analysis import finite
from evalkit.analysis.compare import EQUIVALENCE, NONFINITE, RELATIVE, Comparison
from evalkit.analysis.records import RunRecord, probe_runs
from evalkit.probes.catalog import dimension_names, dimensions
from evalkit.verdict import ranking
from evalkit.verdict.build import Verdict, row_label
from evalkit.verdict.dimensions import amount, level_text, margin_text, spread_text
from evalkit.verdict.figure import Plot
from evalkit.verdict.glance import INTRO, QUICK_START, glance
from evalkit.verdict.probe_plots import semantic_probe_runs
from evalkit.verdict.table import arm_cells, dimension_cells, fail_reasons
from evalkit.verdict.versions import version_pairs

METHOD = (
    "Each wrapper arm (one adapter and mode at one task and caliber, over seeds and repeats) is compared "
    "with the baseline arm of the same task and caliber. A wrapper run whose loss or metric went NaN or inf "
    "fails the columns judged on runs and on equivalence outright, named with its seed and first non-finite step. "
    "Final "
    "validation metrics are compared on the scale the task declares: relative (log ratio; a margin m means "
    "the ratio lies in [1 - m, 1 + m]) or absolute (difference; ±m in the metric's units). Repeats are "
    "averaged within a seed; seeds are paired when at least 80 % of each arm's seeds are shared, unpaired "
    "(Welch) when fewer than two are, and in between the stronger of the paired test on the shared seeds "
    "and the unpaired test on all is used at half the level each (Bonferroni x2); runs without a seed tag "
    "are never paired. *pass* = two one-sided tests show the difference inside the margin (its 1 - 2a "
    "interval is inside); *fail* = a one-sided test shows it beyond the margin (its 1 - a interval is "
    "entirely outside); otherwise *inconclusive*, with the seeds per arm a re-run needs to decide with 80 % "
    "assurance at Holm's first step (alpha / number of comparisons), given the estimate and spread so far. "
    "Budgets: throughput and peak-memory ratios (Welch t on log values over runs) against the overhead "
    "budget, one-sided each way. p-values are Holm-adjusted over every comparison of this verdict, and a "
    "= alpha x p / p_adjusted is the level Holm left each comparison: every interval shown is the one its "
    "decision used, at that level (90 % for one comparison at alpha 0.05). A non-significant difference "
    "is never reported as equivalence. Where a column's own probe ran for an arm (same trainer and mode), its "
    "result fills that column instead, measured for that question (docs/probes/: each probe's method); the sweep's "
    "comparisons fill a column only where no probe of it ran, and say so."
)


@dataclass
class Block:
    kind: str                      # "h2" | "h3" | "text" | "caption" | "table" | "list" | "plot"
    text: str = ""
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    plot: Plot | None = None


def blocks(verdict: Verdict, plots: list[Plot], inputs: dict) -> list[Block]:
    """The report, its first screen answering which wrapper, which dimension and why: the verdict at a glance,
    then the table under one heading per task and caliber."""
    out = [Block("h2", "At a glance")] + glance_blocks(verdict) + [Block("h2", "Per-dimension verdict")]
    for (task, caliber), rows in groupby(verdict.rows, key=lambda r: (r.key.task, r.key.caliber)):
        rows = list(rows)
        base = rows[0].baseline
        out += [Block("h3", f"{task} · caliber {caliber} · baseline {base.label if base else 'none'}"),
                Block("table", headers=["wrapper", "mode", "runs"] + list(dimension_names()),
                      rows=[arm_cells(r) + dimension_cells(r) for r in rows])]
    out += _versions(verdict)
    out += _ranking(verdict)
    reasons = fail_reasons(verdict)
    out += [Block("h2", "Reasons for every fail"), Block("list", rows=[[r] for r in reasons] or [["none"]])]
    out += _semantic_findings(semantic_probe_runs(verdict))
    for dim in dimensions():          # each probe's own section, where it declares one (the differences' are above)
        if dim.report_title:
            out += _probe_sections(dim.name, dim.report_title,
                                   probe_runs([r for a in verdict.arms.values() for r in a.runs], dim.name))
    out += [Block("h2", "Stability and noise warnings")] + warning_blocks(verdict.warnings)
    out += [Block("h2", "Plots")] + [b for p in plots for b in _plot_blocks(p)]
    out += [Block("h2", "Comparisons"), _comparison_table(verdict), Block("h2", "Method"), Block("text", METHOD)]
    out += [Block("h2", "Inputs"),
            Block("text", " · ".join(f"{k}: {v}" for k, v in inputs.items() if v not in (None, "")))]
    return out


def _versions(verdict: Verdict) -> list[Block]:
    """'What changed between versions': one table per version against its reference, only where a sweep held
    several versions of one wrapper (`trainer.env`)."""
    pairs = version_pairs(verdict)
    if not pairs:
        return []
    out = [Block("h2", "What changed between versions")]
    for pair in pairs:
        rows = [[c.dimension, c.before, c.after, ", ".join(c.appeared) or "-",
                 ", ".join(c.gone) or (f"none (not judged: {', '.join(c.unjudged)})" if c.unjudged else "-")]
                for c in pair.changes]
        out.append(Block("h3", pair.title))
        if rows:
            out.append(Block("table", headers=["dimension", pair.reference.trainer, pair.other.trainer,
                                               "findings new", "findings gone"], rows=rows))
        said = [f"Judged alike: {', '.join(pair.same)}." if pair.same else "No dimension judged alike."]
        said += [f"Judged in one version only: {', '.join(pair.one_sided)}."] if pair.one_sided else []
        out.append(Block("text", " ".join(said)))
    return out


def glance_blocks(verdict: Verdict) -> list[Block]:
    """The first screen: a line on how to read it, then per wrapper its paragraph with its quick start beside it."""
    entries = glance(verdict)
    if not entries:
        return [Block("text", "No wrapper arm to judge (only baseline runs found).")]
    return [Block("text", INTRO)] + [Block("glance", e.title, rows=[[e.paragraph, e.quick_start]]) for e in entries]


_WARNING = re.compile(r"^(?P<arm>.+?) @ (?P<task>\S+) \[(?P<caliber>[^\]]*)\]: (?P<message>.*)$", re.S)


def warning_blocks(warnings: list[str]) -> list[Block]:
    """Warnings under one heading per task and caliber, each message once with every arm it concerns."""
    if not warnings:
        return [Block("list", rows=[["none"]])]
    groups: dict[str, dict[str, list[str]]] = {}
    for warning in dict.fromkeys(warnings):
        found = _WARNING.match(warning)
        where = f"{found['task']} · caliber {found['caliber']}" if found else "other"
        message, arm = (found["message"], found["arm"]) if found else (warning, "")
        arms = groups.setdefault(where, {}).setdefault(message, [])
        if arm and arm not in arms:
            arms.append(arm)
    out = []
    for where, messages in groups.items():
        out += [Block("h3", where), Block("list", rows=[[(", ".join(arms) + ": " if arms else "") + message]
                                                        for message, arms in messages.items()])]
    return out


def _plot_blocks(plot: Plot) -> list[Block]:
    return [Block("h3", plot.title), Block("plot", plot=plot)] + ([Block("caption", plot.caption)] if plot.caption
                                                                  else [])


FINDING_HEADERS = ["#", "finding", "first step", "job", "expected", "observed", "size", "explained by",
                   "align with", "adapter says"]


def _semantic_findings(runs: list[RunRecord]) -> list[Block]:
    """Per run of a probe whose findings are differences from your loop (`Dimension.differences`): pass/fail and the
    number of findings, every finding in a table, the notes."""
    out = [Block("h2", "Semantic findings")]
    if not runs:
        return out + [Block("list", rows=[["none: no such probe run among the runs read"]])]
    twins = {(r.trainer, r.mode) for r in runs if sum((o.trainer, o.mode) == (r.trainer, r.mode) for o in runs) > 1}
    for run in runs:
        result = run.probe_results.get(run.probe)
        findings = [f for f in (result or {}).get("findings") or [] if isinstance(f, dict)]
        where = f" (probe run {run.run_id[:8]})" if (run.trainer, run.mode) in twins else ""
        if result is None:   # the metrics judged it, the findings file could not be read
            count = run.metrics.get(f"probe/{run.probe}/findings")
            counted = "findings unknown" if count is None else _findings_text(int(count))
            out += [Block("h3", f"{run.trainer}/{run.mode}: {_passed_text(run, None, run.probe)}, {counted}{where}"),
                    Block("text", f"probe/{run.probe}.json of probe run {run.run_id[:8]} could not be read; "
                                  "its verdict cell comes from the run's metrics.")]
            continue
        out.append(Block("h3", f"{run.trainer}/{run.mode}: {_passed_text(run, result, run.probe)}, "
                               f"{_findings_text(len(findings))}{where}"))
        if findings:
            out.append(Block("table", headers=FINDING_HEADERS,
                             rows=[_finding_row(i, f) for i, f in enumerate(findings, start=1)]))
        for section in result.get("sections") or []:      # defaults mode: the quick start and its departures
            out += markdown_blocks(str(section))
        notes = [_value(n) for n in result.get("notes") or [] if _value(n)]
        if notes:
            out.append(Block("list", rows=[[n] for n in notes]))
    return out


def _probe_sections(dim: str, title: str, runs: list[RunRecord]) -> list[Block]:
    """Per probe run of `dim`: its status and headline, then the tables its judge wrote."""
    if not runs:
        return []
    out = [Block("h2", title)]
    for run in runs:
        result = run.probe_results.get(dim) or {}
        status = run.tags.get(names.probe_status(dim)) or _passed_text(run, result or None, dim)
        headline = result.get("headline") or run.tags.get(names.probe_headline(dim)) or ""
        out.append(Block("h3", f"{run.trainer}/{run.mode}: {status}" + (f" ({headline})" if headline else "")
                               + f" [probe run {run.run_id[:8]}]"))
        for section in result.get("sections") or []:
            out += markdown_blocks(str(section))
        notes = [_value(n) for n in result.get("notes") or [] if _value(n)]
        if notes:
            out.append(Block("list", rows=[[n] for n in notes]))
    return out


def markdown_blocks(text: str) -> list[Block]:
    """A judge's markdown (headings `## x`, pipe tables, paragraphs) as report blocks, so the HTML page shows
    tables as tables."""
    out: list[Block] = []
    table: list[list[str]] = []

    def cells(line: str) -> list[str]:
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]

    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            if not re.fullmatch(r"\s*\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", line):
                table.append(cells(line))
            continue
        if table:
            out.append(Block("table", headers=table[0], rows=table[1:]))
            table = []
        if line.startswith("#"):
            out.append(Block("h3", line.lstrip("#").strip()))
        elif line.strip():
            out.append(Block("text", line.strip()))
    return out


def _passed_text(run: RunRecord, result: dict | None, dim: str) -> str:
    passed = result.get("passed") if result is not None else None
    if passed is None:
        metric = run.metrics.get(f"probe/{dim}/pass")
        passed = None if metric is None else metric >= 0.5
    return "result unknown" if passed is None else ("pass" if passed else "fail")


def _findings_text(n: int) -> str:
    return f"{n} finding{'' if n == 1 else 's'}"


def _finding_row(i: int, f: dict) -> list[str]:
    explained = [_value(e) for e in f.get("explained_by") or [] if _value(e)]
    return [str(i), _value(f.get("title") or f.get("code")), _value(f.get("first_step")), _value(f.get("job")),
            _value(f.get("expected")), _value(f.get("observed")), _value(f.get("size")),
            "; ".join(explained) or "unexplained", _value(f.get("knob")), _value(f.get("declared"))]


def _value(v) -> str:
    """A finding's field as one line of text: numbers to 4 significant digits, lists and objects as JSON."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return _num(v, "{:.4g}")
    if isinstance(v, (list, dict)):
        text = json.dumps(v, default=str, separators=(", ", ": "))
    else:
        text = str(v)
    return " ".join(text.split())


def _ranking(verdict: Verdict) -> list[Block]:
    name = verdict.options.scenario
    weights = verdict.options.scenarios[name]
    note = (f"Scenario **{name}** (weights " + ", ".join(f"{d} {weights[d]:g}" for d in dimension_names())
            + "). Shown beside the table, never instead of it; dimensions not run are left out of the score "
            "and coverage is the share of the weight that was measured. " + ranking.NOTE)
    found = ranking.groups(verdict)
    quick = ranking.with_quick_start(found)
    headers = ranking.HEADERS + ([ranking.QUICK_START_HEADER] if quick else [])
    out = [Block("h2", "Overall ranking"), Block("text", note)]
    for group in found:
        out += [Block("h3", group.title), Block("table", headers=headers, rows=ranking.table_rows(group, quick))]
    return out


def _num(x, fmt="{:.3g}") -> str:
    return fmt.format(x) if x is not None and math.isfinite(x) else "n/a"


def _comparison_row(label: str, c: Comparison) -> list[str]:
    if c.outcome == NONFINITE:
        figure, interval = finite.summary(c.nonfinite, c.n), "-"
    elif c.kind == EQUIVALENCE:
        unit = "%" if c.scale == RELATIVE else ""
        figure = f"{amount(c, c.delta)}{unit}"
        interval = f"[{amount(c, c.delta_low)}, {amount(c, c.delta_high)}]{unit} {level_text(c.level)}"
    else:
        figure = f"{c.ratio:.3f}x"
        interval = f"[{_num(c.ratio_low, '{:.4f}')}, {_num(c.ratio_high, '{:.4f}')}]x {level_text(c.level)}"
    bound = margin_text(c) + f" {c.scale}" if c.kind == EQUIVALENCE else f"{c.margin:.2f}x"
    return [label, c.metric, figure, interval, bound,
            _num(c.p_good_adj), _num(c.p_bad_adj), c.design_text(),
            spread_text(c, c.noise_wrapper.seed_sd), spread_text(c, c.noise_baseline.seed_sd),
            spread_text(c, c.noise_baseline.repeat_sd), c.outcome, str(c.seeds_needed or "-")]


def _comparison_table(verdict: Verdict) -> Block:
    headers = ["arm", "metric", "estimate", "interval the decision used", "margin/budget", "p good (adj)",
               "p bad (adj)", "design", "seed sd wrapper", "seed sd baseline", "repeat sd baseline", "outcome",
               "seeds needed"]
    rows = [_comparison_row(row_label(r.key), c) for r in verdict.rows for c in r.comparisons]
    return Block("table", headers=headers, rows=rows)


def summary_blocks(verdict: Verdict) -> list[Block]:
    """The verdict at a glance (for a run's description): the per-dimension table and the ranking."""
    table = Block("table", headers=["wrapper", "mode", "runs", "task"] + list(dimension_names()),
                  rows=[arm_cells(r) + [r.key.task] + dimension_cells(r) for r in verdict.rows])
    return [table] + _ranking(verdict)[1:]


def render_markdown(title: str | None, parts: list[Block], plot_dir: str = "plots") -> str:
    lines = [f"# {title}", ""] if title else []
    for b in parts:
        if b.kind == "h2":
            lines += [f"## {b.text}", ""]
        elif b.kind == "h3":
            lines += [f"### {b.text}", ""]
        elif b.kind == "text":
            lines += [b.text, ""]
        elif b.kind == "caption":
            lines += [f"*{b.text}*", ""]
        elif b.kind == "list":
            lines += [f"- {r[0]}" for r in b.rows] + [""]
        elif b.kind == "glance":
            paragraph, quick = b.rows[0]
            lines += [f"### {b.text}", "", paragraph, ""] + ([f"> *{QUICK_START}:* {quick}", ""] if quick else [])
        elif b.kind == "plot":
            lines += [f"![{b.plot.title}]({plot_dir}/{b.plot.name})", ""]
        elif b.kind == "table":
            esc = lambda c: c.replace("|", "\\|")  # noqa: E731
            lines += ["| " + " | ".join(b.headers) + " |", "|" + "---|" * len(b.headers)]
            lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in b.rows] + [""]
    return "\n".join(lines)


CSS = ("body{font-family:system-ui,sans-serif;margin:1em 2em;max-width:1400px}"
       "h1,h2,h3,p,li{overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}"
       "h2{margin-top:1.4em}h3{font-size:1em;margin:1em 0 .3em}"
       "p.caption{color:#444;font-size:13px;max-width:900px}"
       "@media (max-width:700px){body{margin:.5em}td,th{font-size:12px}}"
       "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
       "th{background:#f0f0f0}.pass{background:#e3f6e3}.fail{background:#fbe0e0}"
       ".inconclusive{background:#fff4d6}.not-run{color:#888}img{max-width:100%}"
       "section.wrapper{margin:.2em 0 1em}.pair{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);"
       "gap:1.5em;align-items:start}.pair p{margin:0;line-height:1.45}p.aligned{max-width:80ch}"
       "p.quick{background:#f5f5f5;border-left:3px solid #bbb;padding:.4em .8em;font-size:14px}"
       "@media (max-width:900px){.pair{grid-template-columns:minmax(0,1fr);gap:.6em}}")


def _inline(text: str) -> str:
    """Escaped text with markdown's **bold** and `code` as HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _cell(text: str) -> str:
    status = next((s for s in ("inconclusive", "not run", "pass", "fail") if text.startswith(s)), "")
    cls = f' class="{status.replace(" ", "-")}"' if status else ""
    return f"<td{cls}>{html.escape(text)}</td>"


def render_html(title: str, parts: list[Block]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for b in parts:
        if b.kind in ("h2", "h3"):
            body.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
        elif b.kind == "text":
            body.append(f"<p>{_inline(b.text)}</p>")
        elif b.kind == "glance":
            paragraph, quick = b.rows[0]
            aside = f'<p class="quick"><strong>{QUICK_START}:</strong> {_inline(quick)}</p>' if quick else ""
            body.append(f'<section class="wrapper"><h3>{html.escape(b.text)}</h3><div class="pair">'
                        f'<p class="aligned">{_inline(paragraph)}</p>{aside}</div></section>')
        elif b.kind == "caption":
            body.append(f'<p class="caption">{html.escape(b.text)}</p>')
        elif b.kind == "list":
            body.append("<ul>" + "".join(f"<li>{html.escape(r[0])}</li>" for r in b.rows) + "</ul>")
        elif b.kind == "plot":
            data = base64.b64encode(b.plot.png).decode("ascii")
            body.append(f'<img alt="{html.escape(b.plot.title)}" src="data:image/png;base64,{data}">')
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in b.rows)
            body.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")
