"""scripts/doc_links.py: a relative link that points at no file, or at no heading of its file, is named."""
from __future__ import annotations

import sys

from helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from doc_links import anchors, broken_links, slug  # noqa: E402


def test_github_anchors_drop_punctuation_and_number_repeats():
    assert slug("The semantic probe (`probe=semantics`)") == "the-semantic-probe-probesemantics"
    assert slug("A team's tracking server") == "a-teams-tracking-server"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_each_broken_link_is_named_with_its_line_and_the_rest_pass(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# Title\n## Some part\n")
    (tmp_path / "img.png").write_bytes(b"")
    doc = tmp_path / "README.md"
    doc.write_text("[ok](docs/b.md) [ok](docs/b.md#some-part) ![ok](img.png) [web](https://x.org/y.md)\n"
                   "[gone](docs/nothing.md)\n"
                   "[bad heading](docs/b.md#no-part) [here](#nowhere)\n"
                   "`[in code](missing.md)`\n```\n[in a block](missing.md)\n```\n"
                   "![later](docs/shot.png)\n")
    assert broken_links(doc, tmp_path, pending={"docs/shot.png": "made later"}) == [
        "README.md:2: docs/nothing.md: no such file",
        "README.md:3: docs/b.md#no-part: no heading #no-part there",
        "README.md:3: #nowhere: no heading #nowhere there"]
    assert broken_links(doc, tmp_path)[-1] == "README.md:8: docs/shot.png: no such file"   # not pending: broken
