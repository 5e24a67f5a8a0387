"""Text made to fit one line: a tag, a console line, a table cell, a sentence of the report's first screen. Imports
nothing of evalkit's, so every side (controller, probes, verdict) uses the same two."""
from __future__ import annotations


def one_line(text: object, limit: int = 500) -> str:
    """`text` on one line: every line of it kept, whitespace collapsed, cut at `limit` characters."""
    return " ".join(str(text).split())[:limit]


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at a word before `limit` characters, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + "…"
