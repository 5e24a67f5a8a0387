"""The task configs: one structured config per task builder, holding exactly its keyword arguments.

Every task has `_target_` (its builder), `name` (what its runs are tagged with) and `metric_margin` (the verdict's
equivalence margin); the other fields are the builder's keyword arguments, and the worker calls
`builder(seed, **builder_arguments(task))`. A bundled task's YAML (`conf/task/`) names its schema here in its
defaults list, so a key its builder does not take fails at compose time. A third-party builder runs under
`task=third_party`, its keyword arguments in `task.extra`; `fit_problems` checks them against its signature
before anything is recorded. Imports no torch: the controller reads these.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf


@dataclass
class TaskConfig:
    _target_: str = MISSING          # import path of the task builder function
    name: str = MISSING
    metric_margin: float = 0.01      # equivalence margin of the validation metric: relative (0.01 = ±1 %) for a
    #                                  relative-scale metric, in metric units for an absolute-scale one


@dataclass
class MlpRegressionTask(TaskConfig):         # evalkit.tasks.catalog.mlp_regression
    n_train: int = MISSING
    n_val: int = MISSING
    in_dim: int = MISSING
    hidden: int = MISSING
    depth: int = MISSING
    out_dim: int = MISSING
    noise: float = MISSING
    dropout: float = 0.0             # after each hidden layer: makes training depend on the RNG (stability probe)
    batchnorm: bool = False          # BatchNorm1d after each hidden layer: buffers a resume must restore (stability)


@dataclass
class CnnClassificationTask(TaskConfig):     # evalkit.tasks.catalog.cnn_classification
    n_train: int = MISSING
    n_val: int = MISSING
    image_size: int = MISSING
    channels: int = MISSING
    hidden: int = MISSING
    out_dim: int = MISSING
    noise: float = MISSING


@dataclass
class TinyLmTask(TaskConfig):                # evalkit.tasks.catalog.tiny_lm
    n_train: int = MISSING
    n_val: int = MISSING
    vocab_size: int = MISSING
    seq_len: int = MISSING
    hidden: int = MISSING
    depth: int = MISSING
    n_heads: int = MISSING


@dataclass
class Resnet18Task(TaskConfig):              # evalkit.tasks.resnet.resnet18
    n_train: int = MISSING
    n_val: int = MISSING
    image_size: int = MISSING
    channels: int = MISSING
    width: int = MISSING             # the first stage's channels (torchvision's ResNet-18: 64)
    classes: int = MISSING
    noise: float = MISSING


@dataclass
class HfCausalLmTask(TinyLmTask):            # evalkit.tasks.hf_causal_lm.hf_causal_lm: tiny_lm's arguments
    pass


@dataclass
class ThirdPartyTask(TaskConfig):
    extra: dict[str, Any] = field(default_factory=dict)   # the builder's keyword arguments, any names


# The bundled tasks' schemas by task name; each `conf/task/<name>.yaml` lists `/<name>_schema@_here_` (config.py).
BUNDLED: dict[str, type[TaskConfig]] = {"mlp_regression": MlpRegressionTask,
                                        "cnn_classification": CnnClassificationTask, "tiny_lm": TinyLmTask,
                                        "resnet18": Resnet18Task, "hf_causal_lm": HfCausalLmTask}
COMMON = tuple(f.name for f in dataclasses.fields(TaskConfig))   # the fields that are not builder arguments


def builder_arguments(task: DictConfig) -> dict[str, Any]:
    """The builder's keyword arguments: every field of the task but COMMON, the keys of `extra` as arguments of
    their own."""
    values = OmegaConf.to_container(task, resolve=True)
    extra = values.pop("extra", None) or {}
    return {**{k: v for k, v in values.items() if k not in COMMON}, **extra}


def builder_parameters(target: str) -> dict[str, inspect.Parameter] | None:
    """The parameters of the builder `target` names; None when it cannot be found (the worker then says why).
    Read from the module's source where it is a plain `def`, so that checking a config imports neither the
    builder's module nor what it imports (torch, for the bundled tasks: a second of every command); otherwise
    from the imported function."""
    module, _, function = target.rpartition(".")
    if module not in sys.modules:
        with contextlib.suppress(Exception):    # no source to read: import it below
            spec = importlib.util.find_spec(module)
            with open(spec.origin, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            (found,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
            if not found.decorator_list:
                return _parameters_of(found.args)
    try:
        return dict(inspect.signature(getattr(importlib.import_module(module), function)).parameters)
    except Exception:  # noqa: BLE001 - a builder that does not import is the worker's to report, with its cause
        return None


def _parameters_of(args: ast.arguments) -> dict[str, inspect.Parameter]:
    """`inspect` parameters from a `def`'s arguments; a default stands for itself (only its presence matters)."""
    P = inspect.Parameter
    positional = [*args.posonlyargs, *args.args]
    defaults = [P.empty] * (len(positional) - len(args.defaults)) + [...] * len(args.defaults)
    out = [P(a.arg, P.POSITIONAL_ONLY if i < len(args.posonlyargs) else P.POSITIONAL_OR_KEYWORD, default=d)
           for i, (a, d) in enumerate(zip(positional, defaults))]
    if args.vararg:
        out.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    out += [P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else ...)
            for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return {p.name: p for p in out}


def fit_problems(task: DictConfig) -> list[str]:
    """Each task key the builder does not take and each argument it needs that the task lacks, one line naming
    the key and the fix; [] when they fit, or when the builder cannot be imported (the worker then says why)."""
    params = builder_parameters(task._target_)
    if params is None:
        return []
    given = builder_arguments(task)
    seed = next((n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), None)
    keywords = [n for n, p in params.items() if n != seed and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    where = "task.extra." if "extra" in task else "task."
    problems = []
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        for key in (k for k in given if k not in keywords):
            close = difflib.get_close_matches(key, keywords, n=1)
            signature = f"{task._target_}({', '.join(['seed', *(['*', *keywords] if keywords else [])])})"
            problems.append(f"{where}{key} is not an argument of {signature}: "
                            + (f"did you mean {where}{close[0]}?" if close else "remove it"))
    for key in (k for k in keywords if k not in given and params[k].default is inspect.Parameter.empty):
        problems.append(f"{task._target_} needs the argument {key}: set {where}{key}")
    return problems
