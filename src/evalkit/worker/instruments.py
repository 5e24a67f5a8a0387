"""Everything that watches or perturbs one rank's training from the outside, attached before the adapter's fit and
removed after it, as one object in the worker's story (worker/run.py): the observer (steps, samples, validation,
memory, checkpoints), the planted faults, the checkpoint-load watch, the turn table of a timed job, the call
profile and the compile watch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig

from evalkit.contract.adapter import Adapter, TrainJob
from evalkit.observe.call_profile import CallProfile
from evalkit.observe.compiled import CompileWatch
from evalkit.observe.observer import Observer, ObserveSettings
from evalkit.observe.turns import TimedWindowDone, Turns
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import Task
from evalkit.worker.faults import FaultInjector
from evalkit.worker.load_watch import LoadWatch


@dataclass
class Instruments:
    observer: Observer
    faults: FaultInjector
    loads: LoadWatch | None = None          # a resumed job: which checkpoint loads it made, and how
    turns: Turns | None = None              # a timed job taking turns with its comparison's other jobs
    profiled: CallProfile | None = None     # where the time and memory go, function by function (untimed)
    compiled: CompileWatch | None = None    # train.compile: what dynamo compiled, broke and recompiled

    @classmethod
    def attach(cls, cfg: DictConfig, spec: dict[str, Any], job_dir: str, rank: int, spool: SpoolWriter, task: Task,
               device: torch.device, import_rss: int, world_size: int) -> "Instruments":
        """Every instrument this job's config asks for, attached to `task`'s model, loss and optimizer."""
        observe = cfg.observe
        profiled = CallProfile(observe.call_profile, observe.warmup_steps) if observe.get("call_profile") else None
        turns = spec.get("turns")
        turns = Turns(turns["address"], turns["job"], rank, observe.warmup_steps, device) if turns else None
        settings = ObserveSettings(
            warmup_steps=observe.warmup_steps, sample_ids=observe.sample_ids, record_params=observe.params,
            resuming=bool(spec.get("resume_from")), import_rss=import_rss, profile=observe.profile,
            ckpt_dir=spec["ckpt_dir"] if rank == 0 else None, memory_every=observe.memory_every, job_dir=job_dir,
            per_sample_validation=world_size > 1, compiled=bool(cfg.train.get("compile")))
        observer = Observer(task, spool, device, settings, turns=turns, call_profile=profiled).attach()
        faults = FaultInjector(cfg.faults, task.model, task.loss_fn, lambda: observer.step, observer.flush,
                               spec["ckpt_dir"], fill_device=spool.fill_device)
        compiled = CompileWatch(job_dir) if cfg.train.get("compile") else None
        return cls(observer, faults, LoadWatch() if spec.get("resume_from") else None, turns, profiled, compiled)

    def fit(self, adapter: Adapter, job: TrainJob) -> bool:
        """The adapter's fit under every instrument, each removed after it, however it ended; True when the turn
        table ended it, its timed window complete."""
        try:
            adapter.fit(job)
            return False
        except TimedWindowDone:      # the turn table has the blocks it needs: the job's measurement is complete
            return True
        finally:
            self.faults.remove()
            if self.loads is not None:
                self.loads.remove()
            if self.turns is not None:
                self.turns.close()
            if self.profiled is not None:
                self.profiled.close()
            if self.compiled is not None:
                self.compiled.close()

    def summary(self) -> dict[str, Any]:
        """What the instruments add to the rank's summary besides the observer's: the checkpoint loads, what
        torch.compile did."""
        out = self.loads.summary() if self.loads is not None else {}
        return {**out, "compile": self.compiled.summary()} if self.compiled is not None else out
