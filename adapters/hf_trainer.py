"""🤗 transformers `Trainer` + `TrainingArguments` on an evalkit task (`trainer=hf_trainer`).

evalkit's model and loss go in a plain `nn.Module` (`TaskModule`: `forward(x, labels)` returns the loss), a collator
turns `(x, y)` into `{"x", "labels"}`, and `trainer.train()` runs under `job.ckpt_dir`, the hub never contacted
(`HF_HUB_OFFLINE=1` before transformers is imported). Nothing is monkeypatched: `EvalkitTrainer` overrides only the
documented data-loading methods, and only in aligned mode.
- `aligned`: every `TrainingArguments` knob touching the baseline's semantics set explicitly, with evalkit's
  optimizer, scheduler, data order and validation shards (`explicit_settings`).
- `defaults`: transformers 5.24.0's fine-tuning tutorial line for line; the Trainer builds its own optimizer and
  scheduler (`quick_start`, `departures`).
On a token task the model's forward signature alone picks the Trainer's loss path (a `**kwargs` gets the window's
token count): `TaskModule` takes none, `CausalLMTaskModule` (`trainer.options.loss_kwargs`) does.
The full record (launch, each mode line by line, the Trainer's lines cited): docs/wrappers/hf_trainer.md.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"              # before transformers/huggingface_hub are imported
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch
from torch import nn
from torch.utils.data import DataLoader

from evalkit.adapters.accelerate_loop import STATE_DEVIATIONS, state_deviations
from evalkit.contract import (
    Departure,
    Deviation,
    QuickStartPage,
    Recipe,
    TrainJob,
    UnsupportedCombination,
    WrapperAdapter,
    jsonable,
    same_device,
)
from evalkit.contract.checkpoint import CorruptCheckpoint
from evalkit.tasks.order import GlobalOrderSampler, ValSampler

# The setting that aligns each kind of semantic finding (probe codes, or their family before the dot), reported as
# `aligns` in the effective config; the semantic probe names it beside each finding.
ALIGNS = {
    "loss_norm": "Trainer(compute_loss_func=f) where f divides the micro-batch's summed token losses by "
                 "num_items_in_batch, with TrainingArguments(average_tokens_across_devices=True) (transformers 4.46 "
                 "and later; a model whose forward takes **kwargs gets num_items_in_batch itself)",
    "loss_norm.rank_mean": "TrainingArguments(average_tokens_across_devices=True) (the default): num_items_in_batch "
                           "summed over every rank, and the loss scaled back up by the number of processes",
    "order.fixed_seed": "TrainingArguments(seed=<the run's seed>) (or data_seed): the default seed=42 gives every "
                        "run the same order",
    "order.padded": "TrainingArguments(dataloader_drop_last=True): with the Trainer's even_batches, Accelerate "
                    "completes an epoch's last round of batches with samples from its start so that every rank "
                    "gets one; dropping the incomplete batches removes them",
    "order": "a Trainer subclass whose get_train_dataloader (the documented hook) returns evalkit's order",
    "lr": "TrainingArguments(learning_rate, lr_scheduler_type, warmup_steps, lr_scheduler_kwargs), or your own "
          "scheduler: optimizers=(optimizer, scheduler), stepped by the Trainer once per optimizer step",
    "lr.warmup_from_zero": "no lr_scheduler_type starts its warm-up above LR 0 (they all return step / "
                           "warmup_steps): override create_scheduler (the documented hook) in a Trainer subclass "
                           "with a LambdaLR whose warm-up factor is (step + 1) / warmup_steps, or pass "
                           "optimizers=(optimizer, scheduler)",
    "optim": "TrainingArguments(optim=..., optim_args=..., adam_beta1/adam_beta2, learning_rate) for an optimizer "
             "the Trainer names; any other (torch.optim.Adam with an L2 weight decay): "
             "optimizers=(optimizer, scheduler) or optimizer_cls_and_kwargs=(cls, kwargs)",
    "wd": "the Trainer decays only what get_decay_parameter_names(model) returns (not biases, not norm weights): "
          "override it in a Trainer subclass to return every parameter name, or pass optimizers=(optimizer, "
          "scheduler) with one parameter group",
    "clip.unasked": "TrainingArguments(max_grad_norm=0): the default max_grad_norm=1.0 clips when no clipping is "
                    "asked",
    "clip": "TrainingArguments(max_grad_norm=max_norm) (0 = off)",
    "val.repeated": "TrainingArguments(accelerator_config={'even_batches': False}), or a Trainer subclass whose "
                    "get_eval_dataloader (the documented hook) returns each rank's own shard",
}
PAGE_LOGGING_STEPS = 10        # the fine-tuning tutorial's logging_steps=10, as it writes it
TRAINER_DOCS = "https://huggingface.co/docs/transformers/v5.24.0/en"
TRAINING_ARGUMENTS_PAGE = f"{TRAINER_DOCS}/main_classes/trainer#transformers.TrainingArguments"


def recipe_arguments(recipe: Recipe) -> dict[str, Any]:
    """The run's optimizer and LR schedule (`job.recipe`) as the TrainingArguments the reference documents for them,
    so that the Trainer builds them itself (`create_optimizer_and_scheduler`). AdamW is the Trainer's default
    optimizer (`optim` left out); plain Adam with a weight decay has no `optim` name and is refused."""
    out: dict[str, Any] = {"learning_rate": recipe.lr, "weight_decay": recipe.weight_decay}
    if recipe.optimizer == "sgd":
        out.update(optim="sgd", optim_args=f"momentum={recipe.momentum}")
    elif recipe.optimizer in ("adamw", "adam"):
        if recipe.optimizer == "adam" and recipe.weight_decay:
            raise UnsupportedCombination(
                f"train.optimizer=adam with weight_decay={recipe.weight_decay}: the Trainer's optimizers "
                "(TrainingArguments.optim) have no Adam with an L2 weight decay (its AdamW decays decoupled); "
                "use train.optimizer=adamw, or adam with weight_decay=0", UnsupportedCombination.DOCUMENTED,
                documented_at=TRAINING_ARGUMENTS_PAGE)
        out.update(adam_beta1=recipe.betas[0], adam_beta2=recipe.betas[1])
    else:
        raise ValueError(f"train.optimizer={recipe.optimizer!r} is not one of adamw, adam, sgd")
    ratio = recipe.min_lr_ratio
    if recipe.schedule not in ("constant", "linear", "cosine"):
        raise ValueError(f"train.schedule={recipe.schedule!r} is not one of constant, linear, cosine")
    if recipe.schedule == "constant" or ratio >= 1:      # a decay to the LR it starts from: constant after warm-up
        out["lr_scheduler_type"] = "constant_with_warmup"
    elif ratio == 0:
        out["lr_scheduler_type"] = recipe.schedule     # "linear" / "cosine": down to 0
    elif recipe.schedule == "linear":                   # the same straight line down to lr * ratio
        out.update(lr_scheduler_type="polynomial", lr_scheduler_kwargs={"lr_end": recipe.lr * ratio, "power": 1.0})
    else:
        out.update(lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": ratio})
    out["warmup_steps"] = recipe.warmup_steps
    return out


class TaskModule(nn.Module):
    """The Trainer-facing model: evalkit's model + evalkit's loss module, returning a dict with the loss."""

    _keys_to_ignore_on_save = None    # read by Trainer._issue_warnings_after_load (a PreTrainedModel attribute)

    def __init__(self, model: nn.Module, loss_fn: nn.Module):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.model(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fn(logits, labels)
        return out


class TokenWindowLoss:
    """`Trainer(compute_loss_func=...)` for a task whose samples hold different numbers of loss terms (tiny_lm's
    target tokens): a micro-batch's summed token losses over `num_items_in_batch`, the target tokens the Trainer
    counts over the window's labels (over every rank with `average_tokens_across_devices=True`): the token mean over
    the window, as the baseline computes it. Without a count (evaluation) the micro-batch's own mean."""

    def __init__(self, loss_fn: nn.Module, loss_terms):
        self.loss_fn = loss_fn
        self.loss_terms = loss_terms

    def __call__(self, outputs, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
        loss = self.loss_fn(outputs["logits"], labels)
        if num_items_in_batch is None:
            return loss
        return loss * self.loss_terms(labels) / num_items_in_batch


class CausalLMTaskModule(TaskModule):
    """Defaults mode on a token task: `TaskModule` taking the loss keyword arguments the quick start's
    `AutoModelForCausalLM` takes (its forward's `**kwargs`), so the Trainer treats it as it treats that model
    (`model_accepts_loss_kwargs`, transformers 4.46 and later): given `num_items_in_batch`, its summed token losses
    over that count, as transformers' `ForCausalLMLoss` divides; without one, its token mean."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, loss_terms):
        super().__init__(model, loss_fn)
        self.token_loss = TokenWindowLoss(loss_fn, loss_terms)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None, **kwargs) -> dict[str, torch.Tensor]:
        out = {"logits": self.model(x)}
        if labels is not None:
            out["loss"] = self.token_loss(out, labels, kwargs.get("num_items_in_batch"))
        return out


def task_module(job: TrainJob, mode: str, loss_kwargs: bool = False) -> TaskModule:
    """The model the Trainer is given: evalkit's model and loss alone, a plain `forward(x, labels)` as a team's own
    model is (docs/wrappers/hf_trainer.md, defaults mode); with `loss_kwargs` in defaults mode on a token task, one
    that takes loss keyword arguments as the quick start's causal LM does (`trainer.options.loss_kwargs`)."""
    model = job.task.model.to(job.device)
    if mode == "defaults" and loss_kwargs and job.task.loss_terms is not None:
        return CausalLMTaskModule(model, job.task.loss_fn, job.task.loss_terms)
    return TaskModule(model, job.task.loss_fn)


@functools.lru_cache(maxsize=1)
def takes_compute_loss_func() -> bool:
    """Whether the installed Trainer takes `compute_loss_func` (transformers 4.46 and later, with the
    `num_items_in_batch` it is given)."""
    import inspect

    from transformers import Trainer

    return "compute_loss_func" in inspect.signature(Trainer.__init__).parameters


def version_arguments(arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments the installed TrainingArguments takes, and the names of those it does not (an older
    transformers, run in its own environment: `trainer.env`). One it lacks is left out only when it asks for
    nothing (False, None or 0: that version behaves so without it), and the adapter declares it (the
    `args.not_in_version` deviation, which the semantic probe's notes show); one that asks for something is refused,
    naming it, the installed version and the fix."""
    import transformers
    from transformers import TrainingArguments

    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    missing = sorted(k for k in arguments if k not in fields)
    asked = [k for k in missing if arguments[k] not in (False, None, 0)]
    if asked:
        raise UnsupportedCombination(
            f"transformers {transformers.__version__}'s TrainingArguments has no {', '.join(asked)}, which this run "
            "needs set: run it with a transformers that has it (`evalkit-env create transformers==<version>`, then "
            "trainer.env=<its name>; trainer.env=null: the installed one)", UnsupportedCombination.SUBSTITUTION)
    return {k: v for k, v in arguments.items() if k in fields}, missing


def collate(samples: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """evalkit's (x, y) samples -> the keyword arguments of `TaskModule.forward`."""
    xs, ys = zip(*samples)
    return {"x": torch.stack(xs), "labels": torch.stack(ys)}


def resolve_checkpoint(path: str) -> str:
    """`path` itself when it is a Trainer checkpoint (has trainer_state.json); else its latest checkpoint-*."""
    from transformers.trainer_utils import get_last_checkpoint

    if os.path.isfile(os.path.join(path, "trainer_state.json")):
        return path
    last = get_last_checkpoint(path) if os.path.isdir(path) else None
    if last is None:
        raise CorruptCheckpoint(f"{path} is neither a transformers Trainer checkpoint (no trainer_state.json) "
                                "nor a directory holding checkpoint-* ; check resume_from")
    return last


def _resume_point(job: TrainJob) -> tuple[str | None, int]:
    """(the Trainer checkpoint to resume from, its step), or (None, 0)."""
    if not job.resume_from:
        return None, 0
    resume = resolve_checkpoint(job.resume_from)
    with open(os.path.join(resume, "trainer_state.json")) as fh:
        return resume, int(json.load(fh)["global_step"])


def _trainer_class():
    from transformers import Trainer

    class EvalkitTrainer(Trainer):
        """Overrides only the documented data-loading hooks, and only when given evalkit's order."""

        evalkit_job: TrainJob | None = None
        evalkit_sampler: GlobalOrderSampler | None = None

        def get_train_dataloader(self) -> DataLoader:
            if self.evalkit_sampler is None:
                return super().get_train_dataloader()
            loader = DataLoader(self.train_dataset, batch_size=self._train_batch_size, sampler=self.evalkit_sampler,
                                drop_last=True, collate_fn=self.data_collator,
                                num_workers=self.args.dataloader_num_workers,
                                pin_memory=self.args.dataloader_pin_memory,
                                generator=self.evalkit_job.loader_generator())
            return self.accelerator.prepare(loader)

        def get_eval_dataloader(self, eval_dataset=None) -> DataLoader:
            job = self.evalkit_job
            if job is None or eval_dataset is not None:
                return super().get_eval_dataloader(eval_dataset)
            return DataLoader(job.task.val_set, batch_size=job.batch_size, sampler=job.val_loader().sampler,
                              collate_fn=self.data_collator, num_workers=self.args.dataloader_num_workers,
                              pin_memory=self.args.dataloader_pin_memory)

        def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
            """A PreTrainedModel with tied weights inside evalkit's TaskModule (`tied_duplicates`) is saved without
            the tied copies, as `save_pretrained` saves the quick start's model: the Trainer writes a module that is
            not a PreTrainedModel with safetensors, which refuses shared tensors (the departure below)."""
            duplicates = tied_duplicates(self.model)
            if duplicates and state_dict is None:
                state_dict = {k: v for k, v in self.model.state_dict().items() if k not in duplicates}
            super()._save(output_dir, state_dict)

    return EvalkitTrainer


def tied_duplicates(module: nn.Module) -> set[str]:
    """The state-dict names of the second and later names of each tied tensor, when `module` is evalkit's TaskModule
    around a transformers PreTrainedModel (task=hf_causal_lm's GPT-2: lm_head.weight is wte.weight); empty for any
    other module: a team's own nn.Module with tied weights reaches the Trainer's safetensors save as it is."""
    from transformers import PreTrainedModel

    if not isinstance(module, TaskModule) or not any(isinstance(m, PreTrainedModel) for m in module.modules()):
        return set()
    first: dict[int, str] = {}
    duplicates = set()
    for name, tensor in module.state_dict(keep_vars=True).items():
        key = tensor.data_ptr() if tensor.numel() else id(tensor)
        if key in first:
            duplicates.add(name)
        else:
            first[key] = name
    return duplicates


def built_by_trainer(trainer) -> dict[str, Any]:
    """What the Trainer built from its arguments (defaults mode): its optimizer's class and parameter groups (the
    parameters of each by name, with the group's hyperparameters) and its scheduler, as the wrapper reports them."""
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    optimizer, scheduler = trainer.optimizer, trainer.lr_scheduler
    optimizer = getattr(optimizer, "optimizer", optimizer)       # inside Accelerate's AcceleratedOptimizer
    groups = [{**{k: v for k, v in group.items() if k != "params"},
               "params": [names.get(id(p), "?") for p in group["params"]]} for group in optimizer.param_groups]
    return {"optimizer": f"{type(optimizer).__module__}.{type(optimizer).__qualname__}", "param_groups": groups,
            "scheduler": f"{type(scheduler).__module__}.{type(scheduler).__qualname__}",
            "created_scheduler": bool(getattr(trainer, "_created_lr_scheduler", False)),
            "max_grad_norm": trainer.args.max_grad_norm}


LEFT_OUT = "args.not_in_version"      # the deviation that names the arguments an older TrainingArguments lacks
DEVIATIONS = (
    Deviation("sched.fp16_skipped_step", "the Trainer skips lr_scheduler.step() when GradScaler skipped the "
              "optimizer step (fp16); the baseline steps the scheduler anyway"),
    Deviation("resume.strict_load", "the Trainer loads the model state with load_state_dict(strict=False)"),
    Deviation("seed.reseeded", "TrainingArguments re-seeds the process with set_seed(args.seed) after evalkit built "
              "the task"),
    Deviation("resume.extra_step", "resumed from a checkpoint at or past max_steps, Trainer.train() still takes one "
              "optimizer step before it checks max_steps (aligned mode then does not call train(); defaults mode "
              "does, as a user would)"),
    Deviation("loss_norm", "transformers before 4.46: the Trainer divides each micro-batch's mean loss by "
              "gradient_accumulation_steps, a mean of micro-batch means; the token mean over the window "
              "(compute_loss_func with num_items_in_batch) came in 4.46"),
    Deviation("loss_norm.micro_mean", "defaults on a token task: the Trainer is handed a model whose forward(x, "
              "labels) takes no **kwargs (a team's own nn.Module; model_accepts_loss_kwargs False), so it counts no "
              "num_items_in_batch and divides each micro-batch's token mean by the window's micro-batch count: a mean "
              "of micro-batch means, not the token mean over the window (trainer.options.loss_kwargs=true: the page's "
              "causal LM, whose forward takes **kwargs, gets the count)"),
    Deviation(LEFT_OUT, "an older transformers (trainer.env) whose TrainingArguments lacks arguments the adapter "
              "sets: each is left out, as it asks for nothing (False, None or 0: what that version does without it)"),
    Deviation("model.best_loaded", "defaults: load_best_model_at_end=True (the page's): after training the Trainer "
              "loads the checkpoint with the best eval_loss back into the model, so the model the user ends with may "
              "be an earlier evaluation's, not the last optimizer step's (see best_model_checkpoint)"),
    Deviation("val.repeated", "defaults: at world size > 1 the evaluation loader, prepared by Accelerate with "
              "even_batches, repeats samples to even out the ranks: the model runs them twice; the evaluation loop "
              "gathers with gather_for_metrics, so the metric counts each sample once (evalkit's too: "
              "trainer.val_dedup)"),
    *STATE_DEVIATIONS,
)


class HFTrainerAdapter(WrapperAdapter):
    """`trainer.options`: `loss_kwargs` (default false; defaults mode on a token task): hand the Trainer the causal
    LM's model, whose forward takes **kwargs (`CausalLMTaskModule`), instead of a plain `forward(x, labels)` module."""
    option_names = ("loss_kwargs",)   # trainer.options it reads (its docstring says what each does)

    deviations = DEVIATIONS
    aligns = ALIGNS
    quick_start = (
        QuickStartPage(f"{TRAINER_DOCS}/training", "5.24.0",
                       follows="Fine-tuning: 'Training configuration' (TrainingArguments(output_dir, "
                               "num_train_epochs, per_device_train_batch_size, gradient_accumulation_steps, "
                               "gradient_checkpointing, bf16, learning_rate, logging_steps, eval_strategy, "
                               "save_strategy, load_best_model_at_end)) and 'Training' (Trainer(model, args, "
                               "train_dataset, eval_dataset, processing_class, data_collator); trainer.train())"),
        QuickStartPage(TRAINING_ARGUMENTS_PAGE, "5.24.0",
                       follows="the TrainingArguments reference, for the run's settings the tutorial leaves at "
                               "their defaults: max_steps, weight_decay, optim, optim_args, adam_beta1, "
                               "adam_beta2, lr_scheduler_type, lr_scheduler_kwargs, warmup_steps, max_grad_norm "
                               "(only when train.grad_clip is set), eval_steps, save_steps, use_cpu; and "
                               "Trainer.train(resume_from_checkpoint=...) to resume"),
    )
    departures = (
        Departure("AutoModelForCausalLM.from_pretrained(model_name, dtype='auto') -> TaskModule(evalkit's task "
                  "model, evalkit's loss module), returning {'loss', 'logits'} when given labels: a plain "
                  "forward(x, labels) without **kwargs, as a team's own nn.Module is, so the Trainer passes it no "
                  "num_items_in_batch (the causal LM's forward takes **kwargs and gets it: "
                  "trainer.options.loss_kwargs=true stands that model in, CausalLMTaskModule)",
                  "evalkit builds, seeds and hooks the model and its loss module, the same for every adapter",
                  "model"),
        Departure("load_dataset(...).map(tokenize), train_test_split, processing_class=tokenizer and "
                  "DataCollatorForLanguageModeling(tokenizer, mlm=False) -> evalkit's train and validation "
                  "datasets and a collator stacking their (x, y) samples into {'x', 'labels'}",
                  "evalkit's task owns the data (its sample ids ride on the dataset), the same for every adapter",
                  "data"),
        Departure("a PreTrainedModel's tied weights saved once (Trainer._save given the TaskModule's state dict "
                  "without the tied copies: lm_head.weight of task=hf_causal_lm's GPT-2)",
                  "the Trainer saves the quick start's PreTrainedModel with save_pretrained, which writes a tied "
                  "weight once; evalkit's TaskModule around it is not a PreTrainedModel, so the Trainer would write "
                  "it with safetensors.save_file, which refuses shared tensors ('Some tensors share memory'); "
                  "resuming loads it non-strictly, the tie intact in memory. A team's own nn.Module with tied "
                  "weights is saved as the Trainer saves it",
                  "model"),
        Departure("gradient_checkpointing=True left out",
                  "the Trainer enables it through the model's activation_checkpointing_enable (a PreTrainedModel "
                  "method evalkit's plain nn.Module does not have: it would raise); recomputing activations "
                  "trades compute for memory and leaves the gradients as they are",
                  "model"),
        Departure("login() and trainer.push_to_hub() left out",
                  "evalkit's model is never published: the hub is not contacted (HF_HUB_OFFLINE=1)",
                  "model"),
    )

    def __init__(self, mode: str = "aligned", options: dict[str, Any] | None = None):
        # other keys are left to subclasses (the quick-start spies' `spy`), as before this option existed
        super().__init__(mode, options)
        self.loss_kwargs = bool(self.options.get("loss_kwargs", False))

    def model_for(self, job: TrainJob) -> TaskModule:
        """The model the Trainer is handed (`task_module`): with `trainer.options.loss_kwargs` the causal LM's."""
        return task_module(job, self.mode, self.loss_kwargs)

    # ------------------------------------------------------------------ arguments
    def _arguments(self, job: TrainJob) -> dict[str, Any]:
        """TrainingArguments' keyword arguments for this job and mode (in aligned mode also reported, as they are,
        under explicit_settings)."""
        if self.mode == "defaults":
            return self._quick_start_arguments(job)
        cpu = job.device.type == "cpu"
        required = {   # what the job asks for: set in both modes
            "output_dir": job.ckpt_dir, "per_device_train_batch_size": job.batch_size,
            "per_device_eval_batch_size": job.batch_size, "gradient_accumulation_steps": job.grad_accum,
            "max_steps": job.max_steps, "max_grad_norm": job.grad_clip if job.grad_clip is not None else 0.0,
            "bf16": job.precision.name == "bf16_mixed", "fp16": job.precision.name == "fp16_mixed",
            "use_cpu": cpu, "eval_strategy": "steps", "eval_steps": job.val_every or job.max_steps,
            "save_strategy": "steps", "save_steps": job.ckpt_every or job.max_steps, "report_to": "none",
        }
        return {
            **required,
            "seed": job.seed, "full_determinism": False, "data_seed": None,
            "dataloader_drop_last": True, "dataloader_num_workers": job.num_workers,
            "dataloader_pin_memory": job.pin_memory, "dataloader_persistent_workers": False,
            "remove_unused_columns": False, "label_names": ["labels"],
            # A token task's window is averaged over its tokens on every rank (TokenWindowLoss), else no count.
            "average_tokens_across_devices": self._token_window(job), "label_smoothing_factor": 0.0,
            "ignore_data_skip": False, "eval_delay": 0, "eval_on_start": False,
            "prediction_loss_only": True, "eval_accumulation_steps": None,
            "save_total_limit": None, "save_only_model": False, "save_on_each_node": False,
            "load_best_model_at_end": False, "restore_callback_states_from_checkpoint": False,
            "logging_strategy": "steps", "logging_steps": job.val_every or job.max_steps,
            "logging_first_step": False, "logging_nan_inf_filter": False, "disable_tqdm": True,
            # one process: no backend (no process group, as the baseline: Accelerate 1.16 given a backend and no
            # launcher variables asks torch.distributed for a world size no group has)
            "ddp_backend": ("gloo" if cpu else "nccl") if job.world_size > 1 else None,
            "ddp_find_unused_parameters": False,
            "ddp_broadcast_buffers": True, "ddp_bucket_cap_mb": 25, "ddp_static_graph": False,
            "torch_compile": False, "activation_checkpointing": False, "torch_empty_cache_steps": None,
            # No memory tracker (it resets CUDA peak stats and empties the cache), no cast of the model for eval.
            "skip_memory_metrics": True, "fp16_full_eval": False, "bf16_full_eval": False,
            "neftune_noise_alpha": None, "auto_find_batch_size": False, "tf32": None,
            "accelerator_config": {"split_batches": False, "dispatch_batches": False, "even_batches": True,
                                   "use_seedable_sampler": False, "non_blocking": False,
                                   "gradient_accumulation_kwargs": {"sync_each_batch": False}},
        }

    def _token_window(self, job: TrainJob) -> bool:
        """Aligned mode on a task of varying loss terms per sample with a Trainer that can take the token mean over
        a window (`compute_loss_func`); an older Trainer averages micro-batch means (reported as `loss_norm`)."""
        return self.mode == "aligned" and job.task.loss_terms is not None and takes_compute_loss_func()

    @staticmethod
    def _quick_start_arguments(job: TrainJob) -> dict[str, Any]:
        """The fine-tuning tutorial's TrainingArguments with the run's settings in them (docs/wrappers/hf_trainer.md,
        defaults mode): nothing the run does not ask for, so every other argument keeps the Trainer's default."""
        return {
            "output_dir": job.ckpt_dir, "max_steps": job.max_steps,
            "per_device_train_batch_size": job.batch_size, "gradient_accumulation_steps": job.grad_accum,
            **({"bf16": True} if job.precision.name == "bf16_mixed" else {}),
            **({"fp16": True} if job.precision.name == "fp16_mixed" else {}),
            **recipe_arguments(job.recipe),
            **({"max_grad_norm": job.grad_clip} if job.grad_clip is not None else {}),
            "logging_steps": PAGE_LOGGING_STEPS,
            "eval_strategy": "steps", "eval_steps": job.val_every or job.max_steps,
            # the page saves at every evaluation; load_best_model_at_end requires it
            "save_strategy": "steps", "save_steps": job.val_every or job.max_steps, "load_best_model_at_end": True,
            **({"use_cpu": True} if job.device.type == "cpu" else {}),
        }

    # ------------------------------------------------------------------ fit
    def fit(self, job: TrainJob) -> None:
        arguments = self._arguments(job)
        if job.compile:     # train.compile: TrainingArguments(torch_compile=True), as the Trainer's docs write it
            arguments = {**arguments, "torch_compile": True}
        trainer = self._trainer(job, arguments)
        if self.mode == "aligned":
            self._fit_aligned(job, trainer, arguments)
        else:
            self._fit_defaults(job, trainer, arguments)
        trainer.accelerator.wait_for_everyone()
        if self.mode == "defaults":
            self._effective["built_by_trainer"] = built_by_trainer(trainer)
        self._effective["trainer_state"] = jsonable(vars(trainer.state))
        self._effective["final_step"] = trainer.state.global_step if "skipped_train" not in self._effective \
            else self._effective["start_step"]

    def _trainer(self, job: TrainJob, arguments: dict[str, Any]):
        """The Trainer on evalkit's model and loss, on the device evalkit chose; in aligned mode with evalkit's
        optimizer and scheduler, in defaults mode building its own from the arguments, as the quick start does."""
        from transformers import TrainingArguments

        taken, left_out = version_arguments(arguments)
        args = TrainingArguments(**taken)
        if left_out:
            self._effective["arguments_not_in_this_version"] = left_out
            self._declare_left_out(left_out)
        wrapper = self.model_for(job)
        if self.mode == "aligned":
            optimizer = job.make_optimizer(wrapper.model.parameters())
            own = {"optimizers": (optimizer, job.make_scheduler(optimizer))}
            if self._token_window(job):
                own["compute_loss_func"] = TokenWindowLoss(job.task.loss_fn, job.task.loss_terms)
        else:
            own = {}
        trainer = self.trainer_class()(model=wrapper, args=args, train_dataset=job.task.train_set,
                                       eval_dataset=job.task.val_set, data_collator=collate,
                                       callbacks=self.callbacks(job), **own)
        if not same_device(args.device, job.device):
            raise UnsupportedCombination(
                f"the Trainer chose device {args.device} but evalkit asked for {job.device} "
                "(ACCELERATE_TORCH_DEVICE or CUDA_VISIBLE_DEVICES set?)", UnsupportedCombination.SUBSTITUTION)
        return trainer

    def _declare_left_out(self, left_out: list[str]) -> None:
        """The `args.not_in_version` deviation, its text naming the arguments and the installed transformers (what the
        semantic probe's notes, and so the verdict's report, quote)."""
        import transformers

        self.record_deviations(LEFT_OUT)
        known = self._applying[LEFT_OUT]
        self._applying[LEFT_OUT] = dataclasses.replace(
            known, text=f"{known.text}: transformers {transformers.__version__} has no {', '.join(left_out)}")

    # ------------------------------------------------------------------ where a user's own code goes
    def trainer_class(self) -> type:
        """The Trainer subclass `fit` builds: subclass it to override `compute_loss` and the other documented
        Trainer methods."""
        return _trainer_class()

    def callbacks(self, job: TrainJob) -> list:
        """`TrainerCallback`s of the user's own, passed as `Trainer(callbacks=...)`."""
        return []

    def _fit_aligned(self, job: TrainJob, trainer, arguments: dict[str, Any]) -> None:
        args, accelerator = trainer.args, trainer.accelerator
        if job.precision.autocast_dtype is not None and not accelerator.native_amp:
            raise UnsupportedCombination(
                f"transformers Trainer does not autocast {job.precision.name} on {accelerator.device.type} "
                "(it would silently run fp32); refused in aligned mode", UnsupportedCombination.SUBSTITUTION)
        if args.world_size != job.world_size:
            raise UnsupportedCombination(
                f"the Trainer sees world size {args.world_size}, evalkit launched {job.world_size}",
                UnsupportedCombination.SUBSTITUTION)
        resume, start_step = _resume_point(job)
        self._check_val_shards(job)
        trainer.evalkit_job = job
        trainer.evalkit_sampler = GlobalOrderSampler(job.train_sampler())
        bpe = job.train_sampler().batches_per_epoch
        start_epoch = start_step // max(1, math.ceil(bpe / job.grad_accum))   # the Trainer's epochs_trained
        self._check_order(job, trainer, start_epoch)
        trainer.evalkit_sampler.set_epoch(start_epoch)
        self._record(job, trainer, arguments, resume, start_step)
        if start_step >= job.max_steps:
            # Trainer.train() checks max_steps only after an optimizer step: resumed at or past max_steps it
            # would still take one more step. The baseline takes none, so neither does aligned mode.
            self._effective["skipped_train"] = f"resumed at step {start_step} >= max_steps {job.max_steps}"
        else:
            trainer.train(resume_from_checkpoint=resume)

    def _fit_defaults(self, job: TrainJob, trainer, arguments: dict[str, Any]) -> None:
        resume, start_step = _resume_point(job)
        self._record(job, trainer, None, resume, start_step)
        self._effective["quick_start_arguments"] = arguments
        trainer.train(resume_from_checkpoint=resume)
        # which weights the user ends with: load_best_model_at_end loaded this checkpoint after the last step
        self._effective["best_model_checkpoint"] = trainer.state.best_model_checkpoint
        self._effective["best_metric"] = trainer.state.best_metric

    def _check_order(self, job: TrainJob, trainer, epoch: int) -> None:
        """Accelerate's sharding of the global order must reproduce evalkit's per-rank order."""
        loader = trainer.get_train_dataloader()
        trainer.evalkit_sampler.set_epoch(epoch)
        got = [i for batch in loader.batch_sampler for i in batch]
        want = job.train_sampler(epoch).rank_indices(epoch).tolist()
        if got != want:
            raise RuntimeError("accelerate's batch sharding no longer yields evalkit's per-rank order "
                               f"(rank {job.rank}, epoch {epoch}); the aligned data order cannot be kept")

    @staticmethod
    def _check_val_shards(job: TrainJob) -> None:
        n = len(job.task.val_set)
        counts = {math.ceil(len(ValSampler(n, r, job.world_size)) / job.batch_size) for r in range(job.world_size)}
        if len(counts) > 1:
            raise UnsupportedCombination(
                f"the Trainer gathers the eval loss after every batch; evalkit's validation shards give the "
                f"{job.world_size} ranks unequal batch counts {sorted(counts)} (n_val={n}, batch {job.batch_size})")

    # ------------------------------------------------------------------ effective config
    def _record(self, job: TrainJob, trainer, explicit: dict | None, resume: str | None, start_step: int) -> None:
        import accelerate
        import transformers

        args, accelerator = trainer.args, trainer.accelerator
        report: dict[str, Any] = {
            "wrapper": "transformers.Trainer", "version": transformers.__version__,
            "accelerate_version": accelerate.__version__,
            "trainer_class": type(trainer).__name__,
            "overridden_methods": (["get_train_dataloader", "get_eval_dataloader"]
                                   if self.mode == "aligned" else []),
            "training_arguments": args.to_dict(),
            "world_size": args.world_size, "process_index": args.process_index,
            "parallel_mode": str(args.parallel_mode), "device": str(args.device), "n_gpu": args.n_gpu,
            "accelerator": {
                "distributed_type": str(accelerator.distributed_type),
                "backend": getattr(accelerator.state, "backend", None),
                "num_processes": accelerator.num_processes, "mixed_precision": accelerator.mixed_precision,
                "native_amp": accelerator.native_amp, "grad_scaler": accelerator.scaler is not None,
                "scaler_state": accelerator.scaler.state_dict() if accelerator.scaler is not None else None,
                "gradient_accumulation_steps": accelerator.gradient_accumulation_steps,
                "gradient_state": dict(accelerator.gradient_state.plugin_kwargs),
                "dataloader_config": str(getattr(accelerator, "dataloader_config", None)),
                "ddp_kwargs": accelerator.ddp_handler.to_dict() if accelerator.ddp_handler is not None else None,
                "state": repr(accelerator.state),
            },
            "model_accepts_loss_kwargs": getattr(trainer, "model_accepts_loss_kwargs", None),
            "model_class": type(trainer.model).__name__, "loss_kwargs_option": self.loss_kwargs,
            "label_names": getattr(trainer, "label_names", None),
            "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
            "torch_num_threads": torch.get_num_threads(),
            "max_steps": job.max_steps, "val_every": job.val_every, "ckpt_every": job.ckpt_every,
            "grad_clip": job.grad_clip, "start_step": start_step,
            "resumed_from": os.path.abspath(resume) if resume else None,
            "checkpoint_format": "output_dir/checkpoint-<step>/: model.safetensors, optimizer.pt, scheduler.pt, "
                                 "scaler.pt (fp16), rng_state[_<rank>].pth, trainer_state.json, training_args.bin",
            "checkpoint_loading": "safetensors for the model (load_state_dict strict=False), "
                                  "torch.load(weights_only=True) for optimizer/scheduler/scaler/RNG; "
                                  "training_args.bin (pickle) is not loaded on resume",
        }
        self.record_deviations("sched.fp16_skipped_step", "resume.strict_load", "seed.reseeded", "resume.extra_step",
                               *state_deviations(accelerator))
        if job.task.loss_terms is not None and not takes_compute_loss_func():
            self.record_deviations("loss_norm")
        if self.mode == "defaults":
            self.record_deviations("model.best_loaded", *(["val.repeated"] if job.world_size > 1 else []))
            if job.task.loss_terms is not None and not self.loss_kwargs and takes_compute_loss_func():
                self.record_deviations("loss_norm.micro_mean")
        report["compute_loss_func"] = type(trainer.compute_loss_func).__name__ \
            if getattr(trainer, "compute_loss_func", None) is not None else None
        self.explicit_settings = explicit
        self._effective.update(report)
