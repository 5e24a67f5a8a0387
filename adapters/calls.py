"""Objects an adapter hands its wrapper (a strategy, a precision plugin, a callback), kept as the calls that
build them. An adapter writes its wrapper's arguments in one dict, passes `built(arguments)` and reports the
dict itself: `jsonable` writes each `Call` as the call it is (`DDPStrategy(process_group_backend='gloo', ...)`),
so what the effective config says was passed is what was passed."""
from __future__ import annotations

from typing import Any, Callable

_UNBUILT = object()


class Call:
    """`factory(*args, **kwargs)`, built once on first `build()`; `str()` spells the call (under `name`, the
    factory's own name by default), or says `text` where the call alone would not tell a reader what it does."""

    def __init__(self, factory: Callable[..., Any], *args: Any, **kwargs: Any):
        self.factory, self.args, self.kwargs = factory, args, kwargs
        self.name = getattr(factory, "__name__", str(factory))
        self.text: str | None = None
        self._built: Any = _UNBUILT

    def named(self, name: str) -> Call:
        self.name = name
        return self

    def described(self, text: str) -> Call:
        self.text = text
        return self

    def build(self) -> Any:
        if self._built is _UNBUILT:
            self._built = self.factory(*built(list(self.args)), **built(self.kwargs))
        return self._built

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        spelled = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(spelled)})"

    __repr__ = __str__


def built(value: Any) -> Any:
    """`value` with every `Call` in it (also inside dicts, lists and tuples) replaced by the object it builds."""
    if isinstance(value, Call):
        return value.build()
    if isinstance(value, dict):
        return {k: built(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(built(v) for v in value)
    return value
