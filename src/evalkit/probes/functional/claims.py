"""The functional probe's items of what the adapter claims to run: each precision, world size 2, and a process
group evalkit created. A job the adapter refused with `UnsupportedCombination` of kind documented-unsupported (naming
a page of the wrapper's own documentation, `evalkit.probes.refusals`) is not claimed: the one exemption, and it leaves
the item count; the headline names each with its page. A refusal because
the wrapper would run something other than asked (silent-substitution: another precision, device or world size)
fails its item in both modes, as the substitution itself does in defaults mode; so does a refusal that does not say
its kind, and any other failure of such a job.
"""
from __future__ import annotations

import math

from evalkit import names
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.items import (
    CONFIG_FILE,
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
    setting,
    step_problem,
)
from evalkit.probes.functional.plan import PG, WS2
from evalkit.probes.refusals import DOCUMENTED, SUBSTITUTION, refusal_of


def precision(jobs: dict[str, JobEvidence], name: str) -> Item:
    return claimed(f"precisions.{name}", name, jobs.get(name))


def world_size_2(jobs: dict[str, JobEvidence]) -> Item:
    return claimed("world_size_2", WS2, jobs.get(WS2))


def evalkit_process_group(jobs: dict[str, JobEvidence]) -> Item:
    """Refusing evalkit's process group is not claiming it only where world size 2 is refused too: an adapter that
    runs DDP only in a process group of its own making fails this item."""
    ws2 = jobs.get(WS2)
    ws2_refused = refusal_of(ws2) if ws2 is not None else None
    item = claimed("evalkit_process_group", PG, jobs.get(PG),
                   may_refuse=ws2_refused is not None and ws2_refused.kind == DOCUMENTED)
    job = jobs.get(PG)
    if item.status == PASS and job.config.get("distributed", {}).get("init_by", "evalkit") != "evalkit":
        return make_item(item.name, job, FAIL, "the job did not run with distributed.init_by=evalkit",
                         CONFIG_FILE)
    return item


def claimed(name: str, job_name: str, job: JobEvidence | None, may_refuse: bool = True) -> Item:
    """The job ran to max_steps with a finite final metric, in the precision asked; refused as documented
    unsupported: not claimed; refused otherwise: failed."""
    if job is None:
        return Item(name, FAIL, f"job {job_name} did not run", job_name)
    refused = refusal_of(job)
    if refused is not None:
        if refused.kind == SUBSTITUTION:
            return make_item(name, job, FAIL, "refused by the adapter because the wrapper would run something other "
                             f"than asked (a silent substitution, not a documented limit): {refused.message}",
                             FAILURE_SOURCE, expected=job_name, observed=SUBSTITUTION)
        if refused.uncited:
            return make_item(name, job, FAIL, f"refused by the adapter as documented-unsupported, but {refused.uncited}"
                             ", so judged as an undocumented refusal (documented_at=<a page of the wrapper's docs, "
                             f"trainer.docs>): {refused.message}", FAILURE_SOURCE, expected=job_name,
                             observed="refused", refusal=refused)
        if refused.kind != DOCUMENTED:
            return make_item(name, job, FAIL, "refused by the adapter without naming where the wrapper documents it "
                             "as unsupported, so not exempt (raise UnsupportedCombination(..., kind=documented-"
                             f"unsupported, documented_at=<where>) when it is documented): {refused.message}",
                             FAILURE_SOURCE, expected=job_name, observed="refused", refusal=refused)
        if not may_refuse:
            return make_item(name, job, FAIL, f"refused by the adapter, though it runs world size 2: {refused.message}",
                             FAILURE_SOURCE, refusal=refused)
        return make_item(name, job, NOT_CLAIMED, f"refused by the adapter, documented as unsupported "
                         f"({refused.documented_at}): {refused.message}", FAILURE_SOURCE, refusal=refused)
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
