"""The consistency probe's judge: a pure function from the probe's job records to its result.

Stage 1 (steps.py) compares the first seed's pair step by step; it is reported, never failed on: a wrapper that
reorders float operations legitimately drifts from the baseline's bits. Stage 2 (finals.py) decides: the final
validation metric over the seeds, paired with the baseline's. Stage 3 repeats both under each switch, one row per
switch; a switch the wrapper (or the baseline) refuses as documented-unsupported (`UnsupportedCombination` citing a
page of the wrapper's own documentation, evalkit.probes.refusals, and only that) is a "not run" row naming that page,
counted (`switches_not_judged`, `<switch>_not_judged`); a silent substitution refused is the wrapper's: a fail, and so
is a refusal of no kind or citing no page of the wrapper's docs (`consistency.refused.<switch>`).
Pass: stage 2 equivalent, no switch showing a deviation, no job crashed; fail: a systematic deviation (or a non-
finite training) at stage 2 or under a switch, or a wrapper job that crashed (any failure but a refusal: its reason
is the finding's); inconclusive otherwise (too few seeds, too much noise, a baseline job that crashed, a switch whose
jobs did not all run).
Thresholds, each calibrated: ALPHA (finals.py) is the verdict's level, the false-positive rate of the paired
equivalence test by construction (Holm over every comparison of the probe); the margin is the task's (its
`evalkit.val_metric_margin` tag, the guide's "pre-agreed range, set per task"), DEFAULT_MARGIN only for jobs
without one; CV_WARN only warns; stage 1's TOLERANCE (steps.py) is reported, never failed on.
"""
from __future__ import annotations

import math

from evalkit.analysis.compare import DEVIATION, EQUIVALENT, NONFINITE
from evalkit.probes.consistency.finals import ALPHA, CV_WARN, DEFAULT_MARGIN, FinalComparison, compare_finals
from evalkit.probes.consistency.plan import BASELINE, REFERENCE, WRAPPER, JobKey, parse_job_name
from evalkit.probes.consistency.steps import (
    IDENTICAL,
    TOLERANCE,
    UNCOMPARED,
    StepComparison,
    compare_steps,
    growth_text,
    sci,
)
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult, markdown_cell
from evalkit.probes.refusals import DOCUMENTED, SUBSTITUTION, Refusal, refusal_of

DIMENSION = "consistency"
FAILING = (DEVIATION, NONFINITE)


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    keyed = {key: job for job in jobs if (key := parse_job_name(job.name)) is not None}
    ignored = [job.name for job in jobs if parse_job_name(job.name) is None]
    switches = _switches(keyed)
    stepwise = {s: compare_steps(*_first_pair(keyed, s)) for s in switches}
    finals = {f.switch: f for f in compare_finals(keyed, switches)}
    reference, others = finals[REFERENCE], [finals[s] for s in switches[1:]]
    crashes = [f for s in switches if (f := _crash_finding(keyed, s)) is not None]
    findings = crashes + [_finding(f, stepwise[f.switch]) for f in finals.values() if f.outcome in FAILING]
    undecided = [u for s in switches if (u := _undecided_switch(keyed, s))]
    passed = not findings and reference.outcome == EQUIVALENT and not undecided
    first = None if passed or findings else (undecided[0] if reference.outcome == EQUIVALENT else _undecided(reference))
    notes = _notes(keyed, reference, others, stepwise, first)
    notes += [u for u in undecided if u != first]
    notes += [f"jobs not of this probe, left out: {', '.join(ignored)}"] if ignored else []
    return ProbeResult(
        dimension=DIMENSION, passed=passed, findings=findings, inconclusive=not passed and not findings,
        headline=_headline(stepwise[REFERENCE], reference, others, keyed),
        figures={**_figures(stepwise, finals), **_not_judged(keyed, switches)},
        notes=notes, series=_series(stepwise[REFERENCE]),
        sections=[_stage1_section(stepwise[REFERENCE]), _stage2_section(reference),
                  *([_stage3_section(others, stepwise, keyed)] if others else [])])


def _switches(keyed: dict[JobKey, JobEvidence]) -> list[str]:
    """The reference first, then each switch in the order its jobs ran."""
    out = [REFERENCE]
    for key in keyed:
        if key.switch not in out:
            out.append(key.switch)
    return out


def _first_pair(keyed: dict[JobKey, JobEvidence], switch: str) -> tuple[JobEvidence | None, JobEvidence | None]:
    seeds = [k.seed for k in keyed if k.switch == switch]
    if not seeds:
        return None, None
    first = min(seeds)
    return keyed.get(JobKey(switch, first, WRAPPER)), keyed.get(JobKey(switch, first, BASELINE))


def _own(keyed: dict[JobKey, JobEvidence], switch: str, arm: str) -> list[JobEvidence]:
    return [j for k, j in keyed.items() if k.switch == switch and k.arm == arm]


def _refused(job: JobEvidence) -> bool:
    """A refusal that exempts a switch: documented-unsupported (the wrapper's documentation says so, cited). A
    silent substitution (the wrapper would run something else than asked) or a refusal of no kind is no exemption:
    it is judged as the wrapper's, a finding."""
    found = refusal_of(job)
    return found is not None and found.kind == DOCUMENTED


def _refusal_kind(jobs: list[JobEvidence]) -> str | None:
    """The kind of refusal ('no kind said', or why its citation does not check) when every one of these jobs was
    refused; None otherwise."""
    found = [refusal_of(j) for j in jobs]
    if not found or any(r is None for r in found):
        return None
    return found[0].undocumented()


def _documented(keyed: dict[JobKey, JobEvidence], switch: str) -> Refusal | None:
    """The documented refusal that makes this switch a "not run" row (see `_cannot_run`), else None."""
    for arm in (WRAPPER, BASELINE):
        own = _own(keyed, switch, arm)
        if own and all(_refused(j) for j in own):
            return refusal_of(own[0])
    return None


def _crashed(keyed: dict[JobKey, JobEvidence], switch: str, arm: str) -> list[JobEvidence]:
    """The arm's jobs of this switch that ended otherwise than FINISHED without being refused."""
    return [j for j in _own(keyed, switch, arm) if j.status != "FINISHED" and not _refused(j)]


def _why(job: JobEvidence) -> str:
    return " ".join((job.failure_reason or f"it ended {job.status}").split())[:200]


def _cannot_run(keyed: dict[JobKey, JobEvidence], switch: str) -> str:
    """Why this switch is a "not run" row: every job of an arm refused it as an UnsupportedCombination ('' when
    not: a crash is no "not run", see `_crash_finding` and `_undecided_switch`)."""
    for arm in (WRAPPER, BASELINE):
        own = _own(keyed, switch, arm)
        if own and all(_refused(j) for j in own):
            return f"the {arm} refuses it: {_why(own[0])}"
    return ""


def _crash_finding(keyed: dict[JobKey, JobEvidence], switch: str) -> Finding | None:
    """A finding when a wrapper job of this switch crashed (any failure but a refusal), with the crash's reason."""
    crashed = _crashed(keyed, switch, WRAPPER)
    if not crashed or _cannot_run(keyed, switch):
        return None
    where = "" if switch == REFERENCE else f" under {switch}"
    seeds = ", ".join(str(parse_job_name(j.name).seed) for j in crashed)
    kind = _refusal_kind(crashed)
    if kind is not None:        # refused, but not as documented-unsupported: the wrapper's own finding
        code, title = ((f"consistency.substituted.{switch}", f"the wrapper would run something else than {switch} "
                        f"asks (refused: {kind})") if kind == SUBSTITUTION else
                       (f"consistency.refused.{switch}", f"the wrapper refuses {switch} without citing its "
                        f"documentation ({kind})"))
        return Finding(code, title, switch, None,
                       size=f"{len(crashed)} of {len(_own(keyed, switch, WRAPPER))} run(s): {_why(crashed[0])}",
                       evidence={"jobs": [j.name for j in crashed], "run_ids": [j.run_id for j in crashed]},
                       explainable=False)
    last = [int(j.steps[-1]["step"]) for j in crashed if j.steps and isinstance(j.steps[-1].get("step"), (int, float))]
    return Finding(f"consistency.crashed{'.' + switch if where else ''}",
                   f"the wrapper's training crashed{where} (seed(s) {seeds})", switch,
                   max(last) + 1 if last else None, size=f"{len(crashed)} of {len(_own(keyed, switch, WRAPPER))} "
                   f"run(s): {_why(crashed[0])}", evidence={"jobs": [j.name for j in crashed],
                                                            "run_ids": [j.run_id for j in crashed]},
                   explainable=False)


def _undecided_switch(keyed: dict[JobKey, JobEvidence], switch: str) -> str:
    """Why this switch leaves the probe undecided whatever the finals say: a baseline job crashed (evalkit's own
    loop: the comparison lacks its control; rerun once its cause is fixed), or an arm ran no job of it ('' when
    neither, or when the switch is a "not run" row)."""
    if _cannot_run(keyed, switch):
        return ""
    crashed = _crashed(keyed, switch, BASELINE)
    if crashed:
        return (f"{switch}: the baseline's job(s) {', '.join(j.name for j in crashed)} crashed ({_why(crashed[0])}): "
                "no comparison without the control; fix its cause and run the probe again")
    missing = [arm for arm in (WRAPPER, BASELINE) if not _own(keyed, switch, arm)]
    if missing:
        return f"{switch}: no {' or '.join(missing)} job ran: run the probe again to run them"
    return ""


def _row_state(keyed: dict[JobKey, JobEvidence], switch: str, outcome: str) -> str:
    documented = _documented(keyed, switch)
    if documented is not None:
        return f"not run ({documented.cited()})"
    crashed = _crashed(keyed, switch, WRAPPER)
    if crashed:
        kind = _refusal_kind(crashed)
        return f"refused ({kind})" if kind is not None else "crashed"
    if _crashed(keyed, switch, BASELINE):
        return "baseline crashed"
    return outcome


# ------------------------------------------------------------------ the verdict's words
def _headline(stage1: StepComparison, reference: FinalComparison, others: list[FinalComparison], keyed) -> str:
    parts = [stage1.short(), " ".join(p for p in (reference.delta_text(), reference.outcome) if p)]
    for f in others:
        parts.append(f"{f.switch}: {_row_state(keyed, f.switch, f.outcome)}")
    return "; ".join(parts)


def _finding(f: FinalComparison, stage1: StepComparison) -> Finding:
    c = f.comparison
    where = "" if f.switch == REFERENCE else f" under {f.switch}"
    if f.outcome == NONFINITE:
        seeds = ", ".join(str(n.run.seed) for n in c.nonfinite)
        return Finding(f"consistency.nonfinite{'.' + f.switch if where else ''}",
                       f"the wrapper's training went non-finite{where} (seed(s) {seeds})", f.switch,
                       min((n.step for n in c.nonfinite if n.step is not None), default=None),
                       size=f"{len(c.nonfinite)} of {len(f.wrapper) or c.n} run(s)")
    return Finding(f"consistency.final_metric{'.' + f.switch if where else ''}",
                   f"final {f.metric} systematically off the baseline's{where}", f.switch,
                   stage1.first_step, expected=_mean(f.baseline), observed=_mean(f.wrapper),
                   size=f"{f.delta_text()} beyond {f.margin_text()} ({c.design_text()}); step by step: {stage1.text()}",
                   evidence={"wrapper": f.wrapper, "baseline": f.baseline})


def _notes(keyed, reference: FinalComparison, others: list[FinalComparison], stepwise: dict[str, StepComparison],
           first: str | None) -> list[str]:
    """The notes; `first` (why the probe is inconclusive) leads them when given."""
    notes = [first] if first else []
    seeds = sorted({k.seed for k in keyed if k.switch == REFERENCE})
    notes.append(f"stage 1: seed {seeds[0] if seeds else '-'}, fp32, one process, step by step (loss, LR, gradient "
                 f"norm, parameters): {stepwise[REFERENCE].text()}; a divergence alone is no failure (float "
                 "reordering is legitimate)")
    tested = sum(f.comparison is not None and f.outcome != NONFINITE for f in [reference, *others])
    notes.append(f"stage 2: final {reference.metric} over {len(seeds)} seed(s) per arm, each paired with the "
                 f"baseline's same seed, at alpha {ALPHA} (Holm over the {tested} tested comparison(s))")
    for f in [reference, *others]:
        warning = f.noise_warning()
        if warning:
            notes.append(warning)
        c = f.comparison
        if (f.switch != REFERENCE and c is not None and c.seeds_needed and f.outcome not in FAILING
                and f.outcome != EQUIVALENT):
            notes.append(f"{f.switch}: {c.seeds_needed} seeds per arm would likely decide it")
        if f.problem:
            notes.append(f"{f.switch}: {f.problem}")
    unfinished: dict[str, list[str]] = {}
    for job in keyed.values():
        if job.status != "FINISHED":
            unfinished.setdefault(" ".join(job.failure_reason.split())[:200] or job.status, []).append(job.name)
    notes += [f"job(s) {', '.join(jobs)} did not finish ({reason}): left out" for reason, jobs in unfinished.items()]
    notes.append('a switch is "not run" only where every job of an arm was refused as documented-unsupported (the '
                 "wrapper's documentation cited); a refusal of another kind (a silent substitution) and a wrapper job "
                 "that crashed fail the probe with their reason, a baseline job that crashed leaves it undecided")
    notes.append(f"thresholds: alpha {ALPHA} is the false-positive rate of each paired equivalence test by its "
                 f"construction (Holm over the probe's comparisons); the margin {reference.margin_text() or '-'} is "
                 f"the task's own (its metric-margin tag, set per task before any run; {DEFAULT_MARGIN:g} relative "
                 f"only for jobs without one); the {100 * CV_WARN:.0f}% paired-spread warning and stage 1's "
                 f"{TOLERANCE:g} divergence mark are reported, never decide")
    return notes


def _undecided(reference: FinalComparison) -> str:
    """The first note of an inconclusive result: why stage 2 could not decide."""
    if reference.problem and reference.comparison is None:
        return f"stage 2 could not compare: {reference.problem}"
    c = reference.comparison
    spread = f", paired spread {100 * reference.paired_sd:.2f}%" if reference.paired_sd is not None else ""
    more = f"; about {c.seeds_needed} seeds per arm would decide" if c and c.seeds_needed else ""
    return (f"stage 2 inconclusive: {reference.delta_text() or 'no estimate'} against "
            f"{reference.margin_text() or 'the margin'} over {c.n if c else 0} seed pair(s){spread}{more}")


def _figures(stepwise: dict[str, StepComparison], finals: dict[str, FinalComparison]) -> dict[str, float]:
    out: dict[str, float] = {}
    for switch, stage1 in stepwise.items():
        prefix = "" if switch == REFERENCE else f"{switch}_"
        f = finals[switch]
        values: dict[str, float | None] = {}
        if stage1.status != UNCOMPARED:
            values.update({"identical": float(stage1.status == IDENTICAL), "steps_compared": stage1.steps,
                           "first_diverging_step": stage1.first_step, "max_rel_gap": stage1.max_gap})
        if f.comparison is not None:
            values.update({"equivalent": float(f.outcome == EQUIVALENT), "deviation": float(f.outcome in FAILING)})
        if f.comparison is not None and f.comparison.outcome != NONFINITE:
            c = f.comparison
            values.update({"final_delta": c.delta, "final_delta_low": c.delta_low, "final_delta_high": c.delta_high,
                           "seeds": c.n})
        values.update({"paired_sd": f.paired_sd, "raw_sd": f.raw_sd})
        out.update({prefix + k: float(v) for k, v in values.items() if v is not None and math.isfinite(float(v))})
    return out


def _not_judged(keyed: dict[JobKey, JobEvidence], switches: list[str]) -> dict[str, float]:
    """The switches a documented refusal left unjudged: how many, and each by name (`ws2_not_judged`)."""
    unjudged = [s for s in switches[1:] if _documented(keyed, s) is not None]
    return {"switches_not_judged": float(len(unjudged)), **{f"{s}_not_judged": 1.0 for s in unjudged}}


def _series(stage1: StepComparison) -> dict[str, dict[str, list]]:
    return {f"gap/{s.series}": {"step": s.steps, "gap": s.gaps} for s in stage1.series}


# ------------------------------------------------------------------ the report's tables
def _stage1_section(stage1: StepComparison) -> str:
    lines = [f"### Stage 1: step by step, fp32, one process ({stage1.text()})", "",
             "| series | steps | first step > 1e-6 | max rel. gap | gap there | +10 steps | +100 steps | last step "
             "| growth |", "|---|---|---|---|---|---|---|---|---|"]
    for s in stage1.series:
        first = s.first_step
        later = s.later
        lines.append(f"| {s.series} | {len(s.steps)} | {'-' if first is None else first} | {sci(s.max_gap)} | "
                     f"{sci(s.gap_at(first)) if first is not None else '-'} | {sci(later.get(10))} | "
                     f"{sci(later.get(100))} | {sci(s.gaps[-1] if s.gaps else None)} | {growth_text(s.growth)} |")
    lines += [f"- {n}" for n in stage1.notes]
    return "\n".join(lines)


def _stage2_section(f: FinalComparison) -> str:
    c = f.comparison
    design = c.design_text() if c is not None else "no test"
    lines = [f"### Stage 2: final {f.metric}, seed by seed ({design})", "",
             "| seed | wrapper | baseline | wrapper vs baseline |", "|---|---|---|---|"]
    for seed in sorted(set(f.wrapper) | set(f.baseline)):
        w, b = f.wrapper.get(seed), f.baseline.get(seed)
        lines.append(f"| {seed} | {_value(w)} | {_value(b)} | {_difference(w, b, f.relative)} |")
    level = f" at {100 * c.level:.1f}%" if c is not None and math.isfinite(c.level) else ""
    verdict = f"**{f.outcome}**: {f.delta_text() or 'no estimate'}{level} against {f.margin_text() or '-'}"
    if f.paired_sd is not None:
        verdict += (f"; spread across seeds: paired difference {100 * f.paired_sd:.3f}%, the baseline's own values "
                    f"{100 * f.raw_sd:.1f}% (a seed draws its own data: pairing removes that)")
    return "\n".join([*lines, "", verdict])


def _stage3_section(others: list[FinalComparison], stepwise: dict[str, StepComparison], keyed) -> str:
    lines = ["### Stage 3: one switch at a time (wrapper and baseline both under it)", "",
             "| switch | step by step (first seed) | final, paired | outcome | note |", "|---|---|---|---|---|"]
    for f in others:
        blocked = _cannot_run(keyed, f.switch)
        if blocked:
            lines.append(f"| {f.switch} | - | - | not run | {markdown_cell(blocked)} |")
            continue
        crashed = _crashed(keyed, f.switch, WRAPPER) or _crashed(keyed, f.switch, BASELINE)
        if crashed:
            who = "the wrapper" if _crashed(keyed, f.switch, WRAPPER) else "the baseline"
            lines.append(f"| {f.switch} | - | - | {_row_state(keyed, f.switch, f.outcome)} | "
                         f"{markdown_cell(f'{who} crashed: {_why(crashed[0])}')} |")
            continue
        note = "; ".join(x for x in (f.problem, f.noise_warning() and "paired spread large") if x)
        lines.append(f"| {f.switch} | {markdown_cell(stepwise[f.switch].text())} | {f.delta_text() or '-'} "
                     f"{f.margin_text()} | {f.outcome} | {markdown_cell(note)} |")
    return "\n".join(lines)


def _mean(values: dict[int, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def _value(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _difference(w: float | None, b: float | None, relative: bool) -> str:
    if w is None or b is None or not (math.isfinite(w) and math.isfinite(b)):
        return "-"
    if relative and b != 0:
        return f"{100 * (w / b - 1):+.4f}%"
    return f"{w - b:+.4g}"

