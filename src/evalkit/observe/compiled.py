"""What torch.compile did in this rank (`train.compile`): the frames dynamo compiled, each graph break and each
recompilation with its reason and where it came from, and the seconds dynamo and inductor spent compiling.

Read from torch's own records (`torch._dynamo.utils.counters`, `compilation_time_metrics`, and the `graph_breaks`
and `recompiles` log artifacts), never from the wrapper. A break or recompilation whose message names evalkit's own
instruments (observe/, worker/) is marked `evalkit`: the judge charges the wrapper only with the others. The job
compiles in an inductor cache of its own (`<job dir>/inductor`), so its compile time is a first run's and does not
depend on which job compiled the same graph before it.
"""
from __future__ import annotations

import logging
import os
from typing import Any

import torch

from evalkit.observe.hooks import UNTRACED

MESSAGE_CHARS = 1500                 # of each reason kept: the guard that failed, or the break's explanation
INSTRUMENTS = (f"evalkit{os.sep}observe{os.sep}", f"evalkit{os.sep}worker{os.sep}")
# dynamo's own timers whose sum is the compile time: tracing and the forward graph's compile, the backward graph's
COMPILE_TIMERS = ("_compile.compile_inner", "compile_fx.<locals>.bw_compiler")


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.graph_breaks: list[str] = []
        self.recompiles: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a message torch could not format is no evidence
            return
        if record.name.endswith("__graph_breaks"):
            self.graph_breaks.append(text)
        elif record.name.endswith("__recompiles"):
            self.recompiles.append(text)


def origin(message: str) -> str:
    """`evalkit` when the break or recompilation is evalkit's instruments' (a hook of theirs torch.compile was told to
    run as Python, `hooks.untraced`, or code in their files where it happened or in the failed guard), else `wrapper`
    (the adapter, the wrapper, torch). The user stack a message ends with is not read: every rank's runs through
    evalkit's worker."""
    head = message.split("User code traceback:")[0].split("User stack trace:")[0]
    if any(f"<function {name} at 0x" in head for name in UNTRACED):
        return "evalkit"
    return "evalkit" if any(path in head for path in INSTRUMENTS) else "wrapper"


def _entry(message: str) -> dict[str, str]:
    return {"origin": origin(message), "message": message[:MESSAGE_CHARS]}


class CompileWatch:
    def __init__(self, job_dir: str) -> None:
        self._cache_before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        self._cache_dir = os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(job_dir, "inductor")
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        torch._logging.set_logs(recompiles=True, graph_breaks=True)
        self._messages = _Messages()
        self._logger = logging.getLogger("torch._dynamo")
        self._logger.addHandler(self._messages)

    def close(self) -> None:
        """Torch's logging and inductor's cache as they were (the summary keeps what was recorded)."""
        self._logger.removeHandler(self._messages)
        torch._logging.set_logs()
        if self._cache_before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = self._cache_before

    def summary(self) -> dict[str, Any]:
        counters = torch._dynamo.utils.counters
        timers = torch._dynamo.utils.compilation_time_metrics
        inductor = counters.get("inductor", {})
        return {
            "frames": int(counters.get("frames", {}).get("total", 0)),
            "frames_ok": int(counters.get("frames", {}).get("ok", 0)),
            "graphs": int(counters.get("stats", {}).get("unique_graphs", 0)),
            "ops_captured": int(counters.get("stats", {}).get("calls_captured", 0)),
            "compile_s": round(sum(sum(timers.get(name, [])) for name in COMPILE_TIMERS), 3),
            "cache": {"fxgraph_hit": int(inductor.get("fxgraph_cache_hit", 0)),
                      "fxgraph_miss": int(inductor.get("fxgraph_cache_miss", 0))},
            "graph_breaks": [_entry(m) for m in self._messages.graph_breaks],
            "recompiles": [_entry(m) for m in self._messages.recompiles],
            "cache_dir": self._cache_dir,
        }
