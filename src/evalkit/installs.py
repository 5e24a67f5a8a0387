"""The pip command that installs one of evalkit's extras, for the way this evalkit was installed.

An editable install from a checkout (`pip install -e .`) gets `pip install -e '<checkout>[extra]'`, which
works from any directory; anything else (a wheel) gets `pip install 'evalkit[extra]'`. The install kind
comes from the distribution's `direct_url.json` (PEP 610), which pip writes for every install that did
not come from an index.
"""
from __future__ import annotations

import json
import shlex
from importlib import metadata
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse
from urllib.request import url2pathname

DISTRIBUTION = "evalkit"


def install_command(extra: str) -> str:
    """The shell command that installs `extra`, quoted for copying into a shell."""
    checkout = editable_checkout()
    if checkout is not None:
        return f"pip install -e {shlex.quote(f'{checkout}[{extra}]')}"
    return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"


def editable_checkout() -> Path | None:
    """The checkout this evalkit is imported from, when it is an editable install of it; else None.

    A distribution counts only if the running package lives inside its source directory (a stale
    `evalkit.egg-info` in the working directory, or an editable install of another checkout, does not)."""
    package = Path(__file__).resolve().parent
    for text in _direct_urls():
        source = _editable_source(text)
        if source is not None and package.is_relative_to(source):
            return source
    return None


def _direct_urls() -> Iterator[str | None]:
    """The `direct_url.json` text of every installed evalkit distribution (None where there is none)."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        yield dist.read_text("direct_url.json")


def _editable_source(text: str | None) -> Path | None:
    try:
        info = json.loads(text) if text else {}
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    url = info.get("url", "")
    if not (info.get("dir_info") or {}).get("editable") or not url.startswith("file:"):
        return None
    return Path(url2pathname(urlparse(url).path)).resolve()
