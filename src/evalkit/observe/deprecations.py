"""Recording the deprecation warnings a run raises, and who raised them.

While a DeprecationRecorder is active, DeprecationWarning, PendingDeprecationWarning and FutureWarning (and their
subclasses, e.g. Lightning's own) are always shown, to the recorder: each occurrence is counted under its
category, message (first 300 characters) and raising module, the module whose code called `warnings.warn` (found
by walking the stack past the `warnings` module's frames; its `__name__`, else its file mapped through sys.path).
The file and line the warning was attributed to (`stacklevel`) are kept per group too. Recorded warnings are not
shown elsewhere. Every other warning goes to the previous `showwarning` unchanged, without a stack walk.
Distributions (via `importlib.metadata.packages_distributions`) are looked up only when the summary is made.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import sys
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field

RECORDED = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
MESSAGE_CHARS = 300
_WARNINGS_FILES = {os.path.normcase(os.path.abspath(warnings.__file__))}
_THIS_FILE = os.path.normcase(os.path.abspath(__file__))


@dataclass
class RecordedWarning:
    category: str
    message: str
    module: str | None                 # the module that called warnings.warn
    distribution: str | None           # the module's top-level distribution (None: none found, e.g. the stdlib)
    count: int
    attributed_to: list[str] = field(default_factory=list)   # "file:line" the warning names, most frequent first
    attributed_distribution: str | None = None                  # the distribution of the first of those

    def as_dict(self) -> dict:
        return asdict(self)


class DeprecationRecorder:
    """`with DeprecationRecorder() as rec: ...` then `rec.summary()`."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str | None], Counter] = {}
        self._catcher: warnings.catch_warnings | None = None
        self._previous = None
        self._distributions: dict[str, list[str]] | None = None

    def __enter__(self) -> DeprecationRecorder:
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        for category in RECORDED:
            warnings.simplefilter("always", category)
        self._previous = warnings.showwarning
        warnings.showwarning = self._show
        return self

    def __exit__(self, *exc) -> None:
        catcher, self._catcher = self._catcher, None
        catcher.__exit__(*exc)          # restores the filters and showwarning

    @property
    def total(self) -> int:
        return sum(sum(c.values()) for c in self._groups.values())

    def summary(self) -> list[RecordedWarning]:
        """Distinct warnings (category, message, raising module) with their counts, most frequent first."""
        out = []
        for (category, message, module), places in self._groups.items():
            ranked = [place for place, _ in places.most_common()]
            first_file = ranked[0].rsplit(":", 1)[0] if ranked else None
            out.append(RecordedWarning(
                category, message, module, self._distribution(module), sum(places.values()), ranked,
                self._distribution(module_for_file(first_file)) if first_file else None))
        return sorted(out, key=lambda w: (-w.count, w.category, w.message))

    def _show(self, message, category, filename, lineno, file=None, line=None) -> None:
        if not (isinstance(category, type) and issubclass(category, RECORDED)):
            self._forward(message, category, filename, lineno, file, line)
            return
        key = (category.__name__, str(message)[:MESSAGE_CHARS], _raising_module(sys._getframe(1)))
        self._groups.setdefault(key, Counter())[f"{filename}:{lineno}"] += 1

    def _forward(self, message, category, filename, lineno, file, line) -> None:
        # The untouched warnings.showwarning hands on to warnings._showwarnmsg_impl, which
        # catch_warnings(record=True) (pytest among others) replaces: recording contexts keep working.
        self._previous(message, category, filename, lineno, file, line)

    def _distribution(self, module: str | None) -> str | None:
        if not module:
            return None
        if self._distributions is None:
            self._distributions = md.packages_distributions()
        names = self._distributions.get(module.split(".")[0])
        return names[0] if names else None


def _raising_module(frame) -> str | None:
    """The first frame above the warnings machinery (and this recorder): the code that called warnings.warn."""
    while frame is not None:
        filename = os.path.normcase(os.path.abspath(frame.f_code.co_filename))
        if filename not in _WARNINGS_FILES and filename != _THIS_FILE:
            name = frame.f_globals.get("__name__")
            if name and name != "__main__":
                return name
            return module_for_file(frame.f_code.co_filename) or name
        frame = frame.f_back
    return None


def module_for_file(filename: str) -> str | None:
    """The dotted module name of `filename` under the longest sys.path entry that holds it; None outside."""
    path = os.path.abspath(filename)
    best = None
    for entry in sys.path:
        root = os.path.abspath(entry or os.curdir)
        if path.startswith(root + os.sep) and (best is None or len(root) > len(best)):
            best = root
    if best is None:
        return None
    stem, ext = os.path.splitext(os.path.relpath(path, best))
    if ext not in (".py", ".pyc", ".pyw", ".so", ".pyd"):
        return None
    parts = stem.split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts:
        parts[-1] = parts[-1].split(".")[0]     # extension modules: name.cpython-311-x86_64-linux-gnu.so
    return ".".join(parts) or None
