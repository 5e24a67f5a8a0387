"""Each dimension of one wrapper arm in plain words, for the report's first screen.

A sentence answers what a team with its own hand-written loop asks of that dimension, from the arm's cell and the
probe result behind it (`probe/<dim>.json`; the figures logged as metrics when that file could not be read) or the
sweep's own comparisons. It names no raw figure and no run id: those stay in the report's detail. A figure a probe
no longer records leaves its sentence to the cell's own figure, so a renamed figure costs words, never a wrong number.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from evalkit import names
from evalkit.analysis.arms import Arm
from evalkit.analysis.compare import BUDGET, EQUIVALENCE, OUTSIDE, WITHIN, Comparison
from evalkit.probes.catalog import dimension
from evalkit.text import shorten
from evalkit.verdict.build import Row
from evalkit.verdict.dimensions import FAIL, INCONCLUSIVE, PASS, DimensionResult, delta_figure, level_text, margin_text


@dataclass
class Evidence:
    """What one dimension of one arm rests on: its cell, the probe result read back, the sweep's comparisons."""

    dim: str
    cell: DimensionResult
    result: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)          # the result's notes and reason: why it could not decide
    comparisons: list[Comparison] = field(default_factory=list)
    arm: Arm | None = None

    @property
    def status(self) -> str:
        return self.cell.status

    def fig(self, name: str) -> float | None:
        value = self.figures.get(name)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    @property
    def findings(self) -> list[dict]:
        return [f for f in self.result.get("findings") or [] if isinstance(f, dict) and f.get("title")]

    @property
    def headline(self) -> str:
        return str(self.result.get("headline") or "")


def evidence(row: Row, arm: Arm | None, dim: str) -> Evidence:
    """The arm's probe run for `dim` (one whose status is the cell's, when several ran) and what it recorded."""
    cell = row.dimensions[dim]
    runs = [r for r in (arm.runs if arm else []) if r.role == names.ROLE_PROBE and r.probe == dim]
    run = next((r for r in runs if r.tags.get(names.probe_status(dim)) == cell.status), runs[0] if runs else None)
    comparisons = row.comparisons if dimension(dim).sweep in ("equivalence", "budgets") else []
    if run is None:
        return Evidence(dim, cell, comparisons=comparisons, arm=arm)
    result = run.probe_results.get(dim) or {}
    prefix = f"probe/{dim}/"
    figures = result.get("figures") or {k[len(prefix):]: v for k, v in run.metrics.items()
                                        if k.startswith(prefix) and k != names.probe_pass(dim)}
    texts = [str(n) for n in result.get("notes") or []] + [run.tags.get(names.probe_reason(dim), "")]
    headline = result.get("headline") or run.tags.get(names.probe_headline(dim), "")
    return Evidence(dim, cell, {**result, "headline": headline}, figures, [t for t in texts if t], comparisons, arm)


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:+.{digits}f} %"


def plural(n: float, word: str, one: str = "", many: str = "s") -> str:
    return f"{n:g} {word}{one if n == 1 else many}"


def and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def decider(e: Evidence) -> str:
    """What would decide an undecided cell, from the words its probe or comparison left."""
    for text in e.texts + [e.cell.figure]:
        found = re.search(r"about (\d[\d,]*) (rounds|seeds per arm)", text) or re.search(r"need ~(\d+) (seeds per arm)",
                                                                                         text)
        if found:
            return f"about {found[1]} {found[2]} in all would decide it"
        if "need >= 2 seeds" in text:
            return "two seeds or more per arm would measure the noise"
    return f"running its probe again (`evalkit probe={e.dim}`) would decide it"


def _distinct_titles(findings: list[dict]) -> list[dict]:
    seen, out = set(), []
    for f in findings:
        if f["title"] not in seen:
            seen.add(f["title"])
            out.append(f)
    return out


def knob_text(knob: str) -> str:
    """The setting that aligns a finding, in a few words ('' when the finding names none)."""
    knob = " ".join(str(knob or "").split())
    if not knob:
        return ""
    if knob.lower().startswith(("none", "no ")):
        return "no setting aligns it"
    while re.search(r" \([^()]*\)?$", knob):             # trailing asides: "(aligned: ...)", "(the page's ..."
        knob = re.sub(r" \([^()]*\)?$", "", knob)
    head = knob.split(": ", 1)[0]
    return "align: " + shorten(head if _balanced(head) else knob, 70)


def _balanced(text: str) -> bool:
    return all(text.count(a) == text.count(b) for a, b in ("()", "[]", "{}"))


def differences(e: Evidence, shown: int, with_knobs: bool) -> str:
    """'N ways: <title> (align: <knob>); <title>; and M more', from the findings (else the cell's figure)."""
    findings = e.findings
    count = int(e.fig("findings") if e.fig("findings") is not None else len(findings))
    if not findings:
        return shorten(e.cell.figure, 120)
    parts = []
    for f in _distinct_titles(findings)[:shown]:
        knob = knob_text(f.get("knob", "")) if with_knobs else ""
        parts.append(f"{shorten(f['title'], 90)}" + (f" ({knob})" if knob else ""))
    more = count - len(parts)
    return f"{plural(count, 'way')}: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


COUNTS_NOT_JUDGED = ("world_sizes_not_judged", "switches_not_judged")


def not_judged(e: Evidence) -> str:
    """'; world size 2 not judged (documented as unsupported)': what a documented refusal left unjudged, from the
    `<what>_not_judged` figures ('' when nothing was)."""
    whats = [k.removesuffix("_not_judged") for k in sorted(e.figures)
             if k.endswith("_not_judged") and k not in COUNTS_NOT_JUDGED and e.fig(k)]
    if not whats:
        return ""
    words = [re.sub(r"^ws(\d+)$", r"world size \1", w) for w in whats]
    return f"; {and_list(words)} not judged (documented as unsupported)"


def step_for_step(e: Evidence) -> str:
    if e.status == PASS:
        checked = f"{e.fig('steps_checked'):g} steps checked, " if e.fig("steps_checked") else ""
        return f"Trains step for step like your loop ({checked}no difference){not_judged(e)}."
    if e.status == FAIL:
        return f"Differs from your loop in {differences(e, 1, True)}."
    return f"Whether it trains step for step like your loop is undecided; {decider(e)}."


def results_match(e: Evidence) -> str:
    equivalence = next((c for c in e.comparisons if c.kind == EQUIVALENCE), None)
    steps = e.fig("steps_compared")
    if e.status == PASS and e.fig("identical") == 1 and steps:
        return f"Results identical to your loop's over {steps:g} steps{not_judged(e)}."
    if e.status == PASS and equivalence is not None and not e.figures:    # the sweep's own comparison
        return (f"Final validation {equivalence.metric.removeprefix(names.VAL_PREFIX)} matches your loop's within "
                f"the {margin_text(equivalence)} margin ({delta_figure(equivalence)}).")
    if e.status == PASS:
        said = shorten(e.headline or e.cell.figure, 70)
        return f"Results match your loop's within the margin ({said}){not_judged(e)}."
    if e.status == FAIL:
        what = e.findings[0]["title"] if e.findings else e.cell.figure
        return f"Results drift from your loop's: {shorten(what, 80)}."
    measured = delta_figure(equivalence) if equivalence is not None and not e.figures else e.headline
    return f"Whether its results match your loop's is undecided{f' ({shorten(measured, 60)})' if measured else ''}; " \
           f"{decider(e)}."


def capabilities(e: Evidence) -> str:
    passed, total = e.fig("items_passed"), e.fig("items_total")
    parts = []
    if total:
        missing = [shorten(f["title"], 50) for f in _distinct_titles(e.findings)[:2]]
        parts.append(f"Runs {passed:g} of {total:g} capabilities asked" + (f" ({'; '.join(missing)})" if missing
                                                                           and passed < total else ""))
        if e.fig("items_not_claimed"):
            parts.append(f"{e.fig('items_not_claimed'):g} not claimed (documented as unsupported)")
    broken = e.arm.broken if e.arm else []
    if broken:
        why = shorten(broken[0].failure_reason, 50)
        parts.append(f"{len(broken)} of {len(e.arm.jobs)} training runs failed ({why})")
    elif e.arm and e.arm.finished and not parts:
        parts.append(f"{len(e.arm.finished)} of {len(e.arm.jobs)} training runs finished" if e.status == PASS
                     else f"Its training runs: {shorten(e.cell.figure, 60)}")
    if not parts:
        parts.append(f"Capabilities: {e.status} ({shorten(e.cell.figure, 60)})")
    return "; ".join(parts) + "."


def memory_text(e: Evidence) -> str:
    """', and +18 MiB of training memory (your loop: 54 MiB)' at the largest size both arms recorded."""
    sizes = {}
    for key in e.figures:
        found = re.fullmatch(r"[a-z]+(\d+)/train_mib/(baseline|wrapper)", key)
        if found and e.fig(key) is not None:
            sizes.setdefault(int(found[1]), {})[found[2]] = e.fig(key)
    both = [size for size, arms in sizes.items() if len(arms) == 2]
    if not both:
        return ""
    arms = sizes[max(both)]
    return f" and {round(arms['wrapper'] - arms['baseline']):+d} MiB of training memory (your loop: " \
           f"{arms['baseline']:.0f} MiB)"


STANDING = {PASS: "within", FAIL: "over", INCONCLUSIVE: "undecided against"}


def added_fraction(e: Evidence) -> tuple[float | None, float | None, float | None]:
    """The added time at the reference step and its interval (older runs named it at 100 ms)."""
    key = "added_fraction" if e.fig("added_fraction") is not None else "added_fraction_at_100ms"
    return e.fig(key), e.fig(f"{key}_low"), e.fig(f"{key}_high")


def step_cost(e: Evidence) -> str:
    cost, low, high = added_fraction(e)
    budgets = [c for c in e.comparisons if c.kind == BUDGET]
    if cost is not None:
        level = e.fig("level")
        interval = f"{level_text(level)} interval " if level else "interval "
        interval += f"{pct(low)[:-2]} to {pct(high)}" if low is not None and high is not None else "not recorded"
        budget = re.search(r"budget (\d+(?:\.\d+)?)%", e.headline)
        where = f"; {STANDING.get(e.status, e.status)} the {budget[1]} % budget" if budget else ""
        where += f", {decider(e)}" if e.status == INCONCLUSIVE else ""
        step = e.fig("reference_step_ms") or 100.0
        fixed = e.fig("added_ms_per_step")
        fixed = f"; {fixed:+.2f} ms per step fixed" if fixed is not None else ""
        timed = " with the loggers and progress bars its quick start leaves on" \
            if e.arm is not None and e.arm.key.mode == "defaults" else ""
        return f"Adds {pct(cost)} to a {step:g} ms step{timed} ({interval}{fixed}{where}){memory_text(e)}."
    if budgets and not e.figures:
        words = "Per the sweep's whole jobs, " + " and ".join(_budget_words(c) for c in budgets)
        return words + (f"; {decider(e)}." if e.status == INCONCLUSIVE else ".")
    if e.status == INCONCLUSIVE:
        return f"Its per-step cost was not measured ({shorten(e.headline or e.cell.figure, 60)}); {decider(e)}."
    return f"Per-step cost: {e.status} ({shorten(e.headline or e.cell.figure, 90)})."


BUDGET_WORDS = {WITHIN: "within", OUTSIDE: "outside"}


def _budget_words(c: Comparison) -> str:
    """'throughput 0.50x your loop's (99% interval 0.47 to 0.54; outside the >= 0.90x budget)'."""
    what = "throughput" if c.higher_is_better else "peak memory"
    interval = f"{level_text(c.level)} interval {c.ratio_low:.2f} to {c.ratio_high:.2f}; " \
        if math.isfinite(c.ratio_low) and math.isfinite(c.ratio_high) else ""
    return f"{what} {c.ratio:.2f}x your loop's ({interval}{BUDGET_WORDS.get(c.outcome, 'undecided against')} the " \
           f"{'>=' if c.higher_is_better else '<='} {c.margin:.2f}x budget)"


def drills(e: Evidence) -> str:
    passed, total, idle = e.fig("items_passed"), e.fig("items_total"), e.fig("items_not_exercised")
    if not total:
        if e.status == INCONCLUSIVE:
            return f"No kill, corrupt-checkpoint or OOM drill could be judged; {decider(e)}."
        return f"Kill, corrupt-checkpoint and OOM drills: {e.status} ({shorten(e.cell.figure, 90)})."
    unjudged = (f"; {idle:g} not exercised" if idle else "") + not_judged(e)
    if e.status == PASS:
        return f"Kill, corrupt-checkpoint and OOM drills: all {total:g} as in your loop{unjudged}."
    broken = []
    for f in _distinct_titles(e.findings)[:2]:
        shared = (f.get("evidence") or {}).get("shared_with_torch") or "shared with plain torch" in str(f.get("size"))
        broken.append(shorten(f["title"], 60) + (" (as plain torch.load does)" if shared else ""))
    breaks = f"; breaks: {'; '.join(broken)}" if broken else ""
    return f"Kill, corrupt-checkpoint and OOM drills: {passed:g} of {total:g} as in your loop{breaks}{unjudged}."


def custom_code(e: Evidence) -> str:
    loss, callback = e.fig("loss_lines"), e.fig("callback_lines")
    if loss is None or callback is None:
        return f"Customizing: {e.status} ({shorten(e.cell.figure, 80)})."
    base = (e.fig("loss_baseline_lines"), e.fig("callback_baseline_lines"))
    yours = f" (your loop: {base[0]:g} and {base[1]:g})" if None not in base else ""
    private = e.fig("private_touches")
    touches = "" if private is None else ", no private API" if private == 0 else f", {plural(private, 'private API')}"
    over = "; more than allowed" if e.status == FAIL else ""
    return f"A custom loss takes {loss:g} lines and a callback {callback:g}{yours}{touches}{over}."


def upkeep(e: Evidence) -> str:
    parts = []
    if e.fig("deprecations") is not None:
        parts.append(plural(e.fig("deprecations"), "deprecation warning"))
    if e.fig("import_s") is not None:
        mib = e.fig("import_mib")
        parts.append(f"import {e.fig('import_s'):.1f} s" + (f" (+{mib:.0f} MiB)" if mib is not None else ""))
    if e.fig("dependencies") is not None:
        parts.append(plural(e.fig("dependencies"), "dependenc", "y", "ies"))
    if e.fig("breaking_per_year") is not None:
        releases = e.fig("releases_per_year")
        parts.append(f"{plural(e.fig('breaking_per_year'), 'breaking change')} a year"
                     + (f" over {plural(releases, 'release')}" if releases is not None else ""))
    if not parts:
        return f"To keep it: {e.status} ({shorten(e.cell.figure, 80)})."
    return ("Heavy to keep: " if e.status == FAIL else "To keep it: ") + ", ".join(parts) + "."


# The verdict's phrasings a probe may choose (`Dimension.words`); any other probe is said from what it declares
# (`declared`).
WORDS = {"step_for_step": step_for_step, "results_match": results_match, "capabilities": capabilities,
         "step_cost": step_cost, "drills": drills, "custom_code": custom_code, "upkeep": upkeep}


def declared(e: Evidence) -> str:
    """A probe's cell in the words its dimension declares: "<says>: <headline>." (its figure, else its status)."""
    said = e.headline or e.cell.figure or e.status
    return f"{dimension(e.dim).says}: {said.rstrip('.')}."


def sentence(e: Evidence) -> str:
    """The dimension in one sentence within its cap (`Dimension.cap`: the glance's paragraph stays short)."""
    return shorten(WORDS.get(dimension(e.dim).words, declared)(e), dimension(e.dim).cap)
