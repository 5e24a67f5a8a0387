"""The verdict report: one list of blocks rendered twice, as markdown (plots as PNG files beside it)
and as one self-contained HTML page (plots embedded as base64 PNG)."""
from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field

from evalkit.analysis.compare import EQUIVALENCE, Comparison
from evalkit.verdict.build import Verdict, row_label
from evalkit.verdict.dimensions import DIMENSIONS
from evalkit.verdict.plots import Plot
from evalkit.verdict.table import arm_cells, dimension_cells, fail_reasons

METHOD = (
    "Each wrapper arm (one adapter and mode at one task and caliber, over seeds and repeats) is compared "
    "with the baseline arm of the same task and caliber. Final validation metrics are compared on the log "
    "ratio, averaging repeats within a seed and pairing seeds when both arms share them. *pass* = two "
    "one-sided tests show the ratio inside the margin; *fail* = the difference is significant AND its "
    "estimate lies beyond the margin; otherwise *inconclusive*, with the seeds per arm that the observed "
    "spread would need. Performance: throughput and peak-memory ratios (Welch t on log values over runs) "
    "against the overhead budget. p-values are Holm-adjusted over every comparison of this verdict; "
    "intervals are two-sided at 1 - alpha. A non-significant difference is never reported as equivalence."
)


@dataclass
class Block:
    kind: str                      # "h2" | "text" | "table" | "list" | "plot"
    text: str = ""
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    plot: Plot | None = None


def blocks(verdict: Verdict, plots: list[Plot], inputs: dict) -> list[Block]:
    out = [Block("text", " · ".join(f"{k}: {v}" for k, v in inputs.items() if v not in (None, "")))]
    out += [Block("h2", "Per-dimension verdict"),
            Block("table", headers=["wrapper", "mode", "runs", "task", "caliber"] + list(DIMENSIONS),
                  rows=[arm_cells(r) + [r.key.task, r.key.caliber] + dimension_cells(r) for r in verdict.rows])]
    out += _ranking(verdict)
    reasons = fail_reasons(verdict)
    out += [Block("h2", "Reasons for every fail"), Block("list", rows=[[r] for r in reasons] or [["none"]])]
    out += [Block("h2", "Stability and noise warnings"),
            Block("list", rows=[[w] for w in verdict.warnings] or [["none"]])]
    out += [Block("h2", "Plots")] + [b for p in plots for b in (Block("text", p.title), Block("plot", plot=p))]
    out += [Block("h2", "Comparisons"), _comparison_table(verdict), Block("h2", "Method"), Block("text", METHOD)]
    return out


def _ranking(verdict: Verdict) -> list[Block]:
    name = verdict.options.scenario
    weights = verdict.options.scenarios[name]
    note = (f"Scenario **{name}** (weights " + ", ".join(f"{d} {weights[d]:g}" for d in DIMENSIONS)
            + "). Shown beside the table, never instead of it; dimensions not run are left out of the score "
            "and coverage is the share of the weight that was measured.")
    rows = [[str(i + 1), s.label, f"{s.score:.2f}", f"{100 * s.coverage:.0f}%", ", ".join(s.fails) or "-"]
            for i, s in enumerate(verdict.standings)]
    return [Block("h2", "Overall ranking"), Block("text", note),
            Block("table", headers=["#", "arm", "score", "coverage", "fails"], rows=rows)]


def _num(x, fmt="{:.3g}") -> str:
    return fmt.format(x) if x is not None and math.isfinite(x) else "n/a"


def _comparison_row(label: str, c: Comparison) -> list[str]:
    figure = (f"{100 * c.delta:+.2f}%" if c.kind == EQUIVALENCE else f"{c.ratio:.3f}x")
    bound = f"±{100 * c.margin:.1f}%" if c.kind == EQUIVALENCE else f"{math.exp(c.bound):.2f}x"
    return [label, c.metric, figure, f"[{_num(c.ratio_low, '{:.4f}')}, {_num(c.ratio_high, '{:.4f}')}]", bound,
            _num(c.p_good_adj), _num(c.p_bad_adj), ("paired" if c.paired else "unpaired") + f" n={c.n}",
            _num(100 * c.noise_wrapper.seed_sd, "{:.2f}%"), _num(100 * c.noise_baseline.seed_sd, "{:.2f}%"),
            _num(100 * c.noise_baseline.repeat_sd, "{:.2f}%"), c.outcome, str(c.seeds_needed or "-")]


def _comparison_table(verdict: Verdict) -> Block:
    headers = ["arm", "metric", "estimate", "ratio interval", "margin/budget", "p good (adj)", "p bad (adj)",
               "design", "seed sd wrapper", "seed sd baseline", "repeat sd baseline", "outcome", "seeds needed"]
    rows = [_comparison_row(row_label(r.key), c) for r in verdict.rows for c in r.comparisons]
    return Block("table", headers=headers, rows=rows)


def render_markdown(title: str, parts: list[Block], plot_dir: str = "plots") -> str:
    lines = [f"# {title}", ""]
    for b in parts:
        if b.kind == "h2":
            lines += [f"## {b.text}", ""]
        elif b.kind == "text":
            lines += [b.text, ""]
        elif b.kind == "list":
            lines += [f"- {r[0]}" for r in b.rows] + [""]
        elif b.kind == "plot":
            lines += [f"![{b.plot.title}]({plot_dir}/{b.plot.name})", ""]
        elif b.kind == "table":
            esc = lambda c: c.replace("|", "\\|")  # noqa: E731
            lines += ["| " + " | ".join(b.headers) + " |", "|" + "---|" * len(b.headers)]
            lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in b.rows] + [""]
    return "\n".join(lines)


CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
       "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}"
       "th{background:#f0f0f0}.pass{background:#e3f6e3}.fail{background:#fbe0e0}"
       ".inconclusive{background:#fff4d6}.not-run{color:#888}img{max-width:100%}")


def _cell(text: str) -> str:
    status = next((s for s in ("inconclusive", "not run", "pass", "fail") if text.startswith(s)), "")
    cls = f' class="{status.replace(" ", "-")}"' if status else ""
    return f"<td{cls}>{html.escape(text)}</td>"


def render_html(title: str, parts: list[Block]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for b in parts:
        if b.kind == "h2":
            body.append(f"<h2>{html.escape(b.text)}</h2>")
        elif b.kind == "text":
            body.append(f"<p>{html.escape(b.text).replace('**', '')}</p>")
        elif b.kind == "list":
            body.append("<ul>" + "".join(f"<li>{html.escape(r[0])}</li>" for r in b.rows) + "</ul>")
        elif b.kind == "plot":
            data = base64.b64encode(b.plot.png).decode("ascii")
            body.append(f'<img alt="{html.escape(b.plot.title)}" src="data:image/png;base64,{data}">')
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")
