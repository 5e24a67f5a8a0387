"""The trainers evalkit bundles (`conf/trainer/*.yaml`), read as data, and the check that a job is
recorded under the name of the adapter that actually runs."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

TRAINER_CONF = Path(__file__).parent / "conf" / "trainer"


@lru_cache(maxsize=1)
def bundled_trainers() -> dict[str, DictConfig]:
    """name -> that trainer's YAML, for every bundled trainer."""
    return {path.stem: OmegaConf.load(path) for path in sorted(TRAINER_CONF.glob("*.yaml"))}


def identity_problem(trainer: DictConfig) -> str | None:
    """Why the job's trainer name would misname what runs, or None. `trainer._target_` overridden under a
    bundled trainer's name (`trainer=baseline` by default) would record a wrapper as that trainer, and the
    verdict would pool it into that arm."""
    bundled = bundled_trainers().get(trainer.name)
    if bundled is None or bundled._target_ == trainer._target_:
        return None
    same = [name for name, conf in bundled_trainers().items() if conf._target_ == trainer._target_]
    fix = f"use trainer={same[0]}" if same else "give the adapter its own name with trainer.name=<name>"
    return (f"trainer._target_={trainer._target_} is not the adapter of trainer={trainer.name} "
            f"({bundled._target_}); the run would be recorded as {trainer.name}: {fix}")
