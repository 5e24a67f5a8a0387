"""A third party's adapter that fails as Hydra imports it is named in one line with the fix (issue 48): its own
module's error with the line it was raised at, or a class its module does not have with the nearest name; never
Hydra's "caused by AttributeError"."""
from __future__ import annotations

import pytest
from hydra.utils import get_class

from evalkit.worker.run import _import_failure


def _failure(target: str) -> str | None:
    with pytest.raises(Exception) as caught:
        get_class(target)
    return _import_failure(target, caught.value)


def test_an_error_in_the_adapters_module_is_named_with_its_line(tmp_path, monkeypatch):
    (tmp_path / "theirs_broken.py").write_text("import os\n\nPATH = os.no_such_function()\n\nclass Adapter: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _failure("theirs_broken.Adapter")
    assert found == (f"trainer._target_=theirs_broken.Adapter: its module raised AttributeError: module 'os' has no "
                     f"attribute 'no_such_function' ({tmp_path / 'theirs_broken.py'}, line 3) as it was imported: "
                     "fix that line of the module")


def test_a_class_the_module_lacks_is_named_with_the_nearest(tmp_path, monkeypatch):
    (tmp_path / "theirs_fine.py").write_text("class MyAdapter:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _failure("theirs_fine.MyAdaptr") == ("trainer._target_=theirs_fine.MyAdaptr: module theirs_fine has no "
                                                "MyAdaptr: did you mean trainer._target_=theirs_fine.MyAdapter?")


def test_a_module_that_is_not_found_is_left_to_the_error_line():
    assert _failure("no_such_module_anywhere.Adapter") is None
