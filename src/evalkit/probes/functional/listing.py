"""The checkpoints a job wrote, as rank 0's summary lists them (`checkpoints`: name, after_step, bytes; the
`full` observe profile lists the job's checkpoint directory at every optimizer step end).

A checkpoint is what one step left in the directory: every entry first seen after that step (a file and its
checksum beside it, or a directory). Entries removed before the job ended (a wrapper rotating its checkpoints)
are not listed: a checkpoint not kept shows as missing.
"""
from __future__ import annotations

from typing import Any

from evalkit.probes.evidence import JobEvidence


def listing(job: JobEvidence | None) -> list[dict[str, Any]] | None:
    """The job's checkpoint entries in the order written; None when its summary holds no listing."""
    if job is None:
        return None
    entries = job.summary.get("checkpoints")
    return list(entries) if isinstance(entries, list) else None


def by_step(entries: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """step -> the entries written after it, steps in order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        out.setdefault(int(entry["after_step"]), []).append(entry)
    return dict(sorted(out.items()))


def step_bytes(entries: list[dict[str, Any]]) -> int:
    return sum(int(e.get("bytes") or 0) for e in entries)


def last_checkpoint_bytes(job: JobEvidence | None) -> int | None:
    """Bytes on disk of the job's last checkpoint (every entry written after its last checkpointed step)."""
    steps = by_step(listing(job) or [])
    return step_bytes(steps[max(steps)]) if steps else None


def resume_entries(job: JobEvidence | None, at_most: int) -> list[dict[str, Any]]:
    """The entries a resume from step `at_most` copies: every entry written after a step up to it."""
    return [e for e in listing(job) or [] if int(e["after_step"]) <= at_most]


def resume_step(job: JobEvidence | None, at_most: int) -> int | None:
    """The step a resume from those entries continues after (their latest step); None without any."""
    steps = [int(e["after_step"]) for e in resume_entries(job, at_most)]
    return max(steps) if steps else None


def cadence(max_steps: int, every: int) -> list[int]:
    """The steps a cadence asks for: every `every` steps (0: none) and the last step (TrainJob.should_*)."""
    return [s for s in range(1, max_steps + 1) if s == max_steps or (every > 0 and s % every == 0)]
