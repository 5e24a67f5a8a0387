"""What makes a class an evalkit adapter, checked without torch: the controller's process refuses a bad
`trainer._target_` or mode before any worker starts, and a command that only composes, checks or refuses its
config never pays torch's import (a second). The rest of the contract (`TrainJob`, `Adapter`) is in adapter.py;
`evalkit.contract` hands out the names of both."""
from __future__ import annotations

import importlib
import sys
from typing import Any

MODES = ("aligned", "defaults")


def check_mode(mode: str) -> str:
    """The adapter mode, or a ValueError naming the valid ones."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return mode


class NotAnAdapter(TypeError):
    """`trainer._target_` names a class without the `Adapter` methods (the message names what is missing)."""


ADAPTER_METHODS = ("fit", "effective_config")


def not_an_adapter(cls: Any, target: str) -> str | None:
    """Why the class `trainer._target_` names is not an adapter (checked before constructing it), or None."""
    missing = [name for name in ADAPTER_METHODS if not callable(getattr(cls, name, None))]
    if not missing:
        return None
    return (f"trainer._target_={target} is not an evalkit adapter: {getattr(cls, '__qualname__', cls)} has no "
            f"{', '.join(m + '()' for m in missing)}; point trainer._target_ at a class with fit(job) and "
            "effective_config() (the Adapter protocol in evalkit/contract/adapter.py)")


def adapter_class_problem(target: str) -> str | None:
    """`not_an_adapter` for the controller, before any worker starts, only where importing `target` there
    cannot import a wrapper: its module is already imported or belongs to the standard library. Any other
    class (adapters/, a third party's package) is checked by the worker, in `load_adapter`."""
    module = target.rpartition(".")[0]
    if not module or (module not in sys.modules and module.split(".")[0] not in sys.stdlib_module_names):
        return None
    try:
        cls = getattr(importlib.import_module(module), target.rpartition(".")[2])
    except Exception:  # noqa: BLE001 - the worker reports an import failure with its cause
        return None
    return not_an_adapter(cls, target)
