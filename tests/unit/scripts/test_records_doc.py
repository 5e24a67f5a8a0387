"""scripts/records_doc.py: docs/records.md from names.py, each name with its value and the comment that describes it."""
from __future__ import annotations

import sys
import types

from helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from records_doc import entries, render, undescribed  # noqa: E402

SOURCE = '''"""Names for a test.

More words."""
# --- tags ---------------------------------------------------------------
# the role of a run
ROLE = "evalkit.role"
MODE, TASK = "evalkit.mode", "evalkit.task"   # its mode and task
BARE = "evalkit.bare"
# --- files --------------------------------------------------------------
PATH = f"{ROLE}/x"   # a derived path
KINDS = {"a": "b"}   # a mapping


def per_rank(rank: int) -> str:
    """One rank's file: `file_rank<r>.csv`."""
    return f"file_rank{rank}.csv"
'''


def module(source: str = SOURCE) -> types.ModuleType:
    found = types.ModuleType("names_under_test")
    exec(source, found.__dict__)     # noqa: S102 - the test's own source
    return found


def test_each_name_is_shown_with_its_value_and_the_comment_above_or_beside_it():
    sections = dict(entries(SOURCE, module()))
    assert list(sections) == ["tags", "files"]
    role, pair, bare = sections["tags"]
    assert (role.names, role.values, role.comment) == (["ROLE"], ["evalkit.role"], "the role of a run")
    assert (pair.names, pair.values, pair.comment) == (["MODE", "TASK"], ["evalkit.mode", "evalkit.task"],
                                                       "its mode and task")
    assert bare.comment == ""
    path, kinds, function = sections["files"]
    assert path.values == ["evalkit.role/x"]                     # as it evaluates
    assert kinds.values == ["a → b"]
    assert (function.names, function.values) == (["per_rank(rank)"], ["file_rank<r>.csv"])


def test_a_name_without_a_comment_is_named():
    assert undescribed(SOURCE, module()) == ["BARE"]


def test_the_document_changes_with_its_source():
    before = render(SOURCE, module())
    assert "| `evalkit.mode`, `evalkit.task` | `MODE`, `TASK` | its mode and task |" in before
    assert "## Tags" in before and "## Files" in before and "Names for a test." in before
    changed = SOURCE.replace("# its mode and task", "# the mode and the task")
    assert render(changed, module(changed)) != before


def test_names_py_itself_reads():
    from evalkit import names

    sections = dict(entries((REPO / "src/evalkit/names.py").read_text(), names))
    shown = {n for found in sections.values() for e in found for n in e.names}
    assert {"ROLE", "TRAIN_LOSS", "PRECISION_DTYPES", "probe_pass(dimension)"} <= shown
