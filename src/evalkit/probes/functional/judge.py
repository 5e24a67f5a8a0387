"""The functional probe's judge: a pure function from the probe's job records to its result.

One item per capability (checks.py), each pass, fail or not claimed with its reason and evidence (job, run,
file); `logs` is shown, not counted (it reads evalkit's own records). A failed item is a finding; the probe passes
when no item failed. The checkpoint size on disk is a figure, not judged: the wrapper's last checkpoint against the
baseline's at the same settings in the same probe run.
"""
from __future__ import annotations

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult, markdown_cell
from evalkit.probes.functional.checks import check_all
from evalkit.probes.functional.items import ABILITIES, FAIL, NOT_CLAIMED, NOT_COUNTED, PASS, Item, log_bytes
from evalkit.probes.functional.listing import by_step, last_checkpoint_bytes, listing, step_bytes
from evalkit.probes.functional.plan import BASELINE, PLAIN, RESUME_AT, RESUME_SOURCE, first_phase
from evalkit.probes.refusals import not_judged

DIMENSION = "functional"
KNOWN_JOBS = (*first_phase(), "resume")


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    by_name = {job.name: job for job in jobs if job.name in KNOWN_JOBS}
    items = check_all(by_name)
    findings = [finding(item) for item in items if item.status == FAIL]
    figures = _figures(items, by_name)
    ignored = [job.name for job in jobs if job.name not in KNOWN_JOBS]
    return ProbeResult(
        dimension=DIMENSION, passed=not findings, findings=findings, figures=figures,
        headline=_headline(items, figures), notes=_notes(by_name) + (
            [f"jobs not of this probe, left out: {', '.join(ignored)}"] if ignored else []),
        sections=[items_section(items), checkpoints_section(by_name.get(PLAIN), by_name.get(BASELINE))])


def finding(item: Item) -> Finding:
    ability = ABILITIES[item.name]
    title = (f"reaches '{ability}' only through an undocumented workaround" if item.workaround
             else f"does not {ability}")
    return Finding(f"{DIMENSION}.{item.name}", title, item.job, item.first_step, expected=item.expected,
                   observed=item.observed, size=item.reason, declared=item.workaround,
                   evidence={"run_id": item.run_id, "file": item.source}, explainable=False)


def _figures(items: list[Item], jobs: dict[str, JobEvidence]) -> dict[str, float]:
    passed, failed = (sum(i.status == s for i in items) for s in (PASS, FAIL))
    out = {"items_passed": passed, "items_failed": failed, "items_total": passed + failed,
           "items_not_claimed": sum(i.status == NOT_CLAIMED for i in items),
           "items_not_counted": sum(i.status == NOT_COUNTED for i in items), "findings": failed}
    plain, baseline = jobs.get(PLAIN), jobs.get(BASELINE)
    ours, theirs = last_checkpoint_bytes(plain), last_checkpoint_bytes(baseline)
    steps = by_step(listing(plain) or [])
    values = {"checkpoint_bytes": ours, "baseline_checkpoint_bytes": theirs,
              "checkpoint_ratio": ours / theirs if ours is not None and theirs else None,
              "checkpoints_written": len(steps) if listing(plain) is not None else None,
              "log_bytes": log_bytes(plain) if plain is not None else None}
    out.update({k: v for k, v in values.items() if v is not None})
    return {k: float(v) for k, v in out.items()}


def _headline(items: list[Item], figures: dict[str, float]) -> str:
    """'7/7 items; not claimed: world_size_2 (documented-unsupported: <page>); checkpoint 1.00x the baseline's': the
    items a documented refusal left out, with its page, and those whose refusal cited no page of the wrapper's docs."""
    text = f"{int(figures['items_passed'])}/{int(figures['items_total'])} items"
    unclaimed = {i.name.split(".")[-1]: i.refusal for i in items if i.status == NOT_CLAIMED and i.refusal}
    if unclaimed:
        text += f"; not claimed: {not_judged(unclaimed)}"
    uncited: dict[str, list[str]] = {}
    for i in items:
        if i.status == FAIL and i.refusal is not None and i.refusal.uncited:
            uncited.setdefault(i.refusal.uncited, []).append(i.name.split(".")[-1])
    text += "".join(f"; {', '.join(names)}: {why}" for why, names in uncited.items())
    if "checkpoint_ratio" in figures:
        text += f"; checkpoint {figures['checkpoint_ratio']:.2f}x the baseline's"
    return text


def _notes(jobs: dict[str, JobEvidence]) -> list[str]:
    notes = [
        "logs: shown, not counted in the items: what it reads (each step's loss and LR, the run summary) is "
        "evalkit's own record from the outside (hooks on the loss and the optimizer), which no wrapper that trains "
        "can miss. The wrapper's own output (its console in the worker logs, files it writes in the run dir) is the "
        "log_bytes figure, not a requirement: aligned adapters switch the wrappers' own loggers off",
        f"resumes: the wrapper resumed from a copy of plain's checkpoints written after a step up to {RESUME_AT} "
        f"(<probe run dir>/{RESUME_SOURCE}/, with plain's job.json: evalkit compares the settings); it must train "
        "the remaining steps and only those. Equal losses to the uninterrupted run are reported, not required",
        "a job the adapter refused as an UnsupportedCombination of kind documented-unsupported (citing a page of the "
        "wrapper's own documentation: its trainer config's `docs`; any other citation is an undocumented refusal) is "
        "a capability it does not claim: not claimed, out of the count, named with its page (evalkit_process_group "
        "only where world size 2 is refused so too); refused as a silent-substitution (the wrapper would run another "
        "precision, device or world size than asked) or without a kind, its item fails, in both modes",
        "thresholds: none is absolute. The items are exact (steps, cadences, a finite final metric); the checkpoint "
        "size is a figure against the baseline's written at the same settings in this probe run, never judged",
        "workarounds: an item the adapter declares under `workarounds` in its effective config fails, naming it",
    ]
    unfinished: dict[str, list[str]] = {}
    for job in jobs.values():
        if job.status != "FINISHED":
            reason = " ".join(job.failure_reason.split())[:200] or job.status
            unfinished.setdefault(reason, []).append(job.name)
    notes += [f"job(s) {', '.join(names)} did not finish: {reason}" for reason, names in unfinished.items()]
    return notes


# ------------------------------------------------------------------ the report's tables
def items_section(items: list[Item]) -> str:
    lines = ["### Items", "", "| item | result | why | job | run | evidence |", "|---|---|---|---|---|---|"]
    for i in items:
        lines.append(f"| {i.name} | {i.status} | {markdown_cell(i.reason)} | {i.job} | {i.run_id[:12]} | "
                     f"{markdown_cell(i.source)} |")
    return "\n".join(lines)


def checkpoints_section(plain: JobEvidence | None, baseline: JobEvidence | None) -> str:
    ours, theirs = by_step(listing(plain) or []), by_step(listing(baseline) or [])
    lines = ["### Checkpoints on disk (wrapper: plain; reference: baseline, same settings)", "",
             "| after step | wrapper's entries | wrapper bytes | baseline bytes | ratio |", "|---|---|---|---|---|"]
    for step in sorted(set(ours) | set(theirs)):
        w = step_bytes(ours[step]) if step in ours else None
        b = step_bytes(theirs[step]) if step in theirs else None
        entries = ", ".join(e["name"] for e in ours.get(step, [])) or "-"
        ratio = f"{w / b:.2f}x" if w is not None and b else "-"
        lines.append(f"| {step} | {markdown_cell(entries)} | {_num(w)} | {_num(b)} | {ratio} |")
    if not ours and not theirs:
        lines.append("| - | no checkpoint listing | - | - | - |")
    return "\n".join(lines)


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"

