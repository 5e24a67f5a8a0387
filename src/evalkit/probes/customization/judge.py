"""The customization probe's judge: each customization verified from its job's records, its cost from its source.

Pass: both customizations took effect (a customization that does not is a fail whatever its cost), each adds at
most `max_lines` logical lines and together they touch the wrapper's private state at most `max_private` times
(`probe.customization.*`, recorded with the measurements, so a judgement can be repeated offline).
"""
from __future__ import annotations

from typing import Any

from evalkit.probes.customization.checks import Verification, check_callback, check_loss
from evalkit.probes.customization.plan import CALLBACK, CUSTOMIZATIONS, LOSS
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult


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
    findings = [f for c in checks.values() for f in c.findings] + _cost_findings(sources, limits)
    figures: dict[str, float] = {}
    for check in checks.values():
        figures.update(check.figures)
    private = 0
    for name, cost in sources.items():
        figures[f"{name}_lines"] = float(cost.get("lines_added", 0))
        figures[f"{name}_wrapper_symbols"] = float(len(cost.get("wrapper_symbols", [])))
        private += len(cost.get("private_touches", []))
    figures["private_touches"] = float(private)
    missing = [c for c in CUSTOMIZATIONS if c not in checks or c not in sources]
    result = ProbeResult("customization", passed=not findings and not missing, findings=findings,
                         figures=figures, notes=notes, headline=headline(sources, checks),
                         sections=[table(sources, checks)])
    if missing and not findings:
        result.inconclusive = True
        result.notes.insert(0, f"not verified or not measured: {', '.join(missing)} (see the notes, and "
                               "trainer.customizations)")
    return result


def _measured(name: str, cost: dict[str, Any], notes: list[str]) -> bool:
    """A source that could not be read or parsed has no cost: said in the notes, never counted as 0 lines."""
    if cost.get("notes") and not cost.get("lines_added"):
        notes.append(f"the {name} customization's cost was not measured: {'; '.join(cost['notes'])}")
        return False
    return True


def _cost_findings(sources: dict[str, Any], limits: dict[str, Any]) -> list[Finding]:
    out = []
    max_lines, max_private = int(limits.get("max_lines", 40)), int(limits.get("max_private", 0))
    for name, cost in sources.items():
        lines = int(cost.get("lines_added", 0))
        if lines > max_lines:
            out.append(Finding(f"{name}.lines", f"the {name} customization adds {lines} logical lines",
                               name, None, size=f"limit {max_lines} (probe.customization.max_lines)",
                               explainable=False))
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


def table(sources: dict[str, Any], checks: dict[str, Verification]) -> str:
    lines = ["| customization | verified | logical lines added | wrapper symbols used | hooks overridden | "
             "wrapper state set | private touches |", "|---|---|---|---|---|---|---|"]
    for name in CUSTOMIZATIONS:
        cost, check = sources.get(name, {}), checks.get(name)
        verified = "not run" if check is None else ("yes: " if check.verified else "NO: ") + check.detail
        hooks = ", ".join(f"{h.get('name')} ({h.get('base')})" if isinstance(h, dict) else str(h)
                          for h in cost.get("hooks_overridden", []))
        private = ", ".join(f"{t.get('kind')} {t.get('name')}" for t in cost.get("private_touches", [])) or "none"
        lines.append(f"| {name} | {_cell(verified)} | {cost.get('lines_added', '?')} | "
                     f"{_cell(', '.join(cost.get('wrapper_symbols', [])) or 'none')} | {_cell(hooks or 'none')} | "
                     f"{_cell(', '.join(map(str, cost.get('attributes_set', []))) or 'none')} | {_cell(private)} |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
