"""A job the adapter refused: `evalkit.contract.UnsupportedCombination`, read back from the job's failure reason.

Its message ends with its kind (`[refusal: <kind>, see <where>]`): documented-unsupported (the wrapper's documentation
says it does not support the combination: the one refusal a probe may leave out of its count, saying so) or
silent-substitution (it would run something else than asked); no kind said: no exemption either.

A documented-unsupported refusal is one only when `where` is a page of the wrapper's own documentation (the trainer's
`docs`, conf/trainer/<name>.yaml: `evalkit.trainers.docs_page`). Any other citation (none, not an http(s) URL, another
site, another wrapper's docs) makes it an undocumented refusal, judged as the wrapper's own: its kind reads "" and
`uncited` says why, for the cell ("citation not a page of <wrapper>'s docs: <where>"). Checked here, where the
judges read refusals, rather than raised in the adapter: a third party's adapter is judged, not crashed on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from evalkit import trainers
from evalkit.probes.evidence import JobEvidence
from evalkit.text import one_line

REFUSED = re.compile(r"\bUnsupportedCombination\b:?\s*")
DOCUMENTED, SUBSTITUTION = "documented-unsupported", "silent-substitution"
REFUSAL_KIND = re.compile(r"\s*\[refusal: (documented-unsupported|silent-substitution)(?:, see ([^\]]+))?\]")


@dataclass
class Refusal:
    message: str            # the adapter's words, without the kind's marker
    kind: str               # DOCUMENTED | SUBSTITUTION | "" (not said, or a citation that does not check)
    documented_at: str = ""
    uncited: str = ""       # why a refusal said documented-unsupported and is not ("" when it is, or did not say it)

    def cited(self) -> str:
        """'documented-unsupported: <page>', the words every cell gives a documented refusal."""
        return f"{DOCUMENTED}: {self.documented_at}"

    def undocumented(self) -> str:
        """Why it is no exemption, in a few words: its kind, or why its citation does not check."""
        return self.uncited or self.kind or "no kind said"


def citation_problem(trainer: dict[str, Any], where: str) -> str:
    """Why `where` is not a page of the trainer's wrapper's documentation ("" when it is)."""
    if trainers.docs_page(trainer, where):
        return ""
    problem = f"citation not a page of {trainer.get('name') or 'the wrapper'}'s docs: {where or '(none)'}"
    return problem if trainers.docs(trainer) else problem + " (its trainer config names none: trainer.docs)"


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
        return Refusal(one_line(text, 300) or "refused", "")
    message = one_line(text[:marker.start()] + text[marker.end():], 300) or "refused"
    kind, where = marker.group(1), (marker.group(2) or "").strip()
    problem = citation_problem(job.config.get("trainer") or {}, where) if kind == DOCUMENTED else ""
    return Refusal(message, "" if problem else kind, where, problem)


def not_judged(refusals: dict[str, Refusal]) -> str:
    """'ws2, kill ws2 (documented-unsupported: <page>)': what each documented refusal left unjudged, grouped by page."""
    by_page: dict[str, list[str]] = {}
    for what, refusal in refusals.items():
        by_page.setdefault(refusal.cited(), []).append(what)
    return "; ".join(f"{', '.join(whats)} ({cited})" for cited, whats in by_page.items())
