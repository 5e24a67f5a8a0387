"""The customization probe's judge: each customization verified from its job's records, its cost from its source.

Pass: both customizations took effect (a customization that does not is a fail whatever its cost), each adds at
most `max_line_ratio` times the logical lines the baseline's own customization of the same kind adds (the
hand-written loop is the control, measured by the same counter in the same probe run: `measured["control"]`), and
together they touch the wrapper's private state at most `max_private` times (`probe.customization.*`, recorded with
the measurements, so a judgement can be repeated offline). A customization whose control was not measured cannot
pass on its lines: inconclusive, saying so.
"""
from __future__ import annotations

from typing import Any

from evalkit.probes.customization.checks import Verification, check_callback, check_loss
from evalkit.probes.customization.plan import CALLBACK, CUSTOMIZATIONS, LOSS
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult, markdown_cell

# How each threshold is calibrated, one line each (shown in the result's notes).
CALIBRATION = {
    "max_line_ratio": "relative to the control measured in this probe run: a customization's logical lines over the "
                      "baseline's own lines for the same customization (the hand-written loop, same counter); the "
                      "factor is a team's policy fixed without the wrappers' counts (a wrapper may at most double "
                      "what writing it by hand costs), not fitted to them",
    "max_private": "the guide's fail condition (a customization that must bypass the wrapper's internal state), a "
                   "count read from the source, exact (no noise)",
}


def judge(jobs: list[JobEvidence], measured: dict[str, Any]) -> ProbeResult:
    limits = measured.get("limits", {})
    by_name = {j.name: j for j in jobs}
    notes = list(measured.get("notes", []))
    checks: dict[str, Verification] = {}
    if LOSS in by_name:
        checks[LOSS] = check_loss(by_name[LOSS], float(limits.get("l1_weight", 0.5)))
    if CALLBACK in by_name:
        checks[CALLBACK] = check_callback(by_name[CALLBACK], int(limits.get("stop_at_step", 10)))
    sources = {name: cost for name, cost in measured.get("sources", {}).items() if _measured(name, cost, notes)}
    control_given = measured.get("control") or {}
    control_notes: list[str] = list(control_given.get("notes", []))
    control = {name: cost for name, cost in control_given.get("sources", {}).items()
               if _measured(name, cost, control_notes, "baseline's ")}
    findings = [f for c in checks.values() for f in c.findings] + _cost_findings(sources, control, limits)
    figures: dict[str, float] = {}
    for check in checks.values():
        figures.update(check.figures)
    private = 0
    for name, cost in sources.items():
        figures[f"{name}_lines"] = float(cost.get("lines_added", 0))
        figures[f"{name}_wrapper_symbols"] = float(len(cost.get("wrapper_symbols", [])))
        private += len(cost.get("private_touches", []))
        if name in control:
            figures[f"{name}_baseline_lines"] = float(control[name]["lines_added"])
            figures[f"{name}_line_ratio"] = cost.get("lines_added", 0) / control[name]["lines_added"]
    figures["private_touches"] = float(private)
    missing = [c for c in CUSTOMIZATIONS if c not in checks or c not in sources]
    no_control = [c for c in CUSTOMIZATIONS if c in sources and c not in control]
    notes += control_notes
    notes += [f"threshold {k} = {limits[k]}: {line}" for k, line in CALIBRATION.items() if k in limits]
    result = ProbeResult("customization", passed=not findings and not missing and not no_control, findings=findings,
                         figures=figures, notes=notes, headline=headline(sources, checks),
                         sections=[table(sources, checks, control)])
    if (missing or no_control) and not findings:
        result.inconclusive = True
        why = ([f"not verified or not measured: {', '.join(missing)} (see the notes, and trainer.customizations)"]
               if missing else []) + \
              ([f"no control for the lines of {', '.join(no_control)}: the baseline's own customization of the same "
                "kind was not measured in this run (conf/trainer/baseline.yaml customizations; see the notes)"]
               if no_control else [])
        result.notes.insert(0, "; ".join(why))
    return result


def _measured(name: str, cost: dict[str, Any], notes: list[str], whose: str = "") -> bool:
    """A source that could not be read or parsed has no cost: said in the notes, never counted as 0 lines."""
    if not cost.get("lines_added") and (cost.get("notes") or whose):     # a control of 0 lines divides nothing
        why = "; ".join(cost.get("notes") or []) or "no logical line counted"
        notes.append(f"the {whose}{name} customization's cost was not measured: {why}")
        return False
    return True


def _cost_findings(sources: dict[str, Any], control: dict[str, Any], limits: dict[str, Any]) -> list[Finding]:
    out = []
    max_ratio, max_private = float(limits.get("max_line_ratio", 2.0)), int(limits.get("max_private", 0))
    for name, cost in sources.items():
        lines = int(cost.get("lines_added", 0))
        if name not in control:
            continue
        reference = int(control[name]["lines_added"])
        if lines > max_ratio * reference:
            out.append(Finding(f"{name}.lines", f"the {name} customization adds {lines} logical lines, "
                               f"{lines / reference:.2f}x the baseline's {reference} for the same customization",
                               name, None, expected=max_ratio * reference, observed=lines,
                               size=f"limit {max_ratio:g}x the baseline's lines, measured in this run "
                                    "(probe.customization.max_line_ratio)", explainable=False))
    touches = [(name, t) for name, cost in sources.items() for t in cost.get("private_touches", [])]
    if len(touches) > max_private:
        what = "; ".join(f"{name}: {t.get('kind')} {t.get('name')} (line {t.get('line')})" for name, t in touches[:4])
        out.append(Finding("private", f"the customizations touch the wrapper's private state {len(touches)} times",
                           touches[0][0], None, size=f"{what}; limit {max_private} (probe.customization.max_private)",
                           explainable=False))
    return out


def headline(sources: dict[str, Any], checks: dict[str, Verification]) -> str:
    """'loss 3 lines, callback 6 lines, 0 private': the verdict cell's figure (a failed check named first)."""
    parts = []
    for name in CUSTOMIZATIONS:
        cost, check = sources.get(name), checks.get(name)
        text = f"{name} {cost['lines_added']} lines" if cost else f"{name} ?"
        if check is not None and not check.verified:
            text += " NOT in effect" if check.findings and check.findings[0].code != f"{name}.run_failed" \
                else " run failed"
        parts.append(text)
    private = sum(len(c.get("private_touches", [])) for c in sources.values())
    return ", ".join(parts) + f", {private} private"


def table(sources: dict[str, Any], checks: dict[str, Verification], control: dict[str, Any] | None = None) -> str:
    control = control or {}
    lines = ["| customization | verified | logical lines added | the baseline's (ratio) | wrapper symbols used | "
             "hooks overridden | wrapper state set | private touches |", "|---|---|---|---|---|---|---|---|"]
    for name in CUSTOMIZATIONS:
        cost, check = sources.get(name, {}), checks.get(name)
        verified = "not run" if check is None else ("yes: " if check.verified else "NO: ") + check.detail
        hooks = ", ".join(f"{h.get('name')} ({h.get('base')})" if isinstance(h, dict) else str(h)
                          for h in cost.get("hooks_overridden", []))
        private = ", ".join(f"{t.get('kind')} {t.get('name')}" for t in cost.get("private_touches", [])) or "none"
        reference = control.get(name, {}).get("lines_added")
        ratio = f"{reference} ({cost['lines_added'] / reference:.2f}x)" if reference and cost.get("lines_added") \
            else (reference or "not measured")
        symbols = ", ".join(cost.get("wrapper_symbols", [])) or "none"
        attributes = ", ".join(map(str, cost.get("attributes_set", []))) or "none"
        cells = [markdown_cell(c) for c in (verified, symbols, hooks or "none", attributes, private)]
        lines.append(f"| {name} | {cells[0]} | {cost.get('lines_added', '?')} | {ratio} | {cells[1]} | {cells[2]} | "
                     f"{cells[3]} | {cells[4]} |")
    return "\n".join(lines)

