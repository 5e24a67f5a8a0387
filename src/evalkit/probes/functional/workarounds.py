"""Workarounds an adapter declares: `workarounds: {item: "what it does outside the wrapper's documented API"}` in
its effective config. An item reached only through one fails, naming it; a key may name an item or its family
(`precisions` covers each precision). The baseline job's report is not the wrapper's and never counts.
"""
from __future__ import annotations

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.functional.items import EFFECTIVE_FILE, FAIL, Item
from evalkit.probes.functional.plan import BASELINE
from evalkit.text import one_line


def declared_workarounds(jobs: dict[str, JobEvidence]) -> dict[str, tuple[str, str]]:
    """item (or item family) -> (what the adapter does outside its wrapper's documented API, the job declaring it),
    from the `workarounds` of the wrapper's effective configs (the baseline's job is not the wrapper's)."""
    out: dict[str, tuple[str, str]] = {}
    for job in jobs.values():
        declared = job.effective.get("workarounds") if job.name != BASELINE else None
        if isinstance(declared, dict):
            for item, text in declared.items():
                out.setdefault(str(item), (one_line(text, 300), job.name))
    return out


def apply_workarounds(items: list[Item], declared: dict[str, tuple[str, str]]) -> list[Item]:
    """An item the adapter reaches only through a workaround fails, naming it."""
    for item in items:
        found = declared.get(item.name) or declared.get(item.family)
        if found is None:
            continue
        item.workaround = found[0]
        if item.status == FAIL:
            item.reason += f"; the adapter also declares a workaround for it: {found[0]}"
        else:
            item.status = FAIL
            item.reason = f"reached only through an undocumented workaround: {found[0]} (was: {item.reason})"
            item.source = f"{EFFECTIVE_FILE} workarounds (job {found[1]})"
    return items
