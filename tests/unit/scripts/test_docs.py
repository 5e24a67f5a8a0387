"""The documents stay true (scripts/docs.py): every generated document is the rendering of its source, the README
stays an introduction (at most 150 lines, CI's command among its first lines), and no relative link in README.md or
docs/ points at nothing. Each check is also shown failing on a planted copy, so none passes vacuously."""
from __future__ import annotations

import shutil
import sys

import pytest
from helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from docs import (  # noqa: E402
    PENDING,
    README_MAX_LINES,
    block,
    generated,
    package_map_problems,
    problems,
    readme_problems,
    snapshots,
)

FIX = "run `python scripts/docs.py write`"


def test_every_generated_document_is_the_rendering_of_its_source():
    stale = [str(p.relative_to(REPO)) for p, text in generated().items() if not p.exists() or p.read_text() != text]
    assert stale == [], f"generated documents out of date with their sources: {FIX}"


def test_the_documents_have_no_problem():
    assert problems() == []


def test_files_shown_before_they_exist_are_still_missing():
    assert [p for p in PENDING if (REPO / p).exists()] == [], "it exists now: take it out of PENDING"


@pytest.fixture
def checkout(tmp_path):
    """A copy of what the documents are generated from and checked against."""
    for part in ("README.md", "pyproject.toml", "constraints.txt", ".ci", "docs", "src/evalkit"):
        source, dest = REPO / part, tmp_path / part
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, dest)
    return tmp_path


def test_a_stale_document_is_named_for_each_source(checkout):
    names = checkout / "src/evalkit/names.py"
    names.write_text(names.read_text() + 'PLANTED = "planted"   # a name added without regenerating\n')
    snapshot = snapshots(checkout)[-1][0]           # the newest, which the README quotes: taken later still
    snapshot.write_text(snapshot.read_text().replace('"taken": "2', '"taken": "3', 1))
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[[tool.importlinter.contracts]]\nname = "planted"\n'
                         'type = "forbidden"\nsource_modules = ["evalkit.tasks"]\nforbidden_modules = ["mlflow"]\n')
    found = problems(checkout)
    for stale in ("docs/records.md", f"docs/results/{snapshot.stem}.md", "README.md", "docs/architecture.md"):
        assert f"{stale} is stale: {FIX}" in found
    assert not [p for p in found if "stale" not in p]


def test_a_name_without_a_comment_a_long_readme_and_a_broken_link_are_named(checkout):
    names = checkout / "src/evalkit/names.py"
    names.write_text(names.read_text() + 'UNSAID = "x"\n')
    readme = checkout / "README.md"
    readme.write_text(readme.read_text() + "\n" * README_MAX_LINES + "[gone](docs/gone.md)\n")
    found = problems(checkout)
    assert "src/evalkit/names.py: UNSAID has no comment (its description in docs/records.md)" in found
    assert any(p.startswith("README.md has ") and "at most 150" in p for p in found)
    assert any(p.startswith("README.md:") and p.endswith("docs/gone.md: no such file") for p in found)


def test_the_package_map_lists_every_module_of_the_top_and_of_the_mapped_packages_and_no_other(checkout):
    assert package_map_problems(REPO) == []
    (checkout / "src/evalkit/controller/job/planted.py").write_text("")
    architecture = checkout / "docs/architecture.md"
    architecture.write_text(architecture.read_text().replace("\n  caliber.py ", "\n  calibre.py ", 1))
    assert package_map_problems(checkout) == [
        "docs/architecture.md: its package map does not list src/evalkit/caliber.py",
        "docs/architecture.md: its package map does not list src/evalkit/controller/job/planted.py",
        "docs/architecture.md: its package map lists src/evalkit/calibre.py, which does not exist"]


def test_the_readme_opens_with_the_two_set_up_commands_the_second_being_cis():
    ci = (REPO / ".ci/run").read_text()
    readme = (REPO / "README.md").read_text()
    assert readme_problems(readme, ci) == []
    assert readme.splitlines()[0] == "# evalkit" and readme.splitlines()[2] == "```bash"
    assert readme_problems(readme.replace("-m \"unit or smoke\"", "-m unit", 1), ci)[0].startswith(
        "README.md's first lines must hold the two set-up commands")


def test_a_generated_part_needs_its_markers():
    assert block("a <!-- x -->old<!-- /x --> b", "x", "new") == "a <!-- x -->\nnew\n<!-- /x --> b"
    with pytest.raises(ValueError, match="no <!-- y --> ... <!-- /y --> markers"):
        block("text", "y", "new")
