"""The stability probe's items other than resumes: damaged checkpoints offered to a resume, an error at step k."""
from __future__ import annotations

from evalkit.probes.evidence import JobEvidence

OOM_MARKERS = ("out of memory", "outofmemoryerror")
LOSS_MARKERS = ("error in the loss function",)


def refused_damaged(job: JobEvidence, kind: str) -> tuple[bool, str]:
    """A resume offered a damaged checkpoint passes when it fails loudly (non-zero exit, an error said)."""
    if job.status != "FINISHED":
        reason = job.failure_reason or f"ended {job.status}"
        return True, f"refused it: {reason}"
    if not job.steps:
        return False, f"exited 0 without training: the {kind} checkpoint was accepted without a word"
    first, last = int(job.steps[0]["step"]), int(job.steps[-1]["step"])
    if first == 1:
        return False, f"started again from step 1 without a word (the {kind} checkpoint was ignored)"
    return False, f"loaded the {kind} checkpoint and trained steps {first}..{last} on it"


def error_at_step(job: JobEvidence, step: int, markers: tuple[str, ...], what: str) -> tuple[bool, str]:
    """An error raised at step k: the run must end non-zero, the error visible, the records up to k - 1 kept."""
    numbers = [int(s["step"]) for s in job.steps]
    last = numbers[-1] if numbers else 0
    if job.status == "FINISHED":
        past = f", trained on to step {last}" if last >= step else ""
        return False, f"exited 0 after the {what} at step {step} (swallowed{past})"
    if last >= step:
        return False, f"trained on past the {what} at step {step} (to step {last}) before failing: retried silently"
    problems = []
    reason = job.failure_reason
    if not any(m in reason.lower() for m in markers):
        problems.append(f"the {what} is not in the failure reason ({reason or 'none'})")
    if last != step - 1:
        problems.append(f"records kept up to step {last}, not {step - 1}")
    if problems:
        return False, "; ".join(problems)
    return True, f"ended {job.status} with the error shown ({reason[:120]}), steps 1..{last} kept"
