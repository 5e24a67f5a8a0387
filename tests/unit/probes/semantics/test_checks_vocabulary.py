"""Every explanation is the wrapper's own (issue 43): a finding's "why" and "align" come from the adapter's declarations
(`ALIGNS`, `DEVIATIONS`) or from the wrapper-neutral judge, and neither names a setting the wrapper does not have.
Ignite's short-epoch validation was once explained as "a validation 'sanity check' ... num_sanity_val_steps=0",
Lightning's words: Ignite has no sanity check.

A setting is a keyword of a wrapper's own API, read from the installed wrapper (its constructors' and methods'
parameters, its configuration dataclasses' fields); names torch's own APIs or evalkit's config also use are neutral."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import re

import pytest
from helpers import REPO

from evalkit.config import ObserveConfig, TrainConfig

IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")     # snake_case with at least one underscore
JUDGE = REPO / "src" / "evalkit" / "probes" / "semantics"
ADAPTERS = {"lightning": "evalkit.adapters.lightning_trainer", "fabric": "evalkit.adapters.fabric",
            "accelerate": "evalkit.adapters.accelerate_loop", "hf_trainer": "evalkit.adapters.hf_trainer",
            "ignite": "evalkit.adapters.ignite_engine", "poutyne": "evalkit.adapters.poutyne"}


def keywords(*apis) -> set[str]:
    out: set[str] = set()
    for api in apis:
        out |= {f.name for f in dataclasses.fields(api)} if dataclasses.is_dataclass(api) \
            else set(inspect.signature(api).parameters)
    return out


def wrapper_settings() -> dict[str, set[str]]:
    """Each wrapper's settings, from its installed API (skipped where a wrapper is missing)."""
    for module in ("lightning", "accelerate", "transformers", "ignite", "poutyne"):
        pytest.importorskip(module)
    import ignite.distributed as idist
    import poutyne
    from accelerate import Accelerator
    from accelerate.utils import (
        DataLoaderConfiguration,
        DistributedDataParallelKwargs,
        GradientAccumulationPlugin,
        ProjectConfiguration,
    )
    from ignite.engine import Engine, create_supervised_evaluator, create_supervised_trainer
    from ignite.handlers import Checkpoint
    from lightning.fabric import Fabric
    from lightning.pytorch import Trainer
    from transformers import TrainingArguments
    from transformers.trainer_pt_utils import AcceleratorConfig

    return {
        "lightning": keywords(Trainer.__init__),
        "fabric": keywords(Fabric.__init__, Fabric.setup, Fabric.setup_dataloaders, Fabric.clip_gradients),
        "accelerate": keywords(Accelerator.__init__, DataLoaderConfiguration, GradientAccumulationPlugin,
                               DistributedDataParallelKwargs, ProjectConfiguration),
        "hf_trainer": keywords(TrainingArguments, AcceleratorConfig),
        "ignite": keywords(create_supervised_trainer, create_supervised_evaluator, Engine.run, Checkpoint.__init__,
                           idist.Parallel.__init__),
        "poutyne": keywords(poutyne.Model.__init__, poutyne.Model.fit, poutyne.Model.fit_generator),
    }


def neutral() -> set[str]:
    """torch's own keywords and evalkit's settings: no wrapper's alone."""
    import torch

    return keywords(torch.utils.data.DataLoader.__init__, torch.utils.data.DistributedSampler.__init__,
                    torch.nn.parallel.DistributedDataParallel.__init__, torch.optim.AdamW.__init__,
                    torch.nn.utils.clip_grad_norm_, TrainConfig, ObserveConfig)


def foreign(texts: list[str], own: set[str], settings: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each identifier in `texts` that is some wrapper's setting, not `own`'s and not neutral: the wrappers it is
    a setting of."""
    shared = neutral()
    return {word: sorted(w for w, names in settings.items() if word in names)
            for text in texts for word in IDENTIFIER.findall(text)
            if word not in own and word not in shared and any(word in names for names in settings.values())}


def test_the_judges_own_words_name_no_wrappers_setting():
    """The judge's texts are the fallback when an adapter declares no aligning setting: wrapper-neutral."""
    settings = wrapper_settings()
    strings = [s for path in sorted(JUDGE.glob("*.py")) for s in re.findall(r'"([^"\n]*)"', path.read_text())]
    assert len(strings) > 100                       # the judge's modules were read
    assert foreign(strings, set(), settings) == {}


@pytest.mark.parametrize("wrapper", sorted(ADAPTERS))
def test_an_adapters_explanations_name_only_its_wrappers_settings(wrapper):
    settings = wrapper_settings()
    module = importlib.import_module(ADAPTERS[wrapper])
    texts = [*getattr(module, "ALIGNS", {}).values(), *(d.text for d in getattr(module, "DEVIATIONS", ()))]
    assert texts, f"{wrapper}: no declarations read"
    assert foreign(texts, settings[wrapper], settings) == {}


def test_a_planted_foreign_setting_is_caught():
    settings = wrapper_settings()
    assert foreign(["align with: sanity-check validation off (num_sanity_val_steps=0)"], settings["ignite"],
                   settings) == {"num_sanity_val_steps": ["lightning"]}
    assert foreign(["Trainer(num_sanity_val_steps=0)"], settings["lightning"], settings) == {}

