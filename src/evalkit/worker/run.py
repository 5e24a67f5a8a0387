"""One training worker (one rank): build the task, attach observers, hand the job to the adapter.

Started by the controller as `python -m evalkit.worker <job_dir>` with the variables of its wrapper's documented
launcher (`evalkit.launchers`: none under plain `python`, torchrun's, Lightning's, MPI's ...) and evalkit's own view of
its rank (EVALKIT_RANK, EVALKIT_LOCAL_RANK, EVALKIT_WORLD_SIZE), which it reads: a wrapper may rewrite the
launcher's in its process. It talks
to nobody but its spool: records, its summary, the wrapper's versions (its trainer's `requirements`), the adapter's
effective config, and on failure its traceback.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from typing import Any

import numpy as np
import torch
from hydra.utils import get_class, get_method
from omegaconf import DictConfig, OmegaConf

from evalkit import launchers, names
from evalkit.contract.adapter import Adapter, AdapterUnavailable, Precision, Recipe, TrainJob
from evalkit.contract.adapter_class import NotAnAdapter, not_an_adapter
from evalkit.contract.effective import EffectiveConfig
from evalkit.observe.deprecations import DeprecationRecorder
from evalkit.observe.memory import current_rss
from evalkit.observe.observer import Observer
from evalkit.secrets import redact
from evalkit.spool import SpoolWriter
from evalkit.tasks.catalog import Task
from evalkit.tasks.datasets import describe as describe_data
from evalkit.tasks.schemas import builder_arguments
from evalkit.trainers import modules, not_installed, requirements, versions
from evalkit.worker.instruments import Instruments
from evalkit.worker.optim import make_optimizer, make_scheduler
from evalkit.worker.startup import StartupMarks


def resolve_device(hardware: str, local_rank: int) -> torch.device:
    if hardware == "auto":
        hardware = "cuda" if torch.cuda.is_available() else "cpu"
    if hardware == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("hardware=cuda but torch sees no CUDA device; use hardware=cpu or hardware=auto")
        count = torch.cuda.device_count()
        if local_rank >= count:
            raise RuntimeError(f"rank with LOCAL_RANK={local_rank} needs its own CUDA device, {count} visible "
                               "(NCCL refuses two ranks on one device); lower distributed.world_size")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def build_task(cfg: DictConfig) -> Task:
    """The task's builder called with the seed and its keyword arguments (`evalkit.tasks.schemas`)."""
    seed_everything(cfg.seed)
    return get_method(cfg.task._target_)(cfg.seed, **builder_arguments(cfg.task))


def load_adapter(trainer: DictConfig) -> Adapter:
    """The adapter instance, or AdapterUnavailable naming the extra when its wrapper is not installed (checked
    here, before constructing it, from the trainer's needs in `evalkit.trainers`)."""
    missing = not_installed(trainer)
    if missing:
        raise AdapterUnavailable(missing)
    try:
        cls = get_class(trainer._target_)
    except Exception as exc:  # hydra wraps the ImportError; find the missing module in the chain
        module = _missing_module(exc)
        if module and requirements(trainer):
            raise AdapterUnavailable(not_installed(trainer, module)) from exc
        why = _import_failure(trainer._target_, exc)
        if why is not None:
            raise AdapterModuleError(why) from exc
        raise
    problem = not_an_adapter(cls, trainer._target_)
    if problem:
        raise NotAnAdapter(problem)
    return cls(mode=trainer.mode, options=OmegaConf.to_container(trainer.options, resolve=True))


class AdapterModuleError(ImportError):
    """The adapter's own module failed as it was imported (the message names the error and its line)."""


def _import_failure(target: str, exc: BaseException) -> str | None:
    """What went wrong as Hydra imported `target`, in one line with the fix: a class its module does not have
    (with the nearest name), or an error the module's own code raised (with its line); None for a module that
    was not found (`error_summary` names it)."""
    root = exc
    while (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    if root is exc or isinstance(root, ImportError):
        return None
    frames = traceback.extract_tb(root.__traceback__)
    module, _, name = target.rpartition(".")
    if isinstance(root, AttributeError) and frames and f"{os.sep}hydra{os.sep}" in frames[-1].filename:
        known = [n for n, v in vars(sys.modules.get(module) or object).items() if isinstance(v, type)]
        close = difflib.get_close_matches(name, known, n=1)
        return (f"trainer._target_={target}: module {module} has no {name}: "
                + (f"did you mean trainer._target_={module}.{close[0]}?" if close else "name its adapter class"))
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return (f"trainer._target_={target}: its module raised {type(root).__name__}: "
            f"{' '.join(str(root).split())[:300]}{where} as it was imported: fix that line of the module")


def _missing_module(exc: BaseException | None) -> str | None:
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError):
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


def hand_over(task: Task, cfg: DictConfig) -> None:
    """The model in the mode `train.model_mode` says it reaches the wrapper in: eval, as `from_pretrained` returns
    a model (the wrapper or the quick start's code must switch it to train mode), or train (as built)."""
    task.model.train(cfg.train.get("model_mode", "train") != "eval")


def make_job(cfg: DictConfig, task: Task, device: torch.device, spec: dict[str, Any],
             log_value: Any = None) -> TrainJob:
    train, prec = cfg.train, cfg.precision
    rank, local_rank, world_size = launchers.rank_of()
    dtype = getattr(torch, prec.autocast_dtype) if prec.autocast_dtype else None
    return TrainJob(
        task=task,
        make_optimizer=lambda params: make_optimizer(params, train),
        make_scheduler=lambda optimizer: make_scheduler(optimizer, train),
        precision=Precision(prec.name, dtype, prec.grad_scaler),
        device=device, batch_size=train.batch_size, grad_accum=train.grad_accum,
        grad_clip=train.grad_clip, max_steps=train.max_steps, val_every=train.val_every,
        ckpt_every=train.ckpt_every, ckpt_dir=spec["ckpt_dir"], resume_from=spec.get("resume_from"),
        seed=cfg.seed, rank=rank, world_size=world_size, local_rank=local_rank,
        nnodes=int(OmegaConf.select(cfg, "distributed.nnodes", default=1) or 1), mode=cfg.trainer.mode,
        num_workers=train.num_workers, compile=bool(train.get("compile", False)),
        recipe=Recipe.of(train), **({"log_value": log_value} if log_value is not None else {}),
    )


def run(job_dir: str) -> int:
    with open(os.path.join(job_dir, names.JOB_FILE)) as fh:
        spec = json.load(fh)
    cfg = OmegaConf.create(spec["config"])
    rank = launchers.rank_of()[0]
    spool = SpoolWriter(spec["spool_dir"], rank)
    spool.write_json(names.launch_file(rank), launchers.received())   # before a wrapper rewrites any
    startup = StartupMarks()
    startup.mark("torch_imported")
    deprecations = DeprecationRecorder() if cfg.observe.get("deprecations") else contextlib.nullcontext()
    try:
        with deprecations:
            return _run(cfg, spec, job_dir, rank, spool, startup, deprecations)
    finally:
        spool.close()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _run(cfg: DictConfig, spec: dict[str, Any], job_dir: str, rank: int, spool: SpoolWriter,
         startup: StartupMarks, deprecations: Any) -> int:
    """One rank's story: the wrapper imported, the task built, the instruments attached, the adapter's fit under
    them, the summary written; any failure recorded with the step it came at."""
    observer: Observer | None = None
    try:
        adapter = _import_wrapper(cfg, rank, spool, startup)
        _, local_rank, world_size = launchers.rank_of()
        device = resolve_device(cfg.hardware.device, local_rank)
        if device.type == "cuda":
            torch.cuda.set_device(device)   # before any CUDA work: observers' events, NCCL, RNG use the current one
        warm_up_torch()
        get_method(cfg.task._target_)   # the task's module and its imports (transformers for hf_causal_lm) now too
        import_rss = current_rss()
        task = build_task(cfg)
        if rank == 0:
            spool.write_json(names.TASK_INFO_FILE, task_info(cfg, task))
        instruments = Instruments.attach(cfg, spec, job_dir, rank, spool, task, device, import_rss, world_size)
        observer = instruments.observer
        if cfg.distributed.init_by == "evalkit":
            init_process_group(device)
        hand_over(task, cfg)
        window_done = instruments.fit(adapter, make_job(cfg, task, device, spec, observer.record_value))
        summary = observer.finish()
        if window_done:
            summary["ended_by"] = "turn table: timed window complete"
        elif getattr(adapter, "ended_by", None):      # a stop the adapter declares (a stop callback, a time limit)
            summary["ended_by"] = str(adapter.ended_by)
        startup.mark("first_forward", observer.first_forward_wall)
        startup.mark("first_step", observer.first_step_wall)
        if isinstance(deprecations, DeprecationRecorder):
            summary["deprecations"] = [w.as_dict() for w in deprecations.summary()]
        spool.write_json(names.summary_file(rank), {"rank": rank, "device": str(device), **summary,
                                                    **startup.summary(), **placement(), **instruments.summary()})
        if rank == 0:
            spool.write_json(names.EFFECTIVE_CONFIG_FILE, redact(effective_config(adapter, window_done)))
            if instruments.profiled is not None and instruments.profiled.result is not None:
                spool.write_json(names.CALL_PROFILE_FILE, instruments.profiled.result)
        short = stopped_short(summary, cfg.train.max_steps)
        if short:
            raise StoppedShort(short)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then reported by exit code
        if observer is not None:
            with contextlib.suppress(Exception):    # the steps seen so far; a broken device may refuse
                observer.flush()
        with contextlib.suppress(OSError):          # a full device refuses them (SpoolFull): the failure says so
            spool.flush()
        step = observer.steps.step if observer is not None else 0
        if isinstance(exc, SystemExit):             # the exit status the wrapper asked for: evidence
            with contextlib.suppress(OSError):
                spool.write_json(names.summary_file(rank), {"rank": rank, "system_exit": system_exit(exc),
                                                            "last_step": step})
        with open(os.path.join(spec["spool_dir"], names.error_file(rank)), "w") as fh:
            fh.write(f"{error_summary(exc, step=step, max_steps=cfg.train.max_steps)}\n\n{traceback.format_exc()}")
        if not isinstance(exc, StoppedShort):       # its one line says it all
            traceback.print_exc()
        return 3 if isinstance(exc, AdapterUnavailable) else 1


def _import_wrapper(cfg: DictConfig, rank: int, spool: SpoolWriter, startup: StartupMarks) -> Adapter:
    """The adapter, with the wrapper's modules imported now (their memory is not training memory) and, on rank 0,
    the versions recorded."""
    if cfg.hardware.threads:     # fixed by the controller for every arm, before any wrapper is imported
        torch.set_num_threads(cfg.hardware.threads)
    adapter = load_adapter(cfg.trainer)
    for module in modules(cfg.trainer):
        importlib.import_module(module)
    startup.mark("wrapper_imported")
    if rank == 0:
        spool.write_json(names.VERSIONS_FILE, {**versions(cfg.trainer), "torch": torch.__version__})
    return adapter


def task_info(cfg: DictConfig, task: Task) -> dict[str, Any]:
    """The task's metric and how its data was made (rank 0's `task.json`)."""
    return {"metric": task.metric.name, "higher_is_better": task.metric.higher_is_better,
            "scale": task.metric.scale,
            "datasets": describe_data(task, cfg.task._target_, cfg.seed, builder_arguments(cfg.task))}


def placement() -> dict[str, Any]:
    """The CPUs this rank ran on, and whether evalkit pinned it there."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpus": cpus, "cpus_pinned": bool(os.environ.get(names.CPUS_ENV) or os.environ.get(names.CPUS_AT_TURN_ENV))}


def effective_config(adapter: Adapter, window_done: bool) -> dict[str, Any]:
    """The adapter's effective config as recorded (`EffectiveConfig.as_json`); after a fit the turn table ended
    (`window_done`), what it can still say (a wrapper stopped mid-fit may not have it all), else the reason it
    cannot."""
    try:
        return EffectiveConfig.of(adapter.effective_config()).as_json()
    except Exception as exc:  # noqa: BLE001 - a timed job's measurement does not depend on it
        if not window_done:
            raise
        return {"unavailable": f"the fit was ended by the turn table: {type(exc).__name__}: {exc}"[:300]}


def init_process_group(device: torch.device) -> None:
    """`distributed.init_by=evalkit`: the process group exists before the adapter's `fit` (as under a launcher or
    a platform that creates it); the adapter must use it, not create its own."""
    rank, _, world_size = launchers.rank_of()
    # MASTER_ADDR/PORT: every launcher of several ranks sets them
    if world_size > 1 and not torch.distributed.is_initialized():
        if device.type == "cuda":
            torch.distributed.init_process_group("nccl", device_id=device, rank=rank, world_size=world_size)
        else:
            torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size)


# ATen's grain (at::internal::GRAIN_SIZE): an elementwise op over `threads` times twice this many elements gives
# every intra-op thread a chunk.
_GRAIN = 32768


def warm_up_torch() -> None:
    """One tiny forward, backward and optimizer step before the import footprint is read: torch's lazily created
    thread pools and allocator arenas then count as footprint in every arm alike, not as the training memory of
    whichever arm happens to create them later (a wrapper's imports create some of them, the baseline's first
    step the rest).

    Then one elementwise op split across every intra-op thread, so that the process's first parallel region is
    this one: with torch 2.13's CPU build (GNU OpenMP) the first parallel region of a process computes one
    thread's chunk of `torch.tanh` up to 5e-5 off in some processes (5 of 60 fresh interpreters, 20 % of forked
    workers here; `scripts/first_parallel_region.py` measures it), and every later call agrees bit for bit. Left
    to the job, that region was the task's data (mlp_regression's targets are a tanh): one job in a few dozen
    trained on targets that differ from its seed's, its losses ~3e-5 apart from an identical job's."""
    layer = torch.nn.Linear(64, 64)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.0)
    torch.nn.functional.gelu(layer(torch.ones(32, 64))).sum().backward()
    optimizer.step()
    del layer, optimizer
    torch.tanh(torch.zeros(torch.get_num_threads() * 2 * _GRAIN))


def system_exit(exc: SystemExit) -> dict[str, Any]:
    """What `sys.exit(code)` in the wrapper would have ended its process with, had evalkit's worker not caught it:
    the exit status (None: 0; a message: printed, then 1) and the error it was raised while handling, if any."""
    code = exc.code
    status = 0 if code is None else code if isinstance(code, int) else 1
    during = exc.__context__
    return {"status": status, "during": f"{type(during).__name__}: {during}"[:300] if during is not None else None}


class StoppedShort(RuntimeError):
    """The adapter's fit returned before `train.max_steps` without a stop it declared (`ended_by`)."""


def stopped_short(summary: dict[str, Any], max_steps: int) -> str | None:
    """Why a fit that returned normally did not train the run asked for, or None: fewer optimizer steps than
    `max_steps` (steps the GradScaler skipped count as taken) and no `ended_by`."""
    last, skipped = summary.get("last_step", 0), summary.get("skipped_steps", 0)
    if summary.get("ended_by") or last + skipped >= max_steps:
        return None
    if not last and sum((summary.get("observed_dtypes") or {}).values()):
        return None     # it trained, through no torch.optim step evalkit can count: the semantic probe says so
    fresh = summary.get("start_step_source") in (None, "fresh start")
    trained = f"trained {last} of {max_steps} optimizer steps" if fresh else f"stopped at step {last} of {max_steps}"
    return (f"{trained}: {names.FIT_RETURNED_SHORT}={max_steps} without a stop it declared; "
            "an adapter trains to job.max_steps, or sets its ended_by to the reason when it stops early on purpose "
            "(a stop callback, a time limit)")


def error_summary(exc: BaseException, limit: int = 600, *, step: int | None = None,
                  max_steps: int | None = None) -> str:
    """One line: the error and, when its message does not already say it, the root cause it came from
    (`ImportError: Error loading 'x.Adapter': ... No module named 'x'`). A `SystemExit` says what it is: the
    adapter (or its wrapper) exited the process at `step`."""
    if isinstance(exc, StoppedShort):
        return " ".join(str(exc).split())[:limit]
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit) and step is not None:
        text += (f" (the adapter exited the process with sys.exit({exc.code!r}) at step {step}"
                 f"{f' of {max_steps}' if max_steps else ''}, before its fit returned)")
    root, seen = exc, {id(exc)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        root = nxt
        seen.add(id(root))
    if root is not exc and str(root) and str(root) not in text:
        text += f" (caused by {type(root).__name__}: {root})"
    return " ".join(text.split())[:limit]


def die_with_controller() -> None:
    """End this worker when the controller that started it dies, even by SIGKILL: an orphan would train
    on unsupervised while its run stays RUNNING. Linux: the kernel's parent-death signal; elsewhere a
    thread watching the parent's pid."""
    expected = int(os.environ.get(names.CONTROLLER_PID_ENV, "0") or 0)
    if not expected:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        def watch() -> None:
            while os.getppid() == expected:
                time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, name="evalkit-controller-watch", daemon=True).start()
    if os.getppid() != expected:      # the controller died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)

