"""What the quick-start smoke tests (tests/smoke/test_quick_start_<wrapper>.py) share: the description of an object
a spy saw handed to the wrapper, and the PYTHONPATH under which `evalkit` imports their spying adapters."""
from __future__ import annotations

import os

from helpers import TESTS


def describe(obj) -> dict:
    """A DataLoader's sampler, batch size, drop_last and dataset size; an optimizer's class, defaults and group
    count; a scheduler's class; anything else its class."""
    import torch

    if isinstance(obj, torch.utils.data.DataLoader):
        return {"kind": "loader", "sampler": type(obj.sampler).__name__, "batch_size": obj.batch_size,
                "drop_last": obj.drop_last, "size": len(obj.dataset)}
    if isinstance(obj, torch.optim.Optimizer):
        return {"kind": "optimizer", "class": type(obj).__name__, "defaults": obj.defaults,
                "groups": len(obj.param_groups)}
    if isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
        return {"kind": "scheduler", "class": type(obj).__name__}
    return {"kind": "other", "class": type(obj).__name__}


def spy_path() -> str:
    """PYTHONPATH for an `evalkit` run whose trainer is a spy defined in tests/smoke/."""
    return os.pathsep.join(p for p in (str(TESTS / "smoke"), str(TESTS), os.environ.get("PYTHONPATH")) if p)


def run_clip_pair(workdir, spy, overrides: list[str]) -> tuple[dict, dict, list]:
    """A multirun of a spying adapter without and with clipping (`overrides` holds train.grad_clip=null,0.5): what
    the spy saw per job (`spy/clip_<grad_clip>.json`), each job's effective config by its grad_clip, the job runs."""
    import json

    from helpers import effective_config, job_runs, ok, run_evalkit

    ok(run_evalkit(workdir, *overrides, f"+trainer.options.spy={spy}", multirun=True, env={"PYTHONPATH": spy_path()}))
    client, runs = job_runs(workdir)
    runs = [r for r in runs if r.data.tags.get("evalkit.role") == "job"]
    effective = {str(eff["grad_clip"]): eff for eff in (effective_config(client, run) for run in runs)}
    seen = {name.removeprefix("clip_").removesuffix(".json"): json.loads((spy / name).read_text())
            for name in os.listdir(spy)}
    return seen, effective, runs
