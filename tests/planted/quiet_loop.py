"""The baseline loop with the faults the stability probe once let pass (issue 28), for its tests.

`QuietAdapter(options={...})` is `unstable_loop.UnstableAdapter` (its options too: `resume_wrongs`, ...) plus:
- `jitter: <float>`: before every optimizer step each parameter moves by Gaussian noise of this size drawn from
  the operating system's entropy (not torch's RNG): the wrapper is not bitwise reproducible, a killed run leaves
  the uninterrupted run's trajectory from step 1, and only the parameter and loss comparison can be relaxed;
- `exit_on_error: true`: a RuntimeError out of training (the injected out-of-memory error, the error in the loss
  function) is caught, printed, and the process ends with `sys.exit(0)`: a user sees exit status 0;
- `leak_bytes: <int>`: this many bytes (a numpy array) kept alive after every optimizer step, a leak a few times
  the baseline's own RSS slope (its long run grows about 0.18 KiB a step over 3,000 steps: 560 bytes make the
  wrapper's about 4x that; over 300 steps a leak this small hides in the allocator's free memory);
- `unrelated_crash_on: [<word>, ...]`: a resume from a checkpoint directory whose name holds one of the words
  fails at once with an error that has nothing to do with the checkpoint (a crash for another reason).
"""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from unstable_loop import UnstableAdapter


class QuietAdapter(UnstableAdapter):
    option_names = ("unrelated_crash_on", "jitter", "leak_bytes", "exit_on_error")   # and UnstableAdapter's
    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        super().__init__(mode, options)
        self.kept: list[np.ndarray] = []

    def fit(self, job) -> None:
        where = os.path.basename(str(job.resume_from or "").rstrip("/"))
        if any(word in where for word in self.options.get("unrelated_crash_on", []) or []):
            raise ValueError("planted: the progress display could not be started")
        hooks = []
        if self.options.get("jitter"):
            hooks.append(register_optimizer_step_pre_hook(self._jitter(float(self.options["jitter"]))))
        if self.options.get("leak_bytes"):
            size = max(1, int(self.options["leak_bytes"]) // 8)
            hooks.append(register_optimizer_step_post_hook(lambda *_: self.kept.append(np.ones(size))))
        try:
            super().fit(job)
        except RuntimeError as exc:           # torch.OutOfMemoryError is one
            if not self.options.get("exit_on_error"):
                raise
            print(f"training stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            sys.exit(0)
        finally:
            for hook in hooks:
                hook.remove()

    @staticmethod
    def _jitter(size: float):
        rng = np.random.default_rng()         # seeded from the OS: differs in every process

        def hook(optimizer, *_):
            with torch.no_grad():
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        p.add_(torch.from_numpy(rng.normal(0.0, size, tuple(p.shape))).to(p))
        return hook
