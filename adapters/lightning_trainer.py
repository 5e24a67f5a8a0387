"""Lightning `Trainer` + `LightningModule` on an evalkit task (`trainer=lightning`).

A thin `LightningModule` wraps evalkit's model (its training step calls evalkit's loss module, `configure_optimizers`
returns evalkit's optimizer and scheduler) and `Trainer.fit` runs the loop. Nothing is monkeypatched: only documented
`Trainer` flags, callbacks, `LightningModule` hooks and the resumable-DataLoader interface. evalkit starts every rank
with the variables Lightning's launcher gives them, so `LightningEnvironment` joins them instead of spawning.
- `aligned`: every Trainer knob touching the baseline's semantics set explicitly (`explicit_settings`); the final
  validation, when `max_steps` is not a multiple of `val_every`, is a `trainer.validate()` after `fit`.
- `defaults`: the Lightning pages of the installed version line for line (`quick_start`, `departures`).
What no documented option aligns: `DEVIATIONS`. The full record: docs/wrappers/lightning_trainer.md.
"""
from __future__ import annotations

import functools
import os
from typing import Any

import torch
from torch.utils.data import DataLoader

from evalkit import names
from evalkit.adapters.calls import Call, built
from evalkit.contract import Departure, Deviation, QuickStartPage, TrainJob, UnsupportedCombination, WrapperAdapter
from evalkit.contract.checkpoint import capture_rng, latest_checkpoint, restore_rng

PRECISIONS = {"fp32": "32-true", "bf16_mixed": "bf16-mixed", "fp16_mixed": "16-mixed"}
CKPT_SUFFIX = ".ckpt"
PRECISION_DOCS = "https://lightning.ai/docs/pytorch/stable/common/trainer.html#precision"   # the values it takes
LIGHTNING_VERSION = "2.6.6"        # the installed lightning whose pages defaults mode follows
LIGHTNING_DOCS = f"https://lightning.ai/docs/pytorch/{LIGHTNING_VERSION}"
# What the adapter's LightningModule and loaders do in aligned mode (explicit_settings, after the Trainer's flags).
ALIGNED_MODULE = {
    "lr_scheduler": {"interval": "step", "frequency": 1},
    "train_dataloader": "evalkit OrderedSampler (this rank's shard) in a DataLoader implementing "
                        "state_dict/load_state_dict (exact mid-epoch resume)",
    "val_dataloader": "job.val_loader() (evalkit ValSampler shard)",
    "seed_everything": "not called: evalkit seeded the process before building the task, as for "
                       "the baseline (re-seeding would shift the RNG stream)",
    "checkpoint_rng": "torch/python/numpy RNG saved in on_save_checkpoint, restored in on_load_checkpoint",
    "end_validation": "trainer.validate() after fit when the last step was not a validation step",
    "training_loss": "job.task.loss_fn(model(x), y) in training_step (Lightning divides by "
                     "accumulate_grad_batches)",
    "train_mode": "self.train() in on_train_start (Lightning keeps the mode the model was handed over in)",
}


# The Trainer setting that aligns each kind of semantic finding (probe codes, or their family before the dot),
# reported as `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "forward.before_training": "Trainer(num_sanity_val_steps=0)",
    "val.repeated": "Trainer(use_distributed_sampler=False) with a validation DataLoader over each rank's own shard "
                    "(no padding)",
    "micro.train_mode": "self.train() in the LightningModule's on_train_start (Lightning keeps the eval mode a "
                        "pretrained model arrives in, with a warning)",
    "val.cadence": "Trainer(val_check_interval=val_every * accumulate_grad_batches, check_val_every_n_epoch=None) "
                   "(counted in batches: still drifts where an epoch's batches are not a multiple of grad_accum)",
    "lr": "configure_optimizers returning {'lr_scheduler': {'scheduler': s, 'interval': 'step', 'frequency': 1}}",
    "sched": "configure_optimizers returning {'lr_scheduler': {'scheduler': s, 'interval': 'step', 'frequency': 1}}",
    "order": "Trainer(use_distributed_sampler=False) and a DataLoader over evalkit's sampler",
    "window.short_underscaled": "none with automatic optimization (each loss / accumulate_grad_batches); manual "
                                "optimization can divide by the window's actual size",
    "loss_norm": "none with automatic optimization (each training_step loss / accumulate_grad_batches, ranks "
                 "averaged by DDP); manual optimization can weight each micro-batch by its tokens over the window's "
                 "on all ranks",
    "batch.partial": "DataLoader(..., drop_last=True)",
    "clip": "Trainer(gradient_clip_val=max_norm, gradient_clip_algorithm='norm')",
}

def lightning_precision(job: TrainJob, mode: str) -> str:
    """The Lightning precision flag for evalkit's precision; refuse what Lightning would silently change."""
    if job.precision.name not in PRECISIONS:
        raise UnsupportedCombination(f"precision {job.precision.name!r} has no Lightning equivalent",
                                     UnsupportedCombination.DOCUMENTED, documented_at=PRECISION_DOCS)
    flag = PRECISIONS[job.precision.name]
    if flag == "16-mixed" and job.device.type == "cpu" and mode == "aligned":
        raise UnsupportedCombination(
            "lightning turns precision='16-mixed' into bf16-mixed on CPU; fp16_mixed cannot run on CPU",
            UnsupportedCombination.SUBSTITUTION)
    return flag


def _accelerator(job: TrainJob) -> str:
    return "gpu" if job.device.type == "cuda" else "cpu"


def _root_dir(job: TrainJob) -> str:
    """Lightning's own directory, beside evalkit's checkpoint directory."""
    return os.path.join(os.path.dirname(os.path.abspath(job.ckpt_dir)), names.LIGHTNING_DIR)


def _quick_start_loaders(job: TrainJob) -> tuple[DataLoader, DataLoader]:
    """The pages' `DataLoader(dataset)` and `DataLoader(valid_set)`, with the run's batch size (and workers)."""
    train_loader = DataLoader(job.task.train_set, batch_size=job.batch_size, num_workers=job.num_workers)
    return train_loader, DataLoader(job.task.val_set, batch_size=job.batch_size, num_workers=job.num_workers)


@functools.cache
def _classes():
    """The resumable DataLoader, the LightningModule and the callback (classes of an installed lightning, which the
    module imports only when it trains), built once: the module recognises the loader by its class."""
    loader = _resumable_loader_class()
    return loader, _module_class(loader), _final_checkpoint_class()


def _resumable_loader_class() -> type:
    class ResumableLoader(DataLoader):
        """evalkit's training order with the `state_dict`/`load_state_dict` interface Lightning documents for
        resuming mid-epoch (it saves the state in its checkpoint and restores it before iterating).

        The position is the number of micro-batches of the current epoch the training step consumed,
        reported by the module's `on_train_batch_start` (counting yielded batches would be off by
        Lightning's prefetch). `len()` stays the full epoch: Lightning counts the restored batches itself.
        """

        def __init__(self, job: TrainJob):
            super().__init__(job.task.train_set, batch_size=job.batch_size, sampler=job.train_sampler(),
                             drop_last=True, num_workers=job.num_workers, pin_memory=job.pin_memory,
                             generator=job.loader_generator())
            self.position = {"epoch": 0, "batch_in_epoch": 0}

        def __len__(self) -> int:
            return self.sampler.batches_per_epoch

        def consumed(self, epoch: int, batch_idx: int) -> None:
            self.position = {"epoch": epoch, "batch_in_epoch": batch_idx + 1}

        def state_dict(self) -> dict[str, int]:
            epoch, done = self.position["epoch"], self.position["batch_in_epoch"]
            if done >= self.sampler.batches_per_epoch:
                epoch, done = epoch + 1, 0
            return {"epoch": epoch, "batch_in_epoch": done}

        def load_state_dict(self, state: dict[str, int]) -> None:
            self.position = dict(state)
            self.sampler.set_epoch(state["epoch"])
            self.sampler.start_batch = state["batch_in_epoch"]

    return ResumableLoader


def _module_class(ResumableLoader: type) -> type:  # noqa: N803 - a class, named as the one it is
    import lightning as L

    class EvalkitModule(L.LightningModule):
        """Wraps evalkit's model instance (never a copy) and its loss module."""

        def __init__(self, job: TrainJob, aligned: bool, train_loader: Any):
            super().__init__()
            self.model = job.task.model
            self.loss_fn = job.task.loss_fn
            self._job, self._aligned, self._train_loader = job, aligned, train_loader
            self.last_val_step: int | None = None
            self.start_step: int | None = None   # set when training starts (None: fit had nothing to do)

        def forward(self, x):
            return self.model(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            if self._aligned:
                return self.loss_fn(self.model(x), y)
            loss = self.loss_fn(self.model(x), y)
            self.log("train_loss", loss)     # the quick start's per-step logging
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            out = self.model(x)
            if not self._aligned:
                self.log("val_loss", self.loss_fn(out, y))     # as the validation page writes it
                return
            # Lightning's own view of the validation loss (evalkit computes its metric from the outside).
            self.log("val_loss", self.loss_fn(out.float(), y), sync_dist=self._job.distributed,
                     batch_size=x.shape[0])

        def on_validation_epoch_end(self):
            self.last_val_step = self.trainer.global_step

        def configure_optimizers(self):
            optimizer = self._job.make_optimizer(self.model.parameters())
            scheduler = self._job.make_scheduler(optimizer)
            if self._aligned:
                return {"optimizer": optimizer,
                        "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}
            return {"optimizer": optimizer, "lr_scheduler": scheduler}   # Lightning's default: interval="epoch"

        def on_train_start(self):
            self.start_step = self.trainer.global_step   # restored by Lightning when resuming
            if self._aligned:
                # Lightning (>= 2.2) keeps the mode each submodule had when fit started (it warns "Found N module(s)
                # in eval mode at the start of training"): a model handed over in eval mode, as a pretrained one
                # arrives, would train in eval mode. The baseline calls model.train() before its loop.
                self.train()

        def on_train_batch_start(self, batch, batch_idx):
            if isinstance(self._train_loader, ResumableLoader):
                self._train_loader.consumed(self.trainer.current_epoch, batch_idx)

        def on_save_checkpoint(self, checkpoint):
            if self._aligned:
                checkpoint["evalkit_rng"] = capture_rng()

        def on_load_checkpoint(self, checkpoint):
            if self._aligned and "evalkit_rng" in checkpoint:
                restore_rng(checkpoint["evalkit_rng"])

    return EvalkitModule


def _final_checkpoint_class() -> type:
    import lightning as L

    class FinalCheckpoint(L.Callback):
        """Saves the last optimizer step's checkpoint (`trainer.save_checkpoint`) when the periodic
        `ModelCheckpoint` does not fall on it; same hook point as ModelCheckpoint, so it resumes the same way."""

        def __init__(self, job: TrainJob):
            self.job = job
            self.saved: list[str] = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            step = trainer.global_step
            if step != self.job.max_steps or (self.job.ckpt_every and step % self.job.ckpt_every == 0):
                return
            path = self.job.checkpoint_path(step, CKPT_SUFFIX)
            if path not in self.saved:
                trainer.save_checkpoint(path, weights_only=False)
                self.saved.append(path)

    return FinalCheckpoint


DEVIATIONS = (
    Deviation("window.short_underscaled", "the last window of an epoch whose batch count is not a multiple of "
              "grad_accum is shorter; Lightning divides its losses by accumulate_grad_batches (baseline: by the "
              "window's size)"),
    Deviation("loss_norm", "a task whose samples hold different numbers of loss terms (tokens): automatic "
              "optimization divides each micro-batch's mean loss by accumulate_grad_batches and DDP averages the "
              "ranks, a mean of micro-batch means (baseline: the token mean over the window on all ranks)"),
    Deviation("val.cadence", "validation every val_check_interval = val_every * accumulate_grad_batches batches, "
              "counted across epochs, drifts from optimizer-step multiples where an epoch's batch count is not a "
              "multiple of grad_accum; in defaults mode also at each epoch's end when val_every=0, and none after "
              "the last step unless it falls on the interval"),
    Deviation("forward.before_training", "defaults: sanity check: Lightning runs two batches of the val loader "
              "before training (its default sanity check)"),
    Deviation("lr.per_epoch", "defaults: the starter page has no scheduler; evalkit's per-step schedule in "
              "configure_optimizers' documented {'optimizer', 'lr_scheduler': scheduler}, whose interval defaults to "
              "'epoch': stepped once per epoch", by="evalkit"),
    Deviation("order", "defaults: DataLoader(dataset): on one device the dataset's order (no shuffle); in DDP "
              "Lightning's DistributedSampler(shuffle=True, seed=0) for training, the same order under every run "
              "seed, padded with repeated samples"),
    Deviation("batch.partial", "defaults: each epoch's incomplete last batch kept (no drop_last)"),
    Deviation("val.repeated", "defaults: at world size > 1 Lightning's DistributedSampler pads the validation set to "
              "even out the ranks: the repeated samples are run and counted in the logged metric"),
    Deviation("resume.checkpoints", "defaults: checkpoints hold no data position or RNG; ModelCheckpoint keeps only "
              "the latest one, and the final step gets none unless ckpt_every divides it"),
)

DEFAULTS_DEVIATIONS = ("forward.before_training", "lr.per_epoch", "order", "batch.partial", "resume.checkpoints")


class LightningAdapter(WrapperAdapter):
    """`trainer=lightning`: Lightning's `Trainer.fit` on evalkit's task (see the module docstring)."""
    option_names = ()   # trainer.options: none (a key is refused, with the nearest: evalkit.contract.options)

    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = (
        QuickStartPage(f"{LIGHTNING_DOCS}/starter/introduction.html", LIGHTNING_VERSION,
                       follows="2: Define a LightningModule (training_step with self.log('train_loss', loss), "
                               "configure_optimizers), 3: Define a dataset (DataLoader(dataset)), 4: Train the "
                               "model (L.Trainer(...), trainer.fit), 7: Supercharge training (devices, accelerator, "
                               "precision)"),
        QuickStartPage(f"{LIGHTNING_DOCS}/common/evaluation_basic.html", LIGHTNING_VERSION,
                       follows="Add a validation loop: validation_step with self.log('val_loss', val_loss), "
                               "trainer.fit(model, train_loader, valid_loader), valid_loader = DataLoader(valid_set)"),
        QuickStartPage(f"{LIGHTNING_DOCS}/common/lightning_module.html#configure-optimizers", LIGHTNING_VERSION,
                       follows="a dictionary with 'optimizer' and 'lr_scheduler' (a single scheduler: the default "
                               "lr_scheduler_config, interval 'epoch')"),
        QuickStartPage(f"{LIGHTNING_DOCS}/common/trainer.html#trainer-flags", LIGHTNING_VERSION,
                       follows="the flags for the run's settings: accelerator, devices, precision, max_steps, "
                               "accumulate_grad_batches, gradient_clip_val (only when train.grad_clip is set), "
                               "val_check_interval with check_val_every_n_epoch=None (only when train.val_every > 0)"),
        QuickStartPage(f"{LIGHTNING_DOCS}/common/checkpointing_intermediate.html", LIGHTNING_VERSION,
                       follows="ModelCheckpoint(dirpath=..., every_n_train_steps=N) (N = train.ckpt_every, when > 0)"),
        QuickStartPage(f"{LIGHTNING_DOCS}/common/checkpointing_basic.html", LIGHTNING_VERSION,
                       follows="resume: trainer.fit(model, ckpt_path=...)"),
    )
    departures = (
        Departure("the LightningModule wraps job.task.model (self.model) instead of the page's encoder/decoder, "
                  "its forward calls it",
                  "evalkit built, seeded and hooked this instance, the same for every adapter", "model"),
        Departure("evalkit's train and validation datasets instead of MNIST and its random_split, and the task's "
                  "loss module (self.loss_fn(self.model(x), y)) instead of mse_loss(x_hat, x)",
                  "the task owns its data and loss (sample ids ride on the dataset; the loss module is hooked)",
                  "data"),
        Departure("default_root_dir=<the job's run directory>/lightning, and ModelCheckpoint(dirpath=job.ckpt_dir, "
                  "filename='step_{step:08d}', auto_insert_metric_name=False)",
                  "evalkit keeps a job's files under its run directory, and finds, checks and resumes from its "
                  "checkpoints by their step; where files go and their names change no training",
                  "observation"),
    )

    # ------------------------------------------------------------------ fit
    def fit(self, job: TrainJob) -> None:
        import lightning as L

        aligned = self.mode == "aligned"
        precision = lightning_precision(job, self.mode)
        ResumableLoader, _, FinalCheckpoint = _classes()
        if aligned:
            train_loader, val_loader = ResumableLoader(job), job.val_loader()
            flags = self._aligned_flags(job, precision, FinalCheckpoint)
            explicit = {**flags, **ALIGNED_MODULE}
        else:
            train_loader, val_loader = _quick_start_loaders(job)
            flags, explicit = self._defaults_flags(job, precision), None
        module = self.module_class()(job, aligned, train_loader)
        trainer = L.Trainer(**built({**flags, "callbacks": flags["callbacks"] + self.callbacks(job)}))
        ckpt_path = latest_checkpoint(job.resume_from, f"step_*{CKPT_SUFFIX}") if job.resume_from else None
        fit_kwargs: dict[str, Any] = {}
        if ckpt_path is not None:
            # Lightning's checkpoint holds loop states and callback states besides tensors; it is our own file.
            fit_kwargs["weights_only"] = False
        # train.compile: "Speed up models by compiling them": torch.compile(model) before trainer.fit (Lightning
        # unwraps it and compiles the module's forward, training_step, validation_step, test_step and predict_step)
        trainer.fit(torch.compile(module) if job.compile else module, train_dataloaders=train_loader,
                    val_dataloaders=val_loader, ckpt_path=ckpt_path,
                    **fit_kwargs)
        if module.start_step is None:
            module.start_step = trainer.global_step
        if aligned and trainer.global_step > module.start_step and module.last_val_step != trainer.global_step:
            trainer.validate(module, dataloaders=val_loader, verbose=False)
        self._effective = self._report(trainer, module, job, flags, explicit, ckpt_path, train_loader)

    # ------------------------------------------------------------------ where a user's own code goes
    def module_class(self) -> type:
        """The LightningModule class `fit` builds as `cls(job, aligned, train_loader)`: subclass it to override
        `training_step` and the other LightningModule hooks."""
        return _classes()[1]

    def callbacks(self, job: TrainJob) -> list:
        """Lightning `Callback`s of the user's own, passed to the Trainer after the adapter's."""
        return []

    def _aligned_flags(self, job: TrainJob, precision: str, FinalCheckpoint) -> dict[str, Any]:
        """The Trainer's arguments in aligned mode: every flag that touches the baseline's semantics (reported,
        as they are, under explicit_settings)."""
        from lightning.pytorch.callbacks import ModelCheckpoint
        from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

        backend = "nccl" if job.device.type == "cuda" else "gloo"
        # Validation counted in batches (Lightning's unit) across epochs; val_every=0: only at the end.
        val_batches = (job.val_every or job.max_steps) * job.grad_accum
        periodic = (Call(ModelCheckpoint, dirpath=job.ckpt_dir, filename="step_{step:08d}",
                         auto_insert_metric_name=False, every_n_train_steps=job.ckpt_every, save_top_k=-1,
                         save_last=False, enable_version_counter=False, save_on_train_epoch_end=False)
                    if job.ckpt_every else None)
        final = Call(FinalCheckpoint, job).described(
            "FinalCheckpoint: trainer.save_checkpoint at max_steps when not a ckpt_every multiple")
        flags = dict(
            accelerator=_accelerator(job), devices=job.ranks_per_node, num_nodes=job.nnodes,
            precision=precision, max_steps=job.max_steps, max_epochs=-1, min_steps=None, min_epochs=None,
            max_time=None, accumulate_grad_batches=job.grad_accum,
            gradient_clip_val=job.grad_clip, gradient_clip_algorithm="norm",
            val_check_interval=val_batches, check_val_every_n_epoch=None, num_sanity_val_steps=0,
            limit_train_batches=1.0, limit_val_batches=1.0, use_distributed_sampler=False,
            reload_dataloaders_every_n_epochs=0, inference_mode=False, deterministic=False, benchmark=False,
            sync_batchnorm=False, logger=False, enable_checkpointing=periodic is not None,
            enable_progress_bar=False, enable_model_summary=False,
            barebones=False, default_root_dir=_root_dir(job),
            strategy=(Call(DDPStrategy, process_group_backend=backend, find_unused_parameters=False,
                           gradient_as_bucket_view=False, static_graph=False)
                      if job.distributed else Call(SingleDeviceStrategy, device=str(job.device))),
            callbacks=[c for c in (periodic, final) if c is not None],
        )
        return flags

    def _defaults_flags(self, job: TrainJob, precision: str) -> dict[str, Any]:
        """The Trainer's arguments in the quick start: the run's settings translated into the flags the reference
        documents for them, nothing the run does not ask for (docs/wrappers/lightning_trainer.md, defaults mode)."""
        from lightning.pytorch.callbacks import ModelCheckpoint

        every = {"every_n_train_steps": job.ckpt_every} if job.ckpt_every else {}
        checkpoint = ModelCheckpoint(dirpath=job.ckpt_dir, filename="step_{step:08d}", auto_insert_metric_name=False,
                                     **every)
        flags: dict[str, Any] = dict(accelerator=_accelerator(job), devices=job.ranks_per_node, precision=precision,
                                     max_steps=job.max_steps, accumulate_grad_batches=job.grad_accum,
                                     callbacks=[checkpoint], default_root_dir=_root_dir(job))
        if job.nnodes > 1:       # "Run on a multi-node cluster": Trainer(devices=<per node>, num_nodes=<nodes>)
            flags["num_nodes"] = job.nnodes
        if job.grad_clip is not None:
            flags["gradient_clip_val"] = job.grad_clip
        if job.val_every:
            flags.update(val_check_interval=job.val_every * job.grad_accum, check_val_every_n_epoch=None)
        return flags

    # ------------------------------------------------------------------ what Lightning reports
    def _report(self, trainer, module, job: TrainJob, flags: dict, explicit: dict | None,
                ckpt_path: str | None, train_loader) -> dict[str, Any]:
        strategy = trainer.strategy
        ckpt_cbs = [{"class": type(cb).__name__, "dirpath": cb.dirpath,
                     "every_n_train_steps": getattr(cb, "_every_n_train_steps", None),
                     "save_top_k": cb.save_top_k, "filename": cb.filename}
                    for cb in trainer.checkpoint_callbacks]
        sched = [{"interval": c.interval, "frequency": c.frequency, "scheduler": type(c.scheduler).__name__}
                 for c in trainer.lr_scheduler_configs]
        try:
            used_loader = trainer.train_dataloader
            sampler = type(getattr(used_loader, "sampler", None)).__name__
        except Exception:  # noqa: BLE001 - a report field, never a failure
            sampler = None
        report: dict[str, Any] = {
            "wrapper": "lightning.pytorch.Trainer",
            "trainer": {
                "strategy": type(strategy).__name__,
                "process_group_backend": getattr(strategy, "process_group_backend", None),
                "cluster_environment": type(strategy.cluster_environment).__name__
                if getattr(strategy, "cluster_environment", None) is not None else None,
                "accelerator": type(trainer.accelerator).__name__, "root_device": str(strategy.root_device),
                "launcher": type(strategy.launcher).__name__ if getattr(strategy, "launcher", None) else None,
                "creates_processes_externally": getattr(getattr(strategy, "cluster_environment", None),
                                                        "creates_processes_externally", None),
                "num_devices": trainer.num_devices, "num_nodes": trainer.num_nodes,
                "world_size": trainer.world_size, "global_rank": trainer.global_rank,
                "precision": trainer.precision, "precision_plugin": type(trainer.precision_plugin).__name__,
                "grad_scaler": type(getattr(trainer.precision_plugin, "scaler", None)).__name__
                if getattr(trainer.precision_plugin, "scaler", None) is not None else None,
                "max_steps": trainer.max_steps, "max_epochs": trainer.max_epochs,
                "accumulate_grad_batches": trainer.accumulate_grad_batches,
                "gradient_clip_val": trainer.gradient_clip_val,
                "gradient_clip_algorithm": getattr(trainer.gradient_clip_algorithm, "value",
                                                   trainer.gradient_clip_algorithm),
                "val_check_interval": trainer.val_check_interval, "val_check_batch": trainer.val_check_batch,
                "check_val_every_n_epoch": trainer.check_val_every_n_epoch,
                "num_sanity_val_steps": trainer.num_sanity_val_steps,
                "limit_train_batches": trainer.limit_train_batches, "limit_val_batches": trainer.limit_val_batches,
                "num_training_batches": trainer.num_training_batches,
                "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
                "cudnn_benchmark": torch.backends.cudnn.benchmark,
                "lr_scheduler_configs": sched, "checkpoint_callbacks": ckpt_cbs,
                "callbacks": [type(cb).__name__ for cb in trainer.callbacks],
                "loggers": [type(lg).__name__ for lg in trainer.loggers],
                "default_root_dir": trainer.default_root_dir, "train_sampler": sampler,
                "global_step": trainer.global_step, "current_epoch": trainer.current_epoch,
                "start_step": module.start_step,
                "val_loss_reported_by_lightning": float(trainer.callback_metrics["val_loss"])
                if "val_loss" in trainer.callback_metrics else None,
            },
            "requested": {k: (str(v) if not isinstance(v, (int, float, str, bool, type(None))) else v)
                          for k, v in flags.items() if k not in ("callbacks", "strategy")},
            "resumed_from": os.path.abspath(ckpt_path) if ckpt_path else None,
            "resume_mechanism": "Trainer.fit(ckpt_path=...)",
            "monkeypatching": "none",
        }
        self.record_deviations(*self._deviations(job, trainer))
        self.explicit_settings = explicit
        return report

    def _deviations(self, job: TrainJob, trainer) -> list[str]:
        """The codes of `DEVIATIONS` that apply to this job."""
        per_epoch = job.train_sampler().batches_per_epoch if self.mode == "aligned" else trainer.num_training_batches
        short = job.grad_accum > 1 and isinstance(per_epoch, int) and per_epoch % job.grad_accum
        codes = ["window.short_underscaled", "val.cadence"] if short else []
        if job.task.loss_terms is not None and (job.grad_accum > 1 or job.world_size > 1):
            codes.append("loss_norm")
        repeated = ["val.repeated"] if job.world_size > 1 else []
        return codes + (["val.cadence", *DEFAULTS_DEVIATIONS, *repeated] if self.mode == "defaults" else [])
