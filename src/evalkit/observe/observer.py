"""Framework-neutral observers: what a wrapper actually did, read from torch hooks, not from its logs.

`Observer` is the facade the worker attaches: it registers the hooks (`hooks.py`) and feeds each one to
the collectors that record from it, in the order below. Each collector owns one kind of observation:

- `samples.py`: the sample ids of each forward pass (model forward pre hook);
- `dtypes.py`: the compute dtype of each training micro-batch (compute layer and model forward hooks);
- `steps.py`: micro-batch, step and skip records: LR, loss scale, scheduler steps, gradient norm, losses
  (loss forward hook, optimizer step pre/post hooks, `GradScaler.update`);
- `validation.py`: validation metrics from no-grad forwards (model forward hook);
- `optimizer_groups.py`: the optimizer's class, param groups and hyperparameters (optimizer step pre hook);
- `timing.py`: step clocks and throughput; `turns.py`: a timed job's blocks of steps, taken in turns with
  the other jobs of its comparison; `call_profile.py`: where the time and memory go (cProfile, tracemalloc);
  `memory.py`: peak memory after warm-up; `params.py`: the parameters after each step (optimizer step post hook);
- `ckpt_watch.py`: the checkpoint entries written after each step; `memory_samples.py`: RSS and log bytes every
  `memory_every` steps (optimizer step post hook).

Records go to the spool once per optimizer step. On CUDA, values are read without waiting for the device
(`deferred.py`) and step ends are CUDA events read once at the end.

Two profiles. `full` (the default; the semantic and stability probes need it): all of the above. `timing`
(timed jobs: the performance probe): only what throughput and memory need, at a few microseconds per step:
the step clock, one light step record per optimizer step (`light_steps.py`: samples from the input's first
dimension, LR, loss on CPU), the memory window, and the compute dtype read during the warm-up steps only
(the compute layer's hook is removed when the measured window starts). No sample ids of training forwards, no
gradient norms, micro-batch or parameter records. Validation runs outside the timed window and is kept.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any

import torch

from evalkit.observe.call_profile import CallProfile
from evalkit.observe.ckpt_watch import CheckpointWatch
from evalkit.observe.dtypes import ComputeDtypes, compute_layer
from evalkit.observe.hooks import Hooks, first_tensor
from evalkit.observe.light_steps import LightStepRecords
from evalkit.observe.memory import PeakMemory
from evalkit.observe.memory_samples import MemorySamples
from evalkit.observe.optimizer_groups import OptimizerGroups
from evalkit.observe.params import ParamRecords
from evalkit.observe.samples import DeferredIds, SampleIds
from evalkit.observe.steps import StepRecords
from evalkit.observe.timing import StepClock
from evalkit.observe.turns import Turns
from evalkit.observe.validation import Validation
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import Task

PROFILES = ("full", "timing")


@dataclass(frozen=True)
class ObserveSettings:
    """What an Observer watches and how (the job's `observe.*`, and what the worker knows of the job).

    `deferred` (default: on CUDA): never wait for the device. A step's values (loss, grad norm, loss scale,
    sample ids) are copied to the host without waiting and its records are written when the next step ends
    (or at `finish`), by which time the copy is done; waiting at each step would drain the device's queue
    and expose CPU overhead (a wrapper's) that the GPU's work normally hides. Off, every record is written
    when its step ends. `profile`: "full" or "timing" (see the module's docstring); under "timing", `sample_ids`
    only serves validation, `record_params` and `deferred` are ignored (nothing is read off the device per step).
    """

    warmup_steps: int
    sample_ids: bool = True
    record_params: bool = False
    deferred: bool | None = None
    resuming: bool = False                # the job resumes a checkpoint (step numbers continue from its state)
    import_rss: int | None = None         # RSS after the wrapper's imports (CPU training memory is counted above it)
    profile: str = "full"
    ckpt_dir: str | None = None           # the checkpoint directory to watch (rank 0)
    memory_every: int = 0                 # memory sampled every this many steps (0: never)
    job_dir: str | None = None
    per_sample_validation: bool = False   # each validation sample's own sums too (several ranks: validation.py)
    # train.compile: no hook inside the model (the compute layer's would break its graph, or send it back to eager);
    # the compute dtype is then read off the model's output
    compiled: bool = False


class Observer:
    """Watches one rank's training from the outside (module, loss, optimizer, scheduler and scaler hooks) and
    writes what it sees to the spool, as `settings` say (ObserveSettings). `turns`: a timed job that takes turns
    with its comparison's other jobs; `call_profile`: where the time and memory go, function by function."""

    def __init__(self, task: Task, spool: SpoolWriter, device: torch.device, settings: ObserveSettings, *,
                 turns: Turns | None = None, call_profile: CallProfile | None = None):
        o = settings
        if o.profile not in PROFILES:
            raise ValueError(f"observe profile {o.profile!r} is not one of {', '.join(PROFILES)}")
        self.task, self.spool, self.device, self.profile = task, spool, device, o.profile
        self._compiled = o.compiled
        self.warmup_steps = o.warmup_steps
        timing = o.profile == "timing"
        self.deferred = False if timing else device.type == "cuda" if o.deferred is None else o.deferred
        self.samples = SampleIds(task, deferred=self.deferred, enabled=o.sample_ids)
        self.dtypes = ComputeDtypes()
        self._reading_dtypes = True        # timing: until the measured window starts
        self.steps: StepRecords | LightStepRecords = (
            LightStepRecords(spool, read_loss=device.type == "cpu", resuming=o.resuming) if timing
            else StepRecords(spool, self.samples, deferred=self.deferred, resuming=o.resuming))
        self.validation = Validation(task, spool, per_sample=o.per_sample_validation)
        self.clock = StepClock(device, o.warmup_steps)
        self.memory = PeakMemory(device, o.import_rss)
        self.params = ParamRecords(task.model, spool) if o.record_params and not timing else None
        self.optimizer = OptimizerGroups(task.model, spool) if not timing else None
        self._start_params: dict | None = None     # a resumed job's parameters and buffers at its first forward
        self._resuming = o.resuming
        self.ckpts = CheckpointWatch(o.ckpt_dir) if o.ckpt_dir and not timing else None
        self.memory_samples = MemorySamples(spool, device, o.memory_every, o.job_dir) \
            if o.memory_every and not timing else None
        self.turns = turns
        self.call_profile = call_profile
        self._hooks: Hooks | None = None
        self._value_calls = 0
        self.first_forward_wall: float | None = None   # time.time() of the first training forward (start-up cost)
        self.first_step_wall: float | None = None      # ... and of the first optimizer step's end

    @property
    def step(self) -> int:
        """Optimizer steps completed, counted from the step this process started at."""
        return self.steps.step

    def record_value(self, name: str, value: float) -> None:
        """`TrainJob.log_value`: one `value` record with the optimizer steps observed so far."""
        self._value_calls += 1
        self.spool.add({"kind": "value", "call": self._value_calls, "step": self.steps.step, "name": str(name),
                        "value": float(value)})

    def attach(self) -> "Observer":
        model = self.task.model
        on_compute_layer = None if self._compiled else self.dtypes.on_compute_layer
        if self.profile == "timing":
            steps = self.steps
            self._hooks = Hooks(model, compute_layer(model), self.task.loss_fn,
                                on_compute_layer=on_compute_layer, on_forward_pre=None,
                                on_forward=self._on_forward_timing,
                                on_loss=steps.on_loss if steps.read_loss else None,
                                on_step_pre=steps.on_step_pre if steps.resuming else None,
                                on_step_post=self._on_step_post, on_scaler_update=steps.on_scaler_update)
            return self
        self._hooks = Hooks(model, compute_layer(model), self.task.loss_fn,
                            on_compute_layer=on_compute_layer, on_forward_pre=self._on_forward_pre,
                            on_forward=self._on_forward, on_loss=self.steps.on_loss,
                            on_step_pre=self._on_step_pre, on_step_post=self._on_step_post,
                            on_scaler_update=self.steps.on_scaler_update)
        return self

    def detach(self) -> None:
        if self._hooks is not None:
            self._hooks.remove()
            self._hooks = None

    # ------------------------------------------------------------------ the hooks the facade dispatches
    def _on_forward_pre(self, module, args, kwargs) -> None:
        training = torch.is_grad_enabled()
        if training:
            self.validation.flush(self.steps.step)     # a validation run in progress has ended
            if not self.steps.in_step:                  # the step's first training forward
                self.steps.rng = rng_digest()
                if self._resuming and self.params is not None and self.first_forward_wall is None:
                    self._start_params = self.params.state()
        self.samples.on_forward_pre(args, kwargs, training)

    def _on_forward(self, module, args, kwargs, output) -> None:
        out = first_tensor(output)
        dtype = self.dtypes.read(out)
        ids = self.samples.take()
        if torch.is_grad_enabled():
            if self.first_forward_wall is None:
                self.first_forward_wall = time.time()
            self.dtypes.count(dtype)
            self.steps.add_micro(module.training, dtype, ids, self.samples.size(ids, out))
        elif out is not None and not isinstance(ids, DeferredIds):
            self.validation.add(module, out, ids)

    def _on_forward_timing(self, module, args, kwargs, output) -> None:
        """The `timing` profile's model forward hook: a training forward is counted (its dtype read during the
        warm-up); a no-grad forward's ids are recovered here, for validation, outside the timed window."""
        out = first_tensor(output)
        if torch.is_grad_enabled():
            if self.first_forward_wall is None:
                self.first_forward_wall = time.time()
            if self.validation.in_interval:
                self.validation.flush(self.steps.step)      # a validation run in progress has ended
            if self._reading_dtypes:
                self.dtypes.count(self.dtypes.read(out))
            rows = first_tensor(args) if args else first_tensor(kwargs)
            self.steps.add_forward(rows if rows is not None and rows.dim() else out)
        elif out is not None:
            self.samples.on_forward_pre(args, kwargs, False)
            self.validation.add(module, out, self.samples.take())

    def _on_step_pre(self, optimizer, args, kwargs) -> None:
        self.steps.on_step_pre(optimizer, args, kwargs)
        self.optimizer.on_step_pre(optimizer, self.steps.step + 1)

    def _on_step_post(self, optimizer, args, kwargs) -> None:
        self.validation.flush(self.steps.step)
        now, seconds = self.clock.lap()
        if self.first_step_wall is None:
            self.first_step_wall = time.time()
        validated = self.validation.in_interval
        if self.ckpts is not None:
            self.ckpts.poll(self.steps.step)       # written after the previous step ended
        samples = self.steps.end_step(optimizer, now, seconds, validated)
        step = self.steps.step
        if self._start_params is not None:     # the parameters this resumed job started from
            self.params.record(step - 1, self._start_params)
            self._start_params = None
        if self.params is not None:
            self.params.record(step)
        if self.memory_samples is not None:
            self.memory_samples.record(step)
        self.clock.add(step, seconds, samples, validated)
        self.validation.in_interval = False
        first_measured = self.clock.first_measured_step(step)
        if step == first_measured - 1:
            self.memory.start()
        if self._reading_dtypes and self.profile == "timing" and step >= first_measured - 1:
            self._reading_dtypes = False        # the warm-up told the compute dtype; the window pays nothing
            if self._hooks is not None:
                self._hooks.remove_compute_layer()
        if self.call_profile is not None:
            self.call_profile.after_step(step)
        if self.turns is not None:             # waits for its turn, outside every step's interval
            self.turns.after_step(step, seconds)
        self.clock.restart()

    # ------------------------------------------------------------------ the end
    def flush(self) -> None:
        """Write every record still held back (the last step's in deferred mode, a validation in progress)."""
        self.steps.write_unwritten()
        self.validation.flush(self.steps.step)
        self.spool.flush()

    def finish(self) -> dict[str, Any]:
        """Flush what is pending and return the run's summary (throughput, memory, observed dtypes)."""
        self.flush()
        summary = {"observe_profile": self.profile,
                   "last_step": self.steps.step, "skipped_steps": self.steps.skipped,
                   "start_step_source": self.steps.start_source,
                   "threads_at_end": torch.get_num_threads(),
                   "observed_dtypes": dict(self.dtypes.counts),
                   "unattributed_samples": self.samples.unattributed, **self.clock.throughput(self.steps.step),
                   **self.memory.read()}
        if self.turns is not None:
            summary.update(self.turns.summary())
        if self.ckpts is not None:
            summary["checkpoints"] = self.ckpts.listing(self.steps.step)
        if self.profile == "timing":
            summary["observed_dtypes_scope"] = "training forwards of the warm-up steps"
            del summary["unattributed_samples"]        # training forwards' ids are not recovered
        self.detach()
        return summary


def rng_digest() -> int:
    """A fingerprint of torch's CPU RNG state (what dropout draws from on CPU): equal states, equal digests."""
    return zlib.crc32(torch.get_rng_state().numpy().tobytes())
