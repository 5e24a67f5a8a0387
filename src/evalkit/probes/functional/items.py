"""What each item of the functional probe is, and the readings of a job's stored records its checks share.

An item is pass, fail, or not claimed (a combination the adapter refused with `UnsupportedCombination` of kind
documented-unsupported, naming where the wrapper documents it: a capability it does not offer), with its reason in
one line and where its evidence is (job, run, stored file). A refusal of another kind fails its item. `logs` is
shown but not counted (NOT_COUNTED): it reads evalkit's own records, which no wrapper that trains can miss.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from evalkit import names
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.plan import CALIBER, PRECISIONS
from evalkit.probes.refusals import Refusal, refusal_of
from evalkit.text import one_line

PASS, FAIL, NOT_CLAIMED, NOT_COUNTED = "pass", "fail", "not claimed", "not counted"
# The artifacts an item's finding names as its source.
STEPS_FILE, VAL_FILE = names.STEPS_CSV, names.VAL_CSV
SUMMARY_FILE = f"{names.SPOOL_ARTIFACT_DIR}/{names.summary_file(0)}"
EFFECTIVE_FILE = f"{names.SPOOL_ARTIFACT_DIR}/{names.EFFECTIVE_CONFIG_FILE}"
CONFIG_FILE = f"{names.CONFIG_ARTIFACT_DIR}/{names.RESOLVED_CONFIG_FILE}"
FAILURE_SOURCE = f"tag {names.FAILURE_REASON}, {names.FAILURE_ARTIFACT_DIR}/{names.error_file('*')}"
# What each item asks of the wrapper, as a finding names it when it fails.
ABILITIES = {
    "trains_to_max_steps": "train to max_steps",
    "validates_at_cadence": "validate at the asked cadence",
    "checkpoints_at_cadence": "checkpoint at the asked cadence",
    "resumes": "load a checkpoint and continue",
    "logs": "log every step",
    "exports_final_metrics": "export the final validation metric",
    **{f"precisions.{p}": f"run {p}" for p in PRECISIONS},
    "world_size_2": "run at world size 2",
    "evalkit_process_group": "run under a process group evalkit created",
}
ITEMS = tuple(ABILITIES)


@dataclass
class Item:
    name: str                       # one of ITEMS
    status: str                     # PASS | FAIL | NOT_CLAIMED
    reason: str                     # why, in one line
    job: str = ""                   # the plan's name of the job that shows it
    run_id: str = ""
    source: str = ""                # the stored file (or tag) holding the evidence
    first_step: int | None = None
    expected: Any = None
    observed: Any = None
    workaround: str = ""            # what the adapter declares it does outside the wrapper's documented API
    refusal: Refusal | None = None  # the adapter's refusal, when the job was refused

    @property
    def family(self) -> str:
        return self.name.split(".")[0]


# ------------------------------------------------------------------ shared readings
def setting(job: JobEvidence, key: str) -> int:
    """A `train.<key>` setting of the job (the caliber's when its config does not say)."""
    value = job.config.get("train", {}).get(key)
    return int(CALIBER[f"train.{key}"] if value is None else value)


def step_numbers(job: JobEvidence) -> list[int]:
    return [int(r["step"]) for r in job.steps if isinstance(r.get("step"), (int, float))]


def ended(job: JobEvidence) -> str:
    return f"{job.name} ended {job.status}: {one_line(job.failure_reason, 300) or 'no reason recorded'}"


def refusal(job: JobEvidence) -> str | None:
    """The adapter's refusal message when the job was refused as an unsupported combination, else None."""
    found = refusal_of(job)
    return None if found is None else found.message


def step_problem(job: JobEvidence, first: int, last: int) -> tuple[str, int | None]:
    """What is wrong with the job's recorded step numbers against exactly first..last ("" when nothing). Windows the
    GradScaler skipped (fp16: inf/nan gradients, no optimizer step, no step number) count as taken, as the worker
    counts them: a job whose steps end `skipped` short of `last` ran all of its windows."""
    steps = step_numbers(job)
    if not steps:
        return "no optimizer step recorded", None
    repeated = sorted(s for s, n in Counter(steps).items() if n > 1)
    if repeated:
        return f"step(s) {list_text(repeated)} recorded more than once", repeated[0]
    if steps[0] != first:
        restart = " (started over instead of continuing)" if steps[0] == 1 and first > 1 else ""
        return f"first recorded step {steps[0]}, expected {first}{restart}", steps[0]
    last_taken = last_step_taken(job, last)
    missing = sorted(set(range(first, last_taken + 1)) - set(steps))
    if steps[-1] < last_taken:
        return f"stopped after step {steps[-1]} of {last}", steps[-1]
    if steps[-1] > last:
        return f"trained past max_steps: last step {steps[-1]}, asked {last}", last + 1
    if missing:
        return f"step(s) {list_text(missing)} not recorded", missing[0]
    return "", None


def last_step_taken(job: JobEvidence, last: int) -> int:
    """The step number the job's last window got: `last`, less the windows the GradScaler skipped (fp16: inf/nan
    gradients, no optimizer step and no step number) when the recorded steps end exactly that many short."""
    skipped = int(job.summary.get("skipped_steps") or 0)
    steps = step_numbers(job)
    return last - skipped if skipped and steps and steps[-1] + skipped == last else last


def final_metric(job: JobEvidence) -> tuple[str, float | None]:
    """(`val/<metric>`, its value at the job's last step; None when there is none)."""
    metric = job.tags.get(names.VAL_METRIC) or "loss"
    last = last_step_taken(job, setting(job, "max_steps"))
    values = [r.get(metric) for r in job.val if r.get("step") == last and r.get(metric) is not None]
    try:
        return f"val/{metric}", float(values[-1]) if values else None
    except (TypeError, ValueError):
        return f"val/{metric}", math.nan


def log_bytes(job: JobEvidence) -> int | None:
    """The wrapper's own output when the job last sampled it (`observe.memory_every`): its worker logs and the
    files it wrote in its run dir outside evalkit's directories."""
    values = [r.get("log_bytes") for r in job.memory if isinstance(r.get("log_bytes"), (int, float))]
    return int(values[-1]) if values else None


def list_text(steps) -> str:
    return ", ".join(str(s) for s in steps)


def make_item(name: str, job: JobEvidence, status: str, reason: str, source: str, **kw) -> Item:
    return Item(name, status, reason, job.name, job.run_id, source, **kw)


def not_shown(name: str, job_name: str, job: JobEvidence | None) -> Item | None:
    """The failed item when the job did not run or did not finish; None when it finished."""
    if job is None:
        return Item(name, FAIL, f"job {job_name} did not run", job_name)
    if job.status != "FINISHED":
        return make_item(name, job, FAIL, f"not shown: {ended(job)}", FAILURE_SOURCE)
    return None


def finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
