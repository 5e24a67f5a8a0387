"""A job the adapter refused: `evalkit.contract.UnsupportedCombination`, read back from the job's failure reason.

Its message ends with its kind (`[refusal: <kind>, see <where>]`): documented-unsupported (the wrapper's documentation
says it does not support the combination: the one refusal a probe may leave out of its count, saying so) or
silent-substitution (it would run something else than asked); no kind said: no exemption either.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.probes.evidence import JobEvidence

REFUSED = re.compile(r"\bUnsupportedCombination\b:?\s*")
DOCUMENTED, SUBSTITUTION = "documented-unsupported", "silent-substitution"
REFUSAL_KIND = re.compile(r"\s*\[refusal: (documented-unsupported|silent-substitution)(?:, see ([^\]]+))?\]")


@dataclass
class Refusal:
    message: str            # the adapter's words, without the kind's marker
    kind: str               # DOCUMENTED | SUBSTITUTION | "" (not said)
    documented_at: str = ""


def one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def refusal_of(job: JobEvidence) -> Refusal | None:
    """The adapter's refusal (its message and kind) when the job was refused as an unsupported combination."""
    if job.status == "FINISHED":
        return None
    found = REFUSED.search(job.failure_reason)
    if found is None:
        return None
    text = job.failure_reason[found.end():]
    marker = REFUSAL_KIND.search(text)
    if marker is None:
        return Refusal(one_line(text) or "refused", "")
    message = one_line(text[:marker.start()] + text[marker.end():]) or "refused"
    return Refusal(message, marker.group(1), (marker.group(2) or "").strip())
