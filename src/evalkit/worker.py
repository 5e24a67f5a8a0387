"""One training worker (one rank): build the task, attach observers, hand the job to the adapter.

Started by the controller as `python -m evalkit.worker <job_dir>` with torch elastic environment
variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID, ...). It talks
to nobody but its spool: records, its summary, the adapter's versions and effective config, and on
failure its traceback.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import traceback
from typing import Any

import numpy as np
import torch
from hydra.utils import get_class, get_method
from omegaconf import DictConfig, OmegaConf

from evalkit.contract import Adapter, AdapterUnavailable, Precision, TrainJob
from evalkit.observe import Observer
from evalkit.optim import make_optimizer, make_scheduler
from evalkit.spool import SpoolWriter
from evalkit.tasks import Task

JOB_FILE = "job.json"


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
    seed_everything(cfg.seed)
    return get_method(cfg.task._target_)(cfg.task, cfg.seed)


def load_adapter(trainer: DictConfig) -> Adapter:
    try:
        cls = get_class(trainer._target_)
    except Exception as exc:  # hydra wraps the ImportError; find the missing module in the chain
        missing = _missing_module(exc)
        if missing and trainer.extra:
            raise AdapterUnavailable(
                f"trainer '{trainer.name}' needs the '{missing}' package: "
                f"pip install -e '.[{trainer.extra}]'") from exc
        raise
    return cls(mode=trainer.mode, options=OmegaConf.to_container(trainer.options, resolve=True))


def _missing_module(exc: BaseException | None) -> str | None:
    while exc is not None:
        if isinstance(exc, ModuleNotFoundError):
            return exc.name
        exc = exc.__cause__ or exc.__context__
    return None


def make_job(cfg: DictConfig, task: Task, device: torch.device, spec: dict[str, Any]) -> TrainJob:
    train, prec = cfg.train, cfg.precision
    dtype = getattr(torch, prec.autocast_dtype) if prec.autocast_dtype else None
    return TrainJob(
        task=task,
        make_optimizer=lambda params: make_optimizer(params, train),
        make_scheduler=lambda optimizer: make_scheduler(optimizer, train),
        precision=Precision(prec.name, dtype, prec.grad_scaler),
        device=device, batch_size=train.batch_size, grad_accum=train.grad_accum,
        grad_clip=train.grad_clip, max_steps=train.max_steps, val_every=train.val_every,
        ckpt_every=train.ckpt_every, ckpt_dir=spec["ckpt_dir"], resume_from=spec.get("resume_from"),
        seed=cfg.seed, rank=int(os.environ.get("RANK", 0)), world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)), mode=cfg.trainer.mode,
        options=OmegaConf.to_container(cfg.trainer.options, resolve=True), num_workers=train.num_workers,
    )


def run(job_dir: str) -> int:
    with open(os.path.join(job_dir, JOB_FILE)) as fh:
        spec = json.load(fh)
    cfg = OmegaConf.create(spec["config"])
    rank = int(os.environ.get("RANK", 0))
    spool = SpoolWriter(spec["spool_dir"], rank)
    observer: Observer | None = None
    try:
        if cfg.hardware.threads:
            torch.set_num_threads(cfg.hardware.threads)
        adapter = load_adapter(cfg.trainer)
        if rank == 0:
            spool.write_json("versions.json", {**adapter.versions(), "torch": torch.__version__})
        device = resolve_device(cfg.hardware.device, int(os.environ.get("LOCAL_RANK", 0)))
        if device.type == "cuda":
            torch.cuda.set_device(device)   # before any CUDA work: observers' events, NCCL, RNG use the current one
        task = build_task(cfg)
        if rank == 0:
            spool.write_json("task.json", {"metric": task.metric.name,
                                           "higher_is_better": task.metric.higher_is_better})
        observer = Observer(task, spool, device, warmup_steps=cfg.observe.warmup_steps,
                            sample_ids=cfg.observe.sample_ids, record_params=cfg.observe.params).attach()
        adapter.fit(make_job(cfg, task, device, spec))
        spool.write_json(f"summary_rank{rank}.json", {"rank": rank, "device": str(device), **observer.finish()})
        if rank == 0:
            spool.write_json("effective_config.json", adapter.effective_config())
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is recorded, then reported by exit code
        if observer is not None:
            with contextlib.suppress(Exception):    # the steps seen so far; a broken device may refuse
                observer.flush()
        spool.flush()
        with open(os.path.join(spec["spool_dir"], f"error_rank{rank}.txt"), "w") as fh:
            fh.write(f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
        traceback.print_exc()
        return 3 if isinstance(exc, AdapterUnavailable) else 1
    finally:
        spool.close()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1]))
