"""Where the wrapper's added time and memory go: its profile job against the baseline's (observe/call_profile.py),
the same steps at the same depth, both profiled alike.

Time: each function's own time per step in the wrapper's job minus the same function's in the baseline's (a function
only one arm ran counts whole), by function (`module:function`) and by package (the first component of its module);
the five that add the most; functions written in Python apart from built-in and C functions (`~builtin`, e.g. the
autograd engine's `run_backward`), whose profiled time also differs by about 10 % between two processes of one
program (measured here between the arms of identical cells), so that a large C function is named only beside that
caveat. These are profiled times: profiling inflates call-heavy code, so they say where the difference lies, not how
large it is unprofiled (the turns measure that). Memory: what each source file holds at the
profile's last step, wrapper minus baseline, the five that add the most.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

TOP = 5
MIN_MIB = 0.01      # smaller differences in what a file holds are not named


def module_of(file: str) -> str:
    """`lightning/pytorch/loops/fit_loop.py` -> `lightning.pytorch.loops.fit_loop`; `~builtin` stays."""
    if file.startswith("~") or file.startswith("<"):
        return file
    stem = file[:-3] if file.endswith(".py") else file
    return stem.replace("/", ".").removesuffix(".__init__")


def _own_ms_per_step(profile: dict[str, Any]) -> dict[str, float]:
    steps = max(1, int(profile.get("steps") or 1))
    out: dict[str, float] = defaultdict(float)
    for row in profile.get("functions", []):
        out[f"{module_of(row['file'])}:{row['function']}"] += 1000 * row["own_s"] / steps
    return out


def added_time(baseline: dict[str, Any], wrapper: dict[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """{"functions": [(module:function, added ms per step)] of Python functions, "builtins": the same of built-in
    and C functions, "packages": [(package, added ms per step)]}, the TOP largest additions each, and the profiled ms
    per step of each arm ("total")."""
    base, wrap = _own_ms_per_step(baseline), _own_ms_per_step(wrapper)
    added = {key: wrap.get(key, 0.0) - base.get(key, 0.0) for key in base.keys() | wrap.keys()}
    packages: dict[str, float] = defaultdict(float)
    for key, ms in added.items():
        packages[key.split(":", 1)[0].split(".", 1)[0]] += ms
    top = lambda d: sorted(((k, v) for k, v in d.items() if k and v > 0), key=lambda kv: -kv[1])[:TOP]  # noqa: E731
    python = {k: v for k, v in added.items() if not k.startswith(("~", "<"))}
    native = {k: v for k, v in added.items() if k.startswith("~")}
    return {"functions": top(python), "builtins": top(native), "packages": top(packages),
            "total": [("baseline", sum(base.values())), ("wrapper", sum(wrap.values()))]}


def added_memory(baseline: dict[str, Any], wrapper: dict[str, Any]) -> list[tuple[str, float]]:
    """(source file, MiB held more by the wrapper's job than by the baseline's), the TOP largest."""
    base = {row["file"]: row["bytes"] for row in baseline.get("memory", [])}
    wrap = {row["file"]: row["bytes"] for row in wrapper.get("memory", [])}
    added = {f: (wrap.get(f, 0) - base.get(f, 0)) / 2**20 for f in base.keys() | wrap.keys()}
    return sorted(((f, mib) for f, mib in added.items() if mib >= MIN_MIB), key=lambda kv: -kv[1])[:TOP]


def section(baseline: dict[str, Any], wrapper: dict[str, Any], size: str) -> str:
    """The report's markdown: where the added time and memory go."""
    time, memory = added_time(baseline, wrapper), added_memory(baseline, wrapper)
    totals = dict(time["total"])
    lines = [f"Profiled at {size} over {wrapper.get('steps')} steps (cProfile; profiled time per step: "
             f"baseline {totals['baseline']:.2f} ms, wrapper {totals['wrapper']:.2f} ms). The Python functions "
             "whose own time the wrapper adds most:", "", "| function | added ms/step (profiled) |", "|---|---|"]
    lines += [f"| `{name}` | {ms:+.3f} |" for name, ms in time["functions"]] or ["| (none) | - |"]
    lines += ["", "Built-in and C functions (their profiled time differs by about 10 % between two processes of one "
              "program): " + (", ".join(f"`{name}` {ms:+.3f} ms" for name, ms in time["builtins"]) or "none")]
    lines += ["", "By package: " + (", ".join(f"{name} {ms:+.3f} ms" for name, ms in time["packages"]) or "none")]
    lines += ["", "Memory held at the profile's last step that the wrapper's job holds and the baseline's does not "
              "(tracemalloc, by source file): " + (", ".join(f"`{f}` {mib:+.2f} MiB" for f, mib in memory) or "none")]
    return "\n".join(lines)
