"""Relative links in markdown that point nowhere: a file that does not exist, or a `#heading` that is not there.

A link is `[text](target)` or `![alt](target)` outside code (fenced blocks and inline code are skipped); a target
with a scheme (`https:`, `mailto:`) is not followed. The `#part` must be the GitHub anchor of a heading of the
target (lower case, punctuation dropped, spaces as hyphens; a repeated heading gets `-1`, `-2`, ...).
"""
from __future__ import annotations

import re
from pathlib import Path

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"(`+)[^`].*?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text without code: fenced blocks and inline code spans become blank (line numbers kept)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return INLINE_CODE.sub(lambda m: " " * len(m.group(0)), text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: `The semantic probe (`probe=semantics`)` -> the-semantic-probe-probesemantics."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def targets(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link outside code."""
    prose = _prose(text)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(prose)]


def broken_links(path: Path, root: Path, pending: dict[str, str] | None = None) -> list[str]:
    """'<file>:<line>: <target>: <why>' for each relative link of `path` that points nowhere. `pending` names files
    (relative to `root`) that are referenced before they exist, each with who makes it: those are not broken."""
    text, problems = path.read_text(encoding="utf-8"), []
    for line, target in targets(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path.resolve()
        where = f"{path.relative_to(root)}:{line}: {target}"
        if not dest.exists():
            name = dest.relative_to(root.resolve()).as_posix() if dest.is_relative_to(root.resolve()) else str(dest)
            if name not in (pending or {}):
                problems.append(f"{where}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{where}: no heading #{anchor} there")
    return problems
