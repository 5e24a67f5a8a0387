"""The optimizer's update rule in float64: what `torch.optim.SGD`, `Adam` and `AdamW` do with a gradient, per param
group, written out from their documented algorithms (torch.optim's docstrings), not from their code.

The rule the update check replays is the optimizer the records show the wrapper stepped (`evidence.optimizer`: its
class, and per group its parameters and hyperparameters), so that a wrapper which builds its own optimizer (another
class, weight decay skipped on some parameters) is named once by `explain_optimizer` and its updates are still
checked step by step. Without that record (runs recorded before it existed) the rule is the run's own recipe.

Per group, for a gradient g (the window's, after clipping), LR lr and parameters θ of step t (1-based):
- SGD: g += wd·θ; with momentum μ: b = g at t = 1, else μ·b + (1 - dampening)·g; g = g + μ·b (nesterov) or b;
  Δ = -lr·g;
- Adam: g += wd·θ; AdamW (decoupled): θ shrinks by lr·wd·θ first; then m = β1·m + (1 - β1)·g,
  v = β2·v + (1 - β2)·g², Δ -= lr/(1 - β1^t) · m / (sqrt(v)/sqrt(1 - β2^t) + eps) (amsgrad: the running maximum of v).
`maximize` negates g. A rule with state (momentum, Adam's moments) replays consecutive steps from step 1 only.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ASKED_EPS = 1e-8          # torch's default, which evalkit's make_optimizer keeps


@dataclass(frozen=True)
class Group:
    mask: np.ndarray          # the flat coordinates the group holds
    kind: str                 # sgd | adam
    weight_decay: float = 0.0
    decoupled: bool = False   # AdamW's decay
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = ASKED_EPS
    amsgrad: bool = False
    maximize: bool = False


@dataclass
class UpdateRule:
    """One optimizer's rule over the flat parameter vector; `lrs` of a step are its groups' LRs in order."""

    name: str
    groups: list[Group]
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def stateful(self) -> bool:
        return any(g.kind == "adam" or g.momentum for g in self.groups)

    @property
    def plain_sgd(self) -> bool:
        """Stateless SGD with one LR and no decay: Δ = -lr·g, the rule the update explanations were written for."""
        return not self.stateful and all(g.kind == "sgd" and not g.weight_decay and not g.maximize
                                         for g in self.groups)

    def fresh(self) -> "UpdateRule":
        return UpdateRule(self.name, self.groups)

    def without(self, frozen: np.ndarray) -> "UpdateRule":
        """The rule with the `frozen` coordinates in no group: torch's optimizers skip a parameter whose gradient is
        None, as a frozen one's (requires_grad=False) always is, so its update is zero whatever the decay."""
        return UpdateRule(self.name, [dataclasses.replace(g, mask=g.mask & ~frozen) for g in self.groups],
                          self.state)

    def delta(self, t: int, g: np.ndarray, theta: np.ndarray, lrs: list[float]) -> np.ndarray:
        """The update of step t (1-based, consecutive) for window gradient `g` at parameters `theta`."""
        out = np.zeros_like(theta)
        for i, group in enumerate(self.groups):
            lr = float(lrs[i] if i < len(lrs) else lrs[0])
            m = group.mask
            grad, th = g[m], theta[m]
            if group.maximize:
                grad = -grad
            if group.weight_decay and not group.decoupled:
                grad = grad + group.weight_decay * th
            if group.kind == "sgd":
                out[m] = -lr * self._momentum(i, group, grad)
            else:
                out[m] = self._adam(i, t, group, grad, th, lr)
        return out

    def _momentum(self, i: int, group: Group, grad: np.ndarray) -> np.ndarray:
        if not group.momentum:
            return grad
        buf = self.state.get(("buf", i))
        buf = grad.copy() if buf is None else group.momentum * buf + (1 - group.dampening) * grad
        self.state[("buf", i)] = buf
        return grad + group.momentum * buf if group.nesterov else buf

    def _adam(self, i: int, t: int, group: Group, grad: np.ndarray, th: np.ndarray, lr: float) -> np.ndarray:
        b1, b2 = group.betas
        m = b1 * self.state.get(("m", i), 0.0) + (1 - b1) * grad
        v = b2 * self.state.get(("v", i), 0.0) + (1 - b2) * grad * grad
        self.state[("m", i)], self.state[("v", i)] = m, v
        if group.amsgrad:
            v = np.maximum(self.state.get(("vmax", i), 0.0), v)
            self.state[("vmax", i)] = v
        decay = -lr * group.weight_decay * th if group.decoupled and group.weight_decay else 0.0
        denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + group.eps
        return decay - (lr / (1 - b1 ** t)) * m / denom


def asked_rule(config: dict[str, Any], size: int) -> UpdateRule:
    """The run's own recipe (`train.*`) as one group over every coordinate: what a careful loop steps."""
    train = config["train"]
    name = str(train.get("optimizer") or "sgd")
    everything = np.ones(size, dtype=bool)
    wd = float(train.get("weight_decay") or 0.0)
    if name == "sgd":
        return UpdateRule(name, [Group(everything, "sgd", wd, momentum=float(train.get("momentum") or 0.0))])
    betas = tuple(float(b) for b in (train.get("betas") or (0.9, 0.999)))
    return UpdateRule(name, [Group(everything, "adam", wd, decoupled=name == "adamw", betas=betas)])


def observed_rule(record: dict[str, Any], layout: dict[str, slice], size: int) -> UpdateRule | None:
    """The rule of the optimizer `record` describes (evidence.optimizer's first entry), or None when its class is
    not one this module replays (the judge then says the updates were not checked, and why)."""
    name = str(record.get("class", "")).lower()
    if name not in ("sgd", "adam", "adamw"):
        return None
    groups = []
    for group in record.get("groups", []):
        mask = np.zeros(size, dtype=bool)
        for param in group.get("params", []):
            if param in layout:
                mask[layout[param]] = True
        if name == "sgd":
            groups.append(Group(mask, "sgd", float(group.get("weight_decay") or 0.0),
                                momentum=float(group.get("momentum") or 0.0),
                                dampening=float(group.get("dampening") or 0.0),
                                nesterov=bool(group.get("nesterov")), maximize=bool(group.get("maximize"))))
        else:
            decoupled = bool(group.get("decoupled_weight_decay", name == "adamw"))
            groups.append(Group(mask, "adam", float(group.get("weight_decay") or 0.0), decoupled=decoupled,
                                betas=tuple(float(b) for b in group.get("betas", (0.9, 0.999))),
                                eps=float(group.get("eps", ASKED_EPS)), amsgrad=bool(group.get("amsgrad")),
                                maximize=bool(group.get("maximize"))))
    return UpdateRule(name, groups)
