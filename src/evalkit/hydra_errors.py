"""Hydra's errors said in one line: a bad override on the command line, and a sweep's jobs composed before the
sweep records anything.

Hydra prints a multi-line report for a bad override (with hints that do not apply to evalkit: `+key=value` for
a typo, which evalkit refuses) and a stack trace for anything else, a parallel launcher's lost worker included.
`evalkit` asks Hydra to raise instead (HYDRA_FULL_ERROR=1, unless the user set it for the full trace) and says it
here.
"""
from __future__ import annotations

import traceback

from omegaconf import DictConfig

_HYDRA_NOISE = ("To append", "full_key:", "reference_type=", "object_type=", "See https://",
                "Set the environment variable HYDRA_FULL_ERROR")
# Where the exceptions of Hydra's parallel launchers come from (a worker process lost, a job that died).
LAUNCHER_MODULES = ("joblib", "loky", "submitit", "hydra_plugins")


def error_line(exc: BaseException) -> str:
    """Hydra's error and its causes on one line, without the hints that do not apply here; a mistyped key gets
    the nearest valid one, another probe's setting the probe it belongs to."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from evalkit.config import not_a_setting

    chain = [exc]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    for error in chain:
        key = getattr(error, "full_key", None) if isinstance(error, (ConfigAttributeError, ConfigKeyError)) else None
        said = not_a_setting(key, getattr(error, "parent_node", None)) if key else None
        if said:
            return said
    text = "\n".join(str(error).split("Config search path")[0] for error in chain)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = " ".join(line for line in lines if not line.startswith(_HYDRA_NOISE))
    override = getattr(exc, "override", None)      # a parse error names the override apart from its message
    return f"{override}: {said}" if isinstance(override, str) and override not in said else said


def is_override_error(exc: BaseException) -> bool:
    """A config that cannot be composed: a key that does not exist, a value of the wrong type, a missing option."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return isinstance(exc, (HydraException, OmegaConfBaseException))


def is_launcher_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in LAUNCHER_MODULES


def report(exc: BaseException) -> str:
    """What to print for an exception Hydra raised: one line for a bad override or a launcher's failure, the stack
    trace (an evalkit bug) otherwise."""
    if is_override_error(exc):
        return f"evalkit: bad override: {error_line(exc)}"
    if is_launcher_error(exc):
        return f"evalkit: the launcher failed: {type(exc).__name__}: {error_line(exc)}"
    return "".join(traceback.format_exception(exc)).rstrip()


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The jobs (each its list of overrides) Hydra's basic sweeper makes of a multirun's `overrides`, the last
    varying fastest. Raises Hydra's parse error for an override it cannot parse."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the sweeper `evalkit -m` uses
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def basic_sweeper_jobs(config: DictConfig) -> list[list[str]] | None:
    """`sweep_jobs` of a multirun's config; None when another sweeper than Hydra's basic one decides the jobs."""
    if "basic_sweeper" not in str(config.hydra.sweeper.get("_target_", "")).lower():
        return None
    return sweep_jobs(config.hydra.overrides.task)


def sweep_override_problem(config: DictConfig) -> str | None:
    """A bad override among the sweep's jobs (`train.max_steps=2,x`): Hydra's sweeper composes the jobs only after
    the sweep's callbacks ran, so the sweep composes them first, as the sweeper will, before recording anything.
    None when every job composes (or another sweeper than Hydra's basic one decides the jobs)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    try:
        for job in basic_sweeper_jobs(config) or []:
            loader.load_sweep_config(config, job)
    except Exception as exc:  # noqa: BLE001 - said as Hydra's sweeper would raise it, in one line
        if is_override_error(exc):
            return error_line(exc)
        raise
    return None
