"""The stability probe's judge: one item per fault, each pass / fail / not exercised, with its evidence.

Every pass rests on evidence: an item whose evidence cannot decide is not exercised, with what is
missing and how to get it, and the headline counts both ("7/8 items, 2 not exercised: ..."). A drill the wrapper
refused as documented-unsupported (a page of its own docs cited: evalkit.probes.refusals) is not claimed, named with
its page ("; not judged: kill ws2 (documented-unsupported: <page>)") and counted; refused otherwise, it fails, saying
why (a citation that is no page of the wrapper's docs is an undocumented refusal). A failed item that a
plain torch.save/torch.load loop fails alike (a checkpoint with flipped bytes: torch checks no checksum) says so in
its outcome, its finding (`shared_with_torch`) and the headline, so the column still tells wrappers apart."""
from __future__ import annotations

from dataclasses import dataclass

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult
from evalkit.probes.refusals import DOCUMENTED, Refusal, not_judged, refusal_of
from evalkit.probes.stability import plan as P
from evalkit.probes.stability.items import (
    FAIL,
    LOSS_MARKERS,
    NOT_CLAIMED,
    NOT_EXERCISED,
    OOM_MARKERS,
    PASS,
    SHARED_WITH_TORCH,
    error_at_step,
    refused_damaged,
)
from evalkit.probes.stability.longrun import judge_long_run
from evalkit.probes.stability.resume import BIT_FOR_BIT, compare

RESUME_ITEMS = {   # item -> (kill job, resume job, title)
    "kill_between": ("kill-between", "resume-between", "SIGKILL between two checkpoints, then resume"),
    "kill_after_checkpoint": ("kill-after-ckpt", "resume-after-ckpt", "SIGKILL right after a checkpoint, then resume"),
    "kill_during_write": ("kill-in-save", "resume-in-save", "SIGKILL during a checkpoint's write, then resume"),
    "kill_ws2": ("kill-ws2", "resume-ws2", "SIGKILL at world size 2, then resume"),
}
CORRUPT_TITLES = {"truncated": "resume offered a truncated checkpoint",
                  "flipped": "resume offered a checkpoint with flipped bytes",
                  "other-model": "resume offered another model's checkpoint"}


@dataclass
class Item:
    name: str
    title: str
    status: str
    outcome: str
    jobs: list[JobEvidence]
    first_step: int | None = None
    causes: tuple[str, ...] = ()
    shared_with_torch: bool = False     # a plain torch.save/torch.load loop fails it alike
    refusal: Refusal | None = None      # the wrapper refused the drill's job

    def seen_in(self) -> str:
        """The job the item's outcome was seen in: a resume item's resume, else its first job (the others are
        its controls: the reference, the intact copy's resume, the baseline's long run)."""
        return self.jobs[1].name if self.name in RESUME_ITEMS and len(self.jobs) > 1 else self.jobs[0].name

    def evidence(self) -> str:
        return ", ".join(f"{j.name} ({j.run_id[:8]})" for j in self.jobs)


def expected_resume_point(killed: JobEvidence) -> int:
    """The latest checkpoint complete when the job was killed (from its faults and cadence)."""
    faults, every = killed.config.get("faults", {}), int(killed.config.get("train", {}).get("ckpt_every", 0))
    if not every:
        return 0
    if faults.get("kill_in_save_after_step"):
        return (int(faults["kill_in_save_after_step"]) // every) * every   # the one being written is lost
    return (int(faults.get("kill_after_step", 0)) // every) * every


def fault_fired(killed: JobEvidence) -> bool:
    return killed.status != "FINISHED" and "SIGKILL" in killed.failure_reason


def resume_item(name: str, jobs: dict[str, JobEvidence]) -> Item | None:
    kill, resume, title = RESUME_ITEMS[name]
    if kill not in jobs:
        return None
    killed = jobs[kill]
    refused = refusal_of(killed)
    if refused is not None and refused.kind == DOCUMENTED:
        return Item(name, title, NOT_CLAIMED, f"refused as documented-unsupported ({refused.documented_at}): "
                    f"{refused.message}", [killed], refusal=refused)
    if refused is not None:
        return Item(name, title, FAIL, f"refused ({refused.undocumented()}), judged as an undocumented refusal: "
                    f"{refused.message}", [killed], refusal=refused)
    if not fault_fired(killed):
        how = ("its checkpoints are not written through torch.save" if name == "kill_during_write"
               else "the job was not killed")
        return Item(name, title, NOT_EXERCISED, f"{how} ({killed.status}: {killed.failure_reason or 'no error'})",
                    [killed])
    if resume not in jobs:
        return Item(name, title, FAIL, "the resume did not run", [killed])
    reference = jobs[P.REFERENCE_OF[resume]]
    outcome = compare(reference, jobs[resume], expected_resume_point(killed), int(P.STEPS), killed)
    status = PASS if outcome.ok else FAIL if outcome.causes else NOT_EXERCISED
    return Item(name, title, status, outcome.text(), [killed, jobs[resume], reference],
                outcome.diverged_at, tuple(outcome.causes))


def judge(evidence: list[JobEvidence], leak_limit: float = P.LEAK_FLOOR, log_limit: float = P.LOG_FLOOR) -> ProbeResult:
    """`leak_limit`, `log_limit`: the long run's floors over the baseline's slope (longrun.py)."""
    jobs = {j.name: j for j in evidence}
    items: list[Item] = []
    notes: list[str] = []
    figures: dict[str, float] = {}
    for reference in sorted(set(P.REFERENCE_OF.values())):
        if reference in jobs and jobs[reference].status != "FINISHED":
            notes.append(f"the uninterrupted reference run {reference} failed ({jobs[reference].failure_reason}): "
                         "the resumes have nothing to be compared with")
    for name, (_, resume, _) in RESUME_ITEMS.items():
        # each drill against its own reference (kill_ws2 against reference-ws2, picked alone by probe.only)
        item = resume_item(name, jobs) if P.REFERENCE_OF[resume] in jobs else None
        if item is not None:
            items.append(item)
    intact = jobs.get(P.INTACT)
    for kind, title in CORRUPT_TITLES.items():
        job = jobs.get(P.corrupt_name(kind))
        if job is not None:
            status, text = refused_damaged(job, kind, intact)
            items.append(Item(f"corrupt_{kind.replace('-', '_')}", title, status, text,
                              [job] + ([intact] if intact is not None else []),
                              shared_with_torch=status == FAIL and kind in SHARED_WITH_TORCH))
    for job_name, item, markers, what in (("oom", "out_of_memory", OOM_MARKERS, "out-of-memory error"),
                                          ("loss-error", "loss_error", LOSS_MARKERS, "error in the loss function")):
        if job_name in jobs:
            ok, text = error_at_step(jobs[job_name], P.FAULT_STEP, markers, what)
            title = f"{what} raised at step {P.FAULT_STEP}"
            items.append(Item(item, title, PASS if ok else FAIL, text, [jobs[job_name]]))
    if "long-run" in jobs:
        baseline = jobs.get(P.LONG_BASELINE)
        run = judge_long_run(jobs["long-run"], baseline, leak_limit, log_limit)
        base = f" (the baseline's {run.baseline_memory.text()})" if run.baseline_memory else ""
        text = "; ".join(run.problems or run.undecided) or (
            f"{run.steps_taken} steps recorded; memory {run.memory.text() if run.memory else 'not sampled'}{base}; "
            f"logs {run.logs.text() if run.logs else 'not sampled'}")
        items.append(Item("long_run", f"long run of {run.steps_asked} steps", run.status, text,
                          [jobs["long-run"]] + ([baseline] if baseline is not None else [])))
        if run.memory is not None:
            figures.update(leak_kib_per_1k_steps=run.memory.per_1k, leak_low=run.memory.low,
                           leak_high=run.memory.high)
        if run.baseline_memory is not None:
            figures.update(baseline_leak_kib_per_1k_steps=run.baseline_memory.per_1k,
                           baseline_leak_low=run.baseline_memory.low, baseline_leak_high=run.baseline_memory.high)
        if run.logs is not None:
            figures["log_kib_per_1k_steps"] = run.logs.per_1k
    unsafe = sorted({f for j in evidence for f in j.summary.get("unsafe_loads", [])})
    loads = sum(len(j.summary.get("checkpoint_loads", [])) for j in evidence)
    if loads:
        notes.append(f"checkpoint loads seen in the resumes: {loads}; with weights_only=False (arbitrary code "
                     f"unpickled): {', '.join(unsafe) if unsafe else 'none'}")
        figures["unsafe_loads"] = float(len(unsafe))
    failed = [i for i in items if i.status == FAIL]
    judged = [i for i in items if i.status not in (NOT_EXERCISED, NOT_CLAIMED)]
    unexercised = [i for i in items if i.status == NOT_EXERCISED]
    unclaimed = [i for i in items if i.status == NOT_CLAIMED]
    # drills with no job in this run (the preset planned no long run, no world size 2; probe.only picked others)
    not_run = [name for name in P.ITEM_JOBS if name not in {i.name for i in items}]
    figures.update(items_passed=float(len(judged) - len(failed)), items_total=float(len(judged)),
                   items_not_exercised=float(len(unexercised)), items_not_run=float(len(not_run)),
                   items_not_claimed=float(len(unclaimed)),
                   **{f"{i.name.rpartition('_')[2]}_not_judged": 1.0 for i in unclaimed if i.name.endswith("_ws2")},
                   items_shared_with_torch=float(sum(1 for i in failed if i.shared_with_torch)),
                   resumes_bit_for_bit=float(sum(1 for i in items if i.outcome.startswith(BIT_FOR_BIT))))
    findings = [Finding(f"stability.{i.name}", i.title, i.seen_in(), i.first_step, size=i.outcome,
                        evidence={"causes": list(i.causes), "shared_with_torch": i.shared_with_torch,
                                  "runs": {j.name: j.run_id for j in i.jobs}},
                        explainable=False) for i in failed]
    headline = f"{len(judged) - len(failed)}/{len(judged)} items"
    if unexercised:
        headline += f", {len(unexercised)} not exercised"
    if failed:
        shown = [i.name.replace("_", " ") + (" (shared with plain torch)" if i.shared_with_torch else "")
                 + (f" ({i.refusal.uncited})" if i.refusal is not None and i.refusal.uncited else "") for i in failed]
        headline += ": " + ", ".join(shown[:4]) + (" …" if len(shown) > 4 else "")
    if unclaimed:
        headline += "; not judged: " + not_judged({i.name.replace("_", " "): i.refusal for i in unclaimed})
    if not_run:
        named = [n.replace("_", " ") for n in not_run]
        headline += (f"; not run: {len(not_run)} drill{'s' if len(not_run) > 1 else ''} ("
                     + ", ".join(named[:3]) + (", …" if len(named) > 3 else "") + ")")
    notes += [f"{i.name}: not exercised, {i.outcome}" for i in unexercised]
    notes += [f"{i.name}: not claimed, {i.outcome}" for i in unclaimed]
    if not_run:
        notes.append("not run (no job of theirs in this probe run): " + ", ".join(not_run))
    return ProbeResult("stability", passed=bool(judged) and not failed, findings=findings, figures=figures,
                       notes=notes, headline=headline, inconclusive=not judged, sections=[table(items)])


def table(items: list[Item]) -> str:
    rows = ["| item | status | outcome | evidence |", "|---|---|---|---|"]
    rows += [f"| {i.title} | {i.status} | {_short(i.outcome)} | {i.evidence()} |" for i in items]
    return "\n".join(rows)


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(text.replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
