"""The functional probe's items of what the adapter claims to run: each precision, world size 2, and a process
group evalkit created. A job the adapter refused with `UnsupportedCombination` is not claimed, never failed;
any other failure of such a job fails its item.
"""
from __future__ import annotations

import math

from evalkit import names
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.items import (
    FAIL,
    FAILURE_SOURCE,
    NOT_CLAIMED,
    PASS,
    STEPS_FILE,
    VAL_FILE,
    Item,
    ended,
    final_metric,
    make_item,
    refusal,
    setting,
    step_problem,
)
from evalkit.probes.functional.plan import PG, WS2


def precision(jobs: dict[str, JobEvidence], name: str) -> Item:
    return claimed(f"precisions.{name}", name, jobs.get(name))


def world_size_2(jobs: dict[str, JobEvidence]) -> Item:
    return claimed("world_size_2", WS2, jobs.get(WS2))


def evalkit_process_group(jobs: dict[str, JobEvidence]) -> Item:
    """Refusing evalkit's process group is not claiming it only where world size 2 is refused too: an adapter that
    runs DDP only in a process group of its own making fails this item."""
    ws2 = jobs.get(WS2)
    item = claimed("evalkit_process_group", PG, jobs.get(PG), may_refuse=ws2 is not None and refusal(ws2) is not None)
    job = jobs.get(PG)
    if item.status == PASS and job.config.get("distributed", {}).get("init_by", "evalkit") != "evalkit":
        return make_item(item.name, job, FAIL, "the job did not run with distributed.init_by=evalkit",
                         "config/resolved.yaml")
    return item


def claimed(name: str, job_name: str, job: JobEvidence | None, may_refuse: bool = True) -> Item:
    """The job ran to max_steps with a finite final metric, in the precision asked; refused: not claimed."""
    if job is None:
        return Item(name, FAIL, f"job {job_name} did not run", job_name)
    refused = refusal(job)
    if refused is not None:
        if may_refuse:
            return make_item(name, job, NOT_CLAIMED, f"refused by the adapter: {refused}", FAILURE_SOURCE)
        return make_item(name, job, FAIL, f"refused by the adapter, though it runs world size 2: {refused}",
                         FAILURE_SOURCE)
    if job.status != "FINISHED":
        return make_item(name, job, FAIL, ended(job), FAILURE_SOURCE)
    if job.tags.get(names.PRECISION_MISMATCH):
        return make_item(name, job, FAIL, f"ran another precision than asked: {job.tags[names.PRECISION_MISMATCH]}",
                         f"tag {names.PRECISION_MISMATCH}")
    last = setting(job, "max_steps")
    problem, first = step_problem(job, 1, last)
    if problem:
        return make_item(name, job, FAIL, problem, STEPS_FILE, first_step=first)
    metric, value = final_metric(job)
    if value is None or not math.isfinite(value):
        return make_item(name, job, FAIL, f"{metric} at the last step ({last}) is {value}", VAL_FILE, first_step=last)
    observed = job.tags.get(names.OBSERVED_PRECISION)
    seen = f", computing in {observed}" if observed else ""
    return make_item(name, job, PASS, f"trained steps 1..{last}{seen}; {metric} = {value:.6g} at the end",
                     f"{STEPS_FILE}, {VAL_FILE}")
