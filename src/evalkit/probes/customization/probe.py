"""The customization probe as the runner sees it: two jobs, then each customization's source measured."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalkit.caliber import caliber_tag
from evalkit.probes.base import PlannedJob
from evalkit.probes.customization.plan import (
    CALLBACK,
    CUSTOMIZATIONS,
    LOSS,
    LOSS_STEPS,
    TASK,
    callback_steps,
    job_settings,
)
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.your_task import adapted, task_of
from evalkit.trainers import packages as trainer_packages

# The control: the baseline's own customizations (the hand-written loop's), measured in the same run as the wrapper's.
CONTROL_TRAINER = Path(__file__).resolve().parents[2] / "conf" / "trainer" / "baseline.yaml"


def module_file(class_path: str) -> str | None:
    """The source file of the module holding `class_path` (`pkg.module.Class`), found without importing it."""
    module = class_path.rsplit(".", 1)[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") else None


class CustomizationProbe:
    name = "customization"
    dimension = "customization"
    timed = False

    def task(self, cfg: DictConfig) -> str:
        return task_of(cfg, TASK)

    def caliber(self, cfg: DictConfig) -> str:
        limits = cfg.probe.customization
        return caliber_tag("customization", hw=cfg.hardware.name, opt="sgd", loss_steps=LOSS_STEPS,
                           l1=float(limits.l1_weight), callback_accum=2,
                           callback_steps=callback_steps(int(limits.stop_at_step)), stop=limits.stop_at_step)

    def plan(self, cfg: DictConfig, done: dict[str, JobEvidence]) -> tuple[list[PlannedJob], list[str]]:
        written = dict(cfg.trainer.get("customizations") or {})
        jobs = [PlannedJob(name, job_settings(name, cfg, written[name]))
                for name in CUSTOMIZATIONS if name in written and name not in done]
        notes = [f"no {name} customization written for trainer {cfg.trainer.name} "
                 f"(trainer.customizations.{name})" for name in CUSTOMIZATIONS if name not in written]
        return adapted(cfg, jobs, notes), notes

    def measure(self, cfg: DictConfig) -> dict[str, Any]:
        """Each customization's source cost beside the plain adapter's, the same for the baseline's own
        customizations (the control the line counts are judged against), and the limits the judge applies."""
        sources, notes = measure_sources(cfg.trainer)
        control, control_notes = measure_sources(OmegaConf.load(CONTROL_TRAINER))
        return {"limits": OmegaConf.to_container(cfg.probe.customization, resolve=True), "sources": sources,
                "notes": notes, "control": {"trainer": "baseline", "sources": control, "notes": control_notes}}

    def judge(self, jobs: list[JobEvidence], measured: dict[str, Any] | None = None) -> ProbeResult:
        from evalkit.probes.customization.judge import judge

        return judge(jobs, measured or {})


def measure_sources(trainer: Any) -> tuple[dict[str, Any], list[str]]:
    """({customization: its source cost beside the trainer's plain adapter}, notes on what was not measured)."""
    from evalkit.probes.customization.source import analyse

    written = dict(trainer.get("customizations") or {})
    plain = module_file(trainer._target_)
    packages = tuple(trainer_packages(trainer))
    sources, notes = {}, []
    for name in (LOSS, CALLBACK):
        if name not in written:
            continue
        path = module_file(written[name])
        if path is None:
            notes.append(f"the {name} customization's source ({written[name]}) was not found: cost not measured")
            continue
        cost = analyse(path, plain, packages).as_dict()
        cost["module"] = written[name]
        sources[name] = cost
    return sources, notes
