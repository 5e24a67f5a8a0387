"""The functional probe's checks of what every training run must do: the plain job's items (training to
max_steps, the validation and checkpoint cadences, the final metric; logs, shown but not counted) and the resume;
`check_all` adds the claimed combinations (claims.py) and the declared workarounds (workarounds.py). Each check is a
pure function of the jobs' stored records.
"""
from __future__ import annotations

import math
from collections import Counter

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.claims import evalkit_process_group, precision, world_size_2
from evalkit.probes.functional.items import (
    FAIL,
    FAILURE_SOURCE,
    NOT_COUNTED,
    PASS,
    STEPS_FILE,
    SUMMARY_FILE,
    VAL_FILE,
    Item,
    ended,
    final_metric,
    finite,
    list_text,
    log_bytes,
    make_item,
    not_shown,
    setting,
    step_numbers,
    step_problem,
)
from evalkit.probes.functional.listing import by_step, cadence, listing, resume_step, step_bytes
from evalkit.probes.functional.plan import PLAIN, PRECISIONS, RESUME, RESUME_AT
from evalkit.probes.functional.workarounds import apply_workarounds, declared_workarounds


def check_all(jobs: dict[str, JobEvidence]) -> list[Item]:
    items = [trains_to_max_steps(jobs), validates_at_cadence(jobs), checkpoints_at_cadence(jobs), resumes(jobs),
             logs(jobs), exports_final_metrics(jobs), *[precision(jobs, p) for p in PRECISIONS],
             world_size_2(jobs), evalkit_process_group(jobs)]
    return apply_workarounds(items, declared_workarounds(jobs))


# ------------------------------------------------------------------ the plain job's items
def trains_to_max_steps(jobs: dict[str, JobEvidence]) -> Item:
    name, job = "trains_to_max_steps", jobs.get(PLAIN)
    if job is None or job.status != "FINISHED":
        return not_shown(name, PLAIN, job)
    last = setting(job, "max_steps")
    problem, first = step_problem(job, 1, last)
    if problem:
        return make_item(name, job, FAIL, problem, STEPS_FILE, first_step=first, expected=last,
                         observed=max(step_numbers(job), default=None))
    return make_item(name, job, PASS, f"trained optimizer steps 1..{last}, each once", STEPS_FILE)


def validates_at_cadence(jobs: dict[str, JobEvidence]) -> Item:
    name, job = "validates_at_cadence", jobs.get(PLAIN)
    shown = not_shown(name, PLAIN, job)
    if shown:
        return shown
    every = setting(job, "val_every")
    expected = cadence(setting(job, "max_steps"), every)
    seen = Counter(int(r["step"]) for r in job.val if isinstance(r.get("step"), (int, float)))
    missing = [s for s in expected if not seen[s]]
    extra = sorted(s for s in seen if s not in expected)
    twice = sorted(s for s in expected if seen[s] > 1)
    parts = ([f"no validation after step(s) {list_text(missing)}"] if missing else []) + \
            ([f"validation after step(s) {list_text(extra)} not asked"] if extra else []) + \
            [f"validated {seen[s]}x after step {s}" for s in twice]
    observed = sorted(seen.elements())
    if parts:
        return make_item(name, job, FAIL, "; ".join(parts), VAL_FILE, first_step=min(missing + extra + twice),
                         expected=expected, observed=observed)
    return make_item(name, job, PASS, f"validated after steps {list_text(expected)} (val_every={every} and the last "
                     "step), no other", VAL_FILE)


def checkpoints_at_cadence(jobs: dict[str, JobEvidence]) -> Item:
    name, job = "checkpoints_at_cadence", jobs.get(PLAIN)
    shown = not_shown(name, PLAIN, job)
    if shown:
        return shown
    entries = listing(job)
    if entries is None:
        return make_item(name, job, FAIL, "no checkpoint listing in the job's summary (observe.profile=full records "
                         "it)", SUMMARY_FILE)
    every = setting(job, "ckpt_every")
    expected = cadence(setting(job, "max_steps"), every)
    steps = by_step(entries)
    missing = [s for s in expected if s not in steps]
    extra = {s: [e["name"] for e in found] for s, found in steps.items() if s not in expected}
    parts = [f"extra checkpoint after step {s} ({', '.join(found)})" for s, found in extra.items()]
    if missing:
        parts.append(f"no checkpoint kept from after step(s) {list_text(missing)} (none written, or not kept to the "
                     "end)")
    observed = {s: [e["name"] for e in found] for s, found in steps.items()}
    if parts:
        return make_item(name, job, FAIL, "; ".join(parts), SUMMARY_FILE, first_step=min([*missing, *extra]),
                         expected=expected, observed=observed)
    last = steps[expected[-1]]
    return make_item(name, job, PASS, f"one checkpoint after each of steps {list_text(expected)} (ckpt_every={every} "
                     f"and the last step), no other; the last: {', '.join(e['name'] for e in last)}, "
                     f"{step_bytes(last)} bytes", SUMMARY_FILE, observed=observed)


LOGS_NOT_COUNTED = ("evalkit's own records (hooks on the loss and the optimizer), not the wrapper's: not counted, no "
                    "wrapper that trains can fail it")


def logs(jobs: dict[str, JobEvidence]) -> Item:
    """What evalkit recorded of each step from the outside: shown, never counted (NOT_COUNTED). A wrapper that trains
    cannot fail it (evalkit's hooks record the loss and LR whatever the wrapper logs), and the wrapper's own logging
    is no requirement (aligned adapters switch the wrappers' loggers off): its size is the log_bytes figure."""
    name, job = "logs", jobs.get(PLAIN)
    if job is None:
        return Item(name, NOT_COUNTED, f"{LOGS_NOT_COUNTED}; job {PLAIN} did not run", PLAIN)
    if job.status != "FINISHED":
        return make_item(name, job, NOT_COUNTED, f"{LOGS_NOT_COUNTED}; {ended(job)}", FAILURE_SOURCE)
    no_loss = [r["step"] for r in job.steps if not finite(r.get("loss"))]
    no_lr = [r["step"] for r in job.steps if r.get("lr") in (None, "")]
    parts = ([] if job.steps else ["no per-step records in the store"]) + \
            ([] if job.summary else ["no run summary in the store"]) + \
            ([f"no finite loss at step(s) {list_text(no_loss)}"] if no_loss else []) + \
            ([f"no LR at step(s) {list_text(no_lr)}"] if no_lr else [])
    own = log_bytes(job)
    wrapper = f"; the wrapper's own output: {own} bytes" if own is not None else ""
    found = "; ".join(parts) or f"loss and LR of each of the {len(job.steps)} steps, and the run summary, in the store"
    return make_item(name, job, NOT_COUNTED, f"{LOGS_NOT_COUNTED}; {found}{wrapper}", f"{STEPS_FILE}, {SUMMARY_FILE}")


def exports_final_metrics(jobs: dict[str, JobEvidence]) -> Item:
    name, job = "exports_final_metrics", jobs.get(PLAIN)
    shown = not_shown(name, PLAIN, job)
    if shown:
        return shown
    metric, value = final_metric(job)
    last = setting(job, "max_steps")
    if value is None:
        return make_item(name, job, FAIL, f"no {metric} at the last step ({last})", VAL_FILE, first_step=last)
    if not math.isfinite(value):
        return make_item(name, job, FAIL, f"{metric} at the last step ({last}) is {value}", VAL_FILE, first_step=last,
                         observed=value)
    return make_item(name, job, PASS, f"{metric} = {value:.6g} at the last step ({last})", VAL_FILE, observed=value)


# ------------------------------------------------------------------ resume
def resumes(jobs: dict[str, JobEvidence]) -> Item:
    name, plain, job = "resumes", jobs.get(PLAIN), jobs.get(RESUME)
    start = resume_step(plain, RESUME_AT)
    if job is None:
        why = (f"job {RESUME} did not run" if start is not None else
               f"{PLAIN} kept no checkpoint written after a step up to {RESUME_AT} to resume from")
        if plain is not None and plain.status != "FINISHED" and start is None:
            why += f" ({ended(plain)})"
        return Item(name, FAIL, why, RESUME)
    shown = not_shown(name, RESUME, job)
    if shown:
        return shown
    start = 0 if start is None else start
    last = setting(job, "max_steps")
    problem, first = step_problem(job, start + 1, last)
    if problem:
        return make_item(name, job, FAIL, f"resumed from the checkpoint after step {start}: {problem}", STEPS_FILE,
                         first_step=first, expected=[start + 1, last], observed=step_numbers(job))
    return make_item(name, job, PASS, f"resumed from the checkpoint after step {start}: trained steps "
                     f"{start + 1}..{last}, each once; {continuity(plain, job)}", STEPS_FILE)


def continuity(plain: JobEvidence | None, resumed: JobEvidence) -> str:
    """How the resumed losses compare with the uninterrupted run's at the same steps (information, never failed:
    bit-for-bit continuation is the semantics probes' to judge)."""
    full = {int(r["step"]): r.get("loss") for r in (plain.steps if plain else [])}
    pairs = [(r.get("loss"), full.get(int(r["step"]))) for r in resumed.steps]
    pairs = [(a, b) for a, b in pairs if finite(a) and finite(b)]
    if not pairs:
        return "no loss to compare with the uninterrupted run's"
    gap = max(abs(float(a) - float(b)) / max(abs(float(b)), 1e-12) for a, b in pairs)
    if gap == 0:
        return "its losses equal the uninterrupted run's, bit for bit"
    return f"its losses differ from the uninterrupted run's by up to {100 * gap:.3g}% (relative)"
