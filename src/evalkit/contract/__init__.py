"""The adapter contract, the one folder a third party reads: what evalkit hands an adapter and what it expects back
(adapter.py), what makes a class an adapter (adapter_class.py) and which `trainer.options` it reads (options.py), the
effective config it reports (effective.py), and the checkpoint helpers adapters share (checkpoint.py).

`from evalkit.contract import TrainJob, WrapperAdapter, ...` works as it always has. The names of adapter.py are
imported when first asked for (a module `__getattr__`), since adapter.py imports torch: the controller's process
checks a config with the torch-free modules here and never pays torch's import (a second).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalkit.contract.adapter_class import (
    ADAPTER_METHODS,
    MODES,
    NotAnAdapter,
    adapter_class_problem,
    check_mode,
    not_an_adapter,
)
from evalkit.contract.effective import OWNED, Departure, Deviation, EffectiveConfig, QuickStartPage, jsonable
from evalkit.contract.options import declared_in, unknown_options

if TYPE_CHECKING:   # imported on first use, below; the source readers (options.py, the customization probe)
    # follow these imports to the module that defines each name
    from evalkit.contract.adapter import (
        Adapter,
        AdapterUnavailable,
        Precision,
        Recipe,
        TrainJob,
        UnsupportedCombination,
        WrapperAdapter,
        no_value_sink,
        same_device,
    )
    from evalkit.tasks.catalog import Task
    from evalkit.tasks.order import OrderedSampler, ValSampler

__all__ = ["ADAPTER_METHODS", "Adapter", "AdapterUnavailable", "Departure", "Deviation", "EffectiveConfig", "MODES",
           "NotAnAdapter", "OWNED", "OrderedSampler", "Precision", "QuickStartPage", "Recipe", "Task", "TrainJob",
           "UnsupportedCombination", "ValSampler", "WrapperAdapter", "adapter_class_problem", "check_mode",
           "declared_in", "jsonable", "no_value_sink", "not_an_adapter", "same_device", "unknown_options"]
_WITH_TORCH = frozenset(__all__) - set(globals())   # the names not imported above: adapter.py's, on first use


def __getattr__(name: str) -> Any:
    if name in _WITH_TORCH:
        from evalkit.contract import adapter

        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
