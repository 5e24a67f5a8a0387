"""A refusal read back from a job's failure reason (issue 44): a documented-unsupported refusal is one only when its
citation is a page of the wrapper's own documentation (the trainer's `docs`, conf/trainer/<name>.yaml); any other
citation (none, not a URL, another site, another wrapper's docs) is judged as an undocumented refusal, and says why.
Poutyne's refusal of world size 2 as recorded (tests/fixtures/semantics/wrappers/poutyne.defaults.json.gz)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import FIXTURES
from semantics_runs import recorded_evidence

from evalkit import names
from evalkit.probes.refusals import DOCUMENTED, refusal_of

POUTYNE_PAGE = "https://poutyne.org/model.html#poutyne.Model.to"


@pytest.fixture(scope="module")
def refused_ws2():
    """Poutyne's ws2 job, refused as recorded (documented-unsupported, citing Model.to's page)."""
    jobs = recorded_evidence(FIXTURES / "semantics" / "wrappers" / "poutyne.defaults.json.gz")
    return next(j for j in jobs if j.name == "ws2-noclip")


def citing(job, where: str, trainer: dict | None = None):
    """The job with its refusal citing `where` instead (and another trainer config when given)."""
    reason = job.failure_reason.replace(f"see {POUTYNE_PAGE}", f"see {where}")
    config = {**job.config, "trainer": trainer} if trainer is not None else job.config
    return replace(job, tags={**job.tags, names.FAILURE_REASON: reason}, config=config)


def test_poutynes_recorded_refusal_cites_a_page_of_its_docs_and_is_documented(refused_ws2):
    found = refusal_of(refused_ws2)
    assert (found.kind, found.documented_at, found.uncited) == (DOCUMENTED, POUTYNE_PAGE, "")
    assert found.cited() == f"documented-unsupported: {POUTYNE_PAGE}"


@pytest.mark.parametrize("where", ["see the README", "poutyne.org/model.html", "https://github.com/GRAAL-Research/"
                                   "poutyne/issues/1", "https://lightning.ai/docs/pytorch/stable/", "ftp://poutyne.org/x",
                                   "https://poutyne.org.example.com/model.html"])
def test_a_refusal_citing_anything_but_a_page_of_the_wrappers_docs_is_judged_undocumented(refused_ws2, where):
    found = refusal_of(citing(refused_ws2, where))
    assert found.kind == "" and found.documented_at == where
    assert found.uncited.startswith(f"citation not a page of poutyne's docs: {where}")


def test_a_subdomain_or_another_page_of_the_docs_checks(refused_ws2):
    for where in ("https://poutyne.org/v1.19/callbacks.html", "http://www.poutyne.org/"):
        assert refusal_of(citing(refused_ws2, where)).kind == DOCUMENTED


def test_a_trainer_that_declares_no_docs_has_no_documented_refusal(refused_ws2):
    """A third-party adapter whose trainer config names no documentation (`trainer.docs`): no citation can check."""
    own = {"_target_": "my_pkg.MyAdapter", "name": "mine"}
    found = refusal_of(citing(refused_ws2, POUTYNE_PAGE, own))
    assert found.kind == "" and found.uncited.startswith(f"citation not a page of mine's docs: {POUTYNE_PAGE}")
    assert "trainer.docs" in found.uncited
    declared = refusal_of(citing(refused_ws2, "https://example.org/mine/limits", {**own, "docs": ["example.org/mine"]}))
    assert declared.kind == DOCUMENTED


def test_a_bundled_adapter_under_another_name_keeps_its_yamls_docs(refused_ws2):
    renamed = {**refused_ws2.config["trainer"], "name": "pt"}
    renamed.pop("docs", None)
    assert refusal_of(citing(refused_ws2, POUTYNE_PAGE, renamed)).kind == DOCUMENTED
