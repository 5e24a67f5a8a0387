"""Each bundled trainer names its wrapper's documentation once (`docs` in conf/trainer/<name>.yaml, issue 44): every
page its adapter cites for a documented-unsupported refusal (`documented_at=...`) and the page its launch follows
lie there, so the probes' citation check (evalkit.probes.refusals) accepts the bundled adapters' own refusals."""
from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from evalkit import trainers

BUNDLED = trainers.bundled_trainers()


def cited_pages(target: str) -> list[str]:
    """The values of every `documented_at=<constant>` in the adapter's module."""
    module = importlib.import_module(target.rsplit(".", 1)[0])
    tree = ast.parse(inspect.getsource(module))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "documented_at":
            value = node.value
            out.append(getattr(module, value.id) if isinstance(value, ast.Name) else ast.literal_eval(value))
    return out


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_bundled_trainer_names_its_docs_and_its_launch_page_lies_there(name):
    conf = BUNDLED[name]
    assert trainers.docs(conf), f"conf/trainer/{name}.yaml names no `docs`"
    source = str(conf.launch.source).split()[0]
    assert trainers.docs_page(conf, source), f"{name}'s launch source {source} is not under {trainers.docs(conf)}"


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_page_an_adapter_cites_for_a_documented_refusal_lies_in_its_docs(name):
    conf = BUNDLED[name]
    for page in cited_pages(conf._target_):
        assert trainers.docs_page(conf, page), f"{conf._target_} cites {page}, not under {trainers.docs(conf)}"


def test_the_refusing_adapters_are_seen():
    cited = {name: cited_pages(conf._target_) for name, conf in BUNDLED.items()}
    assert {name for name, pages in cited.items() if pages} >= {"poutyne", "fabric", "lightning", "hf_trainer"}


def test_a_page_is_under_a_docs_entry_by_host_and_path_segments():
    conf = {"name": "x", "docs": ["huggingface.co/docs/accelerate", "poutyne.org"]}
    assert trainers.docs_page(conf, "https://huggingface.co/docs/accelerate/v1.16.0/en/package_reference")
    assert trainers.docs_page(conf, "https://huggingface.co/docs/accelerate")
    assert not trainers.docs_page(conf, "https://huggingface.co/docs/accelerated")
    assert not trainers.docs_page(conf, "https://huggingface.co/some-model")
    assert trainers.docs_page(conf, "https://www.poutyne.org/x") and not trainers.docs_page(conf, "https://notpoutyne.org")
    assert not trainers.docs_page(conf, "poutyne.org/model.html") and not trainers.docs_page(conf, "")
