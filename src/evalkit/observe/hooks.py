"""Where every observation comes from: the hooks, registered and removed in one place.

Torch hooks: a forward hook on the model's first Linear/Conv layer, forward pre/post hooks on the task's
model, a forward hook on the task's loss module, and torch's global optimizer step pre/post hooks (every
optimizer in the process); a hook given no callback is not registered (the `timing` profile uses fewer).
Registrations on torch base classes (`LRScheduler.step`, `GradScaler.scale`, `GradScaler.update`) keep a
registry of the schedulers and scalers in use, so the observers can read ones they did not create;
`GradScaler.update` also tells listeners, before it runs, that a scaler updated.
Nothing here touches a wrapper's internals; the collectors decide what each hook records.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch
from torch.optim.lr_scheduler import LRScheduler
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

UNTRACED: set[str] = set()      # the qualified names of evalkit's hooks torch.compile runs as Python (`untraced`)
SCHEDULERS: "weakref.WeakSet[Any]" = weakref.WeakSet()   # every LRScheduler whose step() ran
SCALERS: "weakref.WeakSet[Any]" = weakref.WeakSet()      # every GradScaler whose scale() or update() ran
_SCALER_UPDATE_LISTENERS: list[Callable[[Any], None]] = []


def _register_on_call(cls: type, method: str, registry: weakref.WeakSet, listeners: list | None = None) -> None:
    """Wrap `cls.method` once so each call registers the instance (and tells `listeners` first)."""
    original = getattr(cls, method)
    if getattr(original, "_evalkit_registering", False):
        return

    def registering(self, *args, **kwargs):
        registry.add(self)
        for listener in listeners or ():
            listener(self)
        return original(self, *args, **kwargs)

    registering._evalkit_registering = True
    setattr(cls, method, registering)


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in a hook's args, kwargs or output (nested lists, tuples and dicts searched in order)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def untraced(callback: Callable) -> Callable:
    """A module hook torch.compile runs as Python, never traces: traced, a hook's records (sample ids read off the
    batch's bytes, lists that grow every step) would fail to trace or recompile the wrapper's graph each step. A hook
    inside the compiled region is then a graph break of evalkit's own (observe/compiled.py marks it so). Applied to
    every job, not only `train.compile` ones: a wrapper or a team's adapter may compile on its own; the cost, about
    0.5 us a call against 0.06, is the same in every arm."""
    UNTRACED.add(getattr(callback, "__qualname__", repr(callback)))
    return torch.compiler.disable(callback)


class Hooks:
    """One observer's registrations, in the order torch calls them within a step; `remove()` undoes them (the
    wrappers on the torch base classes stay: they only fill the registries). A callback given as None is not
    registered; `remove_compute_layer()` drops the compute layer's hook alone (mid-run, outside that layer's
    forward)."""

    def __init__(self, model: torch.nn.Module, compute_layer: torch.nn.Module, loss_fn: torch.nn.Module, *,
                 on_compute_layer: Callable | None, on_forward_pre: Callable | None, on_forward: Callable,
                 on_loss: Callable | None, on_step_pre: Callable | None, on_step_post: Callable,
                 on_scaler_update: Callable[[Any], None]):
        _register_on_call(LRScheduler, "step", SCHEDULERS)
        _register_on_call(torch.amp.GradScaler, "scale", SCALERS)
        _register_on_call(torch.amp.GradScaler, "update", SCALERS, _SCALER_UPDATE_LISTENERS)
        self._on_scaler_update = on_scaler_update
        _SCALER_UPDATE_LISTENERS.append(on_scaler_update)
        self._compute_layer = (compute_layer.register_forward_hook(untraced(on_compute_layer))
                               if on_compute_layer else None)
        registrations = [
            (on_forward_pre, lambda f: model.register_forward_pre_hook(untraced(f), with_kwargs=True)),
            (on_forward, lambda f: model.register_forward_hook(untraced(f), with_kwargs=True)),
            (on_loss, lambda f: loss_fn.register_forward_hook(untraced(f))),
            (on_step_pre, register_optimizer_step_pre_hook),
            (on_step_post, register_optimizer_step_post_hook),
        ]
        self._handles = [register(callback) for callback, register in registrations if callback is not None]

    def remove_compute_layer(self) -> None:
        if self._compute_layer is not None:
            self._compute_layer.remove()
            self._compute_layer = None

    def remove(self) -> None:
        if self._on_scaler_update in _SCALER_UPDATE_LISTENERS:
            _SCALER_UPDATE_LISTENERS.remove(self._on_scaler_update)
        self.remove_compute_layer()
        for handle in self._handles:
            handle.remove()
        self._handles = []
