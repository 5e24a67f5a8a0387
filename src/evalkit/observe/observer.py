"""Framework-neutral observers: what a wrapper actually did, read from torch hooks, not from its logs.

Hooks: forward pre/post hooks on the task's model (sample indices, grad/train mode, compute dtype,
validation metrics computed from the outside), a forward hook on the task's loss module (the training
loss of each micro-batch), torch's global optimizer step pre/post hooks (every optimizer in the
process: LR per group, gradient norm, loss scale, step timing), and two registrations on torch base
classes (`LRScheduler.step`, `GradScaler.scale`) so the observer can count scheduler steps and read the
loss scale of schedulers and scalers it did not create. Nothing here touches a wrapper's internals.

Records go to the spool once per optimizer step. On CUDA, step ends are CUDA events read once at the end.
"""
from __future__ import annotations

import math
import time
import weakref
from collections import Counter
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from evalkit.observe.memory import PeakWindow, read_peak, reset_peak
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import Task
from evalkit.tasks.order import FINGERPRINT_WIDTH, SampleIndex

_SCHEDULERS: "weakref.WeakSet[Any]" = weakref.WeakSet()
_SCALERS: "weakref.WeakSet[Any]" = weakref.WeakSet()


_SCALER_UPDATE_LISTENERS: list[Any] = []


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


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def _to_floats(values: list[torch.Tensor | None]) -> list[float | None]:
    """Scalar tensors to floats with one device sync at most (CPU tensors convert directly)."""
    on_device = [v for v in values if isinstance(v, torch.Tensor) and v.device.type != "cpu"]
    moved = iter(torch.stack([v.float().reshape(()) for v in on_device]).tolist()) if on_device else iter(())
    return [v if v is None or isinstance(v, float) else float(v) if v.device.type == "cpu" else next(moved)
            for v in values]


def _global_grad_norm(optimizer: torch.optim.Optimizer) -> torch.Tensor | float | None:
    """The global L2 norm of the gradients the optimizer holds (on CPU summed in Python: fewer torch calls)."""
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if not grads:
        return None
    norms = torch._foreach_norm(grads)
    if grads[0].device.type == "cpu":
        return math.sqrt(sum(float(n) ** 2 for n in norms))
    return torch.linalg.vector_norm(torch.stack(norms))


def resumed_step(optimizer: torch.optim.Optimizer) -> tuple[int, str]:
    """Optimizer steps already taken before this process's first one, read off the optimizer's own
    state (Adam-family keep a per-parameter step count) or else the schedulers' step counts. A resumed
    run whose wrapper did not restore that state starts again at step 1, which the records then show."""
    for state in optimizer.state.values():
        if "step" in state:
            return int(state["step"]), "optimizer state"
    # Both counters, the smaller one: Ignite's LRScheduler handler advances `last_epoch` without calling
    # step() (per micro-batch), Accelerate's scheduler wrapper bumps `_step_count` on non-sync micro-batches;
    # a restored scheduler state has both equal to the steps taken.
    counts = [min(s.last_epoch, s._step_count - 1) for s in _SCHEDULERS
              if getattr(s, "optimizer", None) is optimizer]
    if counts:
        return max(counts), "scheduler step count"
    return 0, "fresh start"


def _compute_layer(model: torch.nn.Module) -> torch.nn.Module:
    layers = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    return next((m for m in model.modules() if isinstance(m, layers)), model)


def _host_copy(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """`tensor` copied to the host without waiting for the device (pinned memory on CUDA) and the event to
    wait on before reading it (None on the CPU, where the copy is already done)."""
    if tensor.device.type != "cuda":
        return tensor.detach().clone(), None
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor.detach(), non_blocking=True)
    done = torch.cuda.Event()
    done.record(torch.cuda.current_stream(tensor.device))
    return host, done


class _LazyFloats:
    """Scalars (tensors, floats or None) captured now, read as floats later with one wait at most: for
    the device's work up to the capture, not for what was queued since."""

    def __init__(self, values: list[torch.Tensor | float | None]):
        # CPU tensors convert now (no device to wait for); device tensors go to the host in one copy.
        self.values = [float(v) if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v for v in values]
        self.slots = [i for i, v in enumerate(self.values) if isinstance(v, torch.Tensor)]
        self.host, self.done = None, None
        if self.slots:
            device = self.values[self.slots[0]].device
            self.host, self.done = _host_copy(torch.stack([self.values[i].detach().float().reshape(()).to(device)
                                                           for i in self.slots]))

    def get(self) -> list[float | None]:
        if self.done is not None:
            self.done.synchronize()
        out = list(self.values)
        for i, value in zip(self.slots, self.host.tolist() if self.host is not None else []):
            out[i] = value
        return out


class _DeferredIds:
    """A training micro-batch's sample ids, looked up when its step's record is written: its first values
    are copied to the host without waiting for the device, so the observer adds no device sync per
    micro-batch."""

    def __init__(self, index: SampleIndex, rows: torch.Tensor):
        self.index, self.n = index, rows.shape[0]
        self.host, self.done = _host_copy(rows.reshape(rows.shape[0], -1)[:, :FINGERPRINT_WIDTH])

    def resolve(self) -> list[int]:
        if self.done is not None:
            self.done.synchronize()
        return self.index.lookup(self.host, "train")


class Observer:
    """Watches one rank's training from the outside (module, loss, optimizer, scheduler and scaler hooks) and
    writes what it sees to the spool.

    `deferred` (default: on CUDA): never wait for the device. A step's values (loss, grad norm, loss scale,
    sample ids) are copied to the host without waiting and its records are written when the next step ends
    (or at `finish`), by which time the copy is done; waiting at each step would drain the device's queue
    and expose CPU overhead (a wrapper's) that the GPU's work normally hides. Off, every record is written
    when its step ends.
    """

    def __init__(self, task: Task, spool: SpoolWriter, device: torch.device, *, warmup_steps: int,
                 sample_ids: bool = True, record_params: bool = False, deferred: bool | None = None):
        self.task, self.spool, self.device = task, spool, device
        self.warmup_steps = warmup_steps
        self.index = SampleIndex(task.train_set.tensors[0], task.val_set.tensors[0]) if sample_ids else None
        self.deferred = device.type == "cuda" if deferred is None else deferred
        self._unwritten: tuple[dict, list[dict], _LazyFloats] | None = None   # deferred: the last step's
        self.record_params = record_params
        self.step = 0                       # optimizer steps completed, counted from the start step
        self._start_source: str | None = None
        self._micro: list[dict] = []        # micro-batches of the step in progress
        self._micro_losses: list[torch.Tensor] = []
        self._val: dict[str, float] | None = None
        self._val_in_interval = False
        self._pending_ids: list[int] | _DeferredIds | None = None
        self._compute_dtype: torch.dtype | None = None
        self._pre: dict[str, Any] = {}
        self._t_prev = time.perf_counter()
        self._cuda_events: list[Any] = []
        self._intervals: list[tuple[int, float, int, bool]] = []   # (step, seconds, samples, validation ran)
        self._dtypes: Counter = Counter()
        self._unattributed = 0
        self._peak_window: PeakWindow | None = None
        self._handles: list[Any] = []

    # ------------------------------------------------------------------ attach / detach
    def attach(self) -> "Observer":
        _register_on_call(LRScheduler, "step", _SCHEDULERS)
        _register_on_call(torch.amp.GradScaler, "scale", _SCALERS)
        _register_on_call(torch.amp.GradScaler, "update", _SCALERS, _SCALER_UPDATE_LISTENERS)
        _SCALER_UPDATE_LISTENERS.append(self._on_scaler_update)
        model, loss_fn = self.task.model, self.task.loss_fn
        self._handles = [
            # The compute dtype is read off the first Linear/Conv layer: a wrapper may cast the model's
            # outputs back to fp32 (Accelerate does), which would hide the precision it ran in.
            _compute_layer(model).register_forward_hook(self._on_compute_layer),
            model.register_forward_pre_hook(self._on_forward_pre, with_kwargs=True),
            model.register_forward_hook(self._on_forward, with_kwargs=True),
            loss_fn.register_forward_hook(self._on_loss),
            register_optimizer_step_pre_hook(self._on_step_pre),
            register_optimizer_step_post_hook(self._on_step_post),
        ]
        return self

    def detach(self) -> None:
        if self._on_scaler_update in _SCALER_UPDATE_LISTENERS:
            _SCALER_UPDATE_LISTENERS.remove(self._on_scaler_update)
        for handle in self._handles:
            handle.remove()
        self._handles = []

    # ------------------------------------------------------------------ forward passes
    def _on_forward_pre(self, module, args, kwargs) -> None:
        rows = _first_tensor(args) if args else _first_tensor(kwargs)
        training = torch.is_grad_enabled()
        if training and self._val is not None:
            self._flush_val()
        self._pending_ids = None
        if self.index is not None and rows is not None:
            self._pending_ids = (_DeferredIds(self.index, rows) if training and self.deferred
                                 else self.index.lookup(rows, "train" if training else "val"))

    def _on_compute_layer(self, module, args, output) -> None:
        self._compute_dtype = output.dtype if isinstance(output, torch.Tensor) else None

    def _on_forward(self, module, args, kwargs, output) -> None:
        out = _first_tensor(output)
        dtype = self._compute_dtype or (out.dtype if out is not None else None)
        dtype = str(dtype).removeprefix("torch.") if dtype is not None else "none"
        self._compute_dtype = None
        ids = self._pending_ids or []
        if torch.is_grad_enabled():
            self._dtypes[dtype] += 1
            if isinstance(ids, _DeferredIds):
                n = ids.n
            else:
                n = len(ids) if ids else (out.shape[0] if out is not None else 0)
                self._unattributed += sum(1 for i in ids if i < 0)
            self._micro.append({"kind": "micro", "i": len(self._micro), "n": n,
                                "train_mode": module.training, "grad": True, "dtype": dtype, "ids": ids})
        elif out is not None and not isinstance(ids, _DeferredIds):
            self._accumulate_val(module, out, ids, dtype)

    def _on_loss(self, module, args, output) -> None:
        if torch.is_grad_enabled() and isinstance(output, torch.Tensor) and output.numel() == 1:
            self._micro_losses.append(output.detach())

    def _accumulate_val(self, module, out: torch.Tensor, ids: list[int], dtype: str) -> None:
        """Validation metrics from the outside: targets looked up by the recovered sample indices."""
        self._val_in_interval = True
        val = self._val = self._val or {"sum": 0.0, "count": 0, "loss_sum": 0.0, "batches": 0,
                                        "unattributed": 0, "train_mode": 0}
        val["batches"] += 1
        val["train_mode"] += int(module.training)
        if not ids or min(ids) < 0:
            val["unattributed"] += out.shape[0]
            return
        target = self.task.val_set.tensors[1][ids].to(out.device)
        total, count = self.task.metric.batch_stats(out, target)
        loss = float(self.task.loss_fn.forward(out.float(), target))   # .forward: no hooks, not a training loss
        val["sum"] += total
        val["count"] += count
        val["loss_sum"] += loss * count

    def _flush_val(self) -> None:
        val, self._val = self._val, None
        if val is None:
            return
        metric = self.task.metric
        record = {"kind": "val", "step": self.step, "metric": metric.name, "finalize": metric.finalize, **val}
        if val["count"]:
            record["value"] = metric.value(val["sum"], val["count"])
            record["loss"] = val["loss_sum"] / val["count"]
        self.spool.add(record)
        self.spool.flush()

    # ------------------------------------------------------------------ optimizer steps
    def _on_scaler_update(self, scaler) -> None:
        """GradScaler.update after micro-batches but no optimizer step: the scaler skipped an inf/nan step.
        Its micro-batches are recorded as skipped, not counted into the next step."""
        if not self._micro or not scaler.is_enabled():
            return
        self._write_unwritten()
        losses = _to_floats(self._micro_losses)
        self._resolve_ids(self._micro)
        for micro, loss in zip(self._micro, losses):
            self.spool.add({**micro, "step": self.step, "loss": loss, "skipped": True})
        scale = _to_floats([scaler._scale])[0] if scaler._scale is not None else None
        self.spool.add({"kind": "skip", "after_step": self.step, "micro_batches": len(self._micro),
                        "loss_scale": scale, "wall": time.time()})
        self.spool.flush()
        self._micro, self._micro_losses = [], []

    def _resolve_ids(self, micros: list[dict]) -> None:
        """Deferred sample ids looked up (their copies to the host are waited for)."""
        for micro in micros:
            if isinstance(micro["ids"], _DeferredIds):
                micro["ids"] = micro["ids"].resolve()
                self._unattributed += sum(1 for i in micro["ids"] if i < 0)

    def _on_step_pre(self, optimizer, args, kwargs) -> None:
        if self._start_source is None:
            self.step, self._start_source = resumed_step(optimizer)
        scale = next((s._scale for s in _SCALERS if s.is_enabled() and s._scale is not None), None) \
            if _SCALERS else None
        self._pre = {"lr": [g["lr"] for g in optimizer.param_groups], "scale": scale,
                     "sched_steps": sum(max(0, s._step_count - 1) for s in _SCHEDULERS)}

    def _on_step_post(self, optimizer, args, kwargs) -> None:
        if self._val is not None:
            self._flush_val()
        now = time.perf_counter()
        self.step += 1
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            self._cuda_events.append(event)
        # The gradient norm is read after the step: a closure-based optimizer step (Lightning) runs the
        # backward inside step(), and torch's optimizers leave .grad untouched (clipping came before).
        pre, losses, micros = self._pre, self._micro_losses, self._micro
        samples = sum(m["n"] for m in micros)
        record = {"kind": "step", "step": self.step, "t": now, "wall": time.time(), "dt": now - self._t_prev,
                  "lr": pre.get("lr", [g["lr"] for g in optimizer.param_groups]),
                  "micro_batches": len(micros), "loss_calls": len(losses), "samples": samples,
                  "sched_steps": pre.get("sched_steps", 0), "validated_before": self._val_in_interval}
        values = [_global_grad_norm(optimizer), pre.get("scale"), *losses]
        if self.deferred:
            self._write_unwritten()
            self._unwritten = (record, micros, _LazyFloats(values))
        else:
            self._write_step(record, micros, _to_floats(values))
        if self.record_params:
            self.spool.add({"kind": "params", "step": self.step,
                            "values": torch.cat([p.detach().float().reshape(-1).cpu()
                                                 for p in self.task.model.parameters()]).tolist()})
            self.spool.flush()
        self._intervals.append((self.step, now - self._t_prev, samples, self._val_in_interval))
        self._micro, self._micro_losses, self._pre, self._val_in_interval = [], [], {}, False
        if self.step == self._first_measured_step() - 1:
            self._peak_window = reset_peak(self.device)
        self._t_prev = time.perf_counter()

    def _write_step(self, record: dict, micros: list[dict], floats: list[float | None]) -> None:
        norm, scale, *loss_values = floats
        record.update(grad_norm=norm, loss_scale=scale,
                      loss=sum(loss_values) / len(loss_values) if loss_values else None)
        self._resolve_ids(micros)
        for i, micro in enumerate(micros):
            self.spool.add({**micro, "step": record["step"],
                            **({"loss": loss_values[i]} if i < len(loss_values) else {})})
        self.spool.add(record)
        self.spool.flush()

    def _write_unwritten(self) -> None:
        """Deferred mode: write the last step's records (waiting only for their values' copies)."""
        if self._unwritten is not None:
            record, micros, floats = self._unwritten
            self._unwritten = None
            self._write_step(record, micros, floats.get())

    def _first_measured_step(self) -> int:
        return (self._intervals[0][0] if self._intervals else self.step) + self.warmup_steps

    # ------------------------------------------------------------------ the end
    def flush(self) -> None:
        """Write every record still held back (the last step's in deferred mode, a validation in progress)."""
        self._write_unwritten()
        self._flush_val()
        self.spool.flush()

    def finish(self) -> dict[str, Any]:
        """Flush what is pending and return the run's summary (throughput, memory, observed dtypes)."""
        self.flush()
        summary = {"last_step": self.step, "start_step_source": self._start_source,
                   "observed_dtypes": dict(self._dtypes),
                   "unattributed_samples": self._unattributed, **self._throughput(),
                   **read_peak(self.device, self._peak_window)}
        self.detach()
        return summary

    def _throughput(self) -> dict[str, Any]:
        intervals = self._intervals
        if self.device.type == "cuda" and len(self._cuda_events) > 1:
            torch.cuda.synchronize(self.device)
            gpu = [a.elapsed_time(b) / 1000 for a, b in zip(self._cuda_events, self._cuda_events[1:])]
            intervals = [(s, t, n, v) for (s, _, n, v), t in zip(intervals[1:], gpu)]
        first = self._first_measured_step()
        window = [(t, n) for s, t, n, validated in intervals if s >= first and not validated]
        method = ("CUDA events between optimizer steps" if self.device.type == "cuda"
                  else "perf_counter between optimizer steps")
        if not window:
            return {"throughput_method": method, "window_steps": 0}
        seconds = sum(t for t, _ in window)
        times = sorted(t for t, _ in window)
        return {"samples_per_s": sum(n for _, n in window) / seconds, "steps_per_s": len(window) / seconds,
                "step_time_median_s": times[len(times) // 2], "window_steps": len(window),
                "throughput_method": f"{method}, steps after {self.warmup_steps} warm-up steps, "
                                     "intervals that ran validation excluded"}
