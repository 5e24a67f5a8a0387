"""Alternative update semantics: models of the optimizer step that predict every step's Δθ from the oracle's
float64 micro-batch gradients, the observed LR and parameters; a model explains the observation only if it
reproduces it within the oracle's allowance at EVERY checked step, with one set of constants (one clip norm,
one decay).

A model is four choices: how the window's micro-batch losses are divided (by the window's size: expected; by
grad_accum; not at all), how ranks combine (mean: expected; sum), clipping (as asked; an unasked norm inferred
from |Δ|/lr where it binds; per micro-batch; on loss-scaled gradients), and weight decay (none: expected;
coupled or LR-independent, estimated by least squares from the residual).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import Caliber, ObservedStep, clip

CLIP_OFF_KNOB = "gradient clipping off (max_grad_norm=0 / gradient_clip_val=None)"


@dataclass(frozen=True)
class Model:
    division: str = "window"     # window | accum | none
    reduce: str = "mean"         # mean | sum
    clip: str = "asked"          # asked | unasked | none | micro_each | micro_contribution | micro_running
    #                              | before_unscale
    norm: float | None = None    # the clip norm in effect (asked, or inferred)
    decay: str = "none"          # none | coupled | lr_free
    rate: float = 0.0

    @property
    def changes(self) -> int:
        return sum([self.division != "window", self.reduce != "mean", self.clip != "asked", self.decay != "none"])


def predict(step: ObservedStep, model: Model, accum: int) -> np.ndarray:
    per_rank = []
    for gs in step.grads.values():
        d = {"window": len(gs), "accum": accum, "none": 1}[model.division]
        if model.clip == "micro_each":
            acc = sum(clip(g, model.norm) for g in gs) / d
        elif model.clip == "micro_contribution":
            acc = sum(clip(g / d, model.norm) for g in gs)
        elif model.clip == "micro_running":
            acc = np.zeros_like(gs[0])
            for g in gs:
                acc = clip(acc + g / d, model.norm)
        else:
            acc = sum(gs) / d
        per_rank.append(acc)
    g = np.sum(per_rank, axis=0) if model.reduce == "sum" else np.mean(per_rank, axis=0)
    if model.clip in ("asked", "unasked"):
        g = clip(g, model.norm)
    # "none": clipping was asked and not applied
    elif model.clip == "before_unscale":
        g = clip(g, model.norm / step.loss_scale)
    delta = -step.lr * g
    if model.decay == "coupled":
        delta = delta - step.lr * model.rate * step.theta_prev
    elif model.decay == "lr_free":
        delta = delta - model.rate * step.theta_prev
    return delta


def fits(steps: list[ObservedStep], model: Model, accum: int) -> bool:
    return all(s.matches(predict(s, model, accum)) for s in steps)


def _inferred_norm(steps: list[ObservedStep], base: Model, accum: int) -> float | None:
    """The one clip norm that binding steps show (|Δ|/lr below the raw norm), or None."""
    norms = []
    for s in steps:
        raw = float(np.linalg.norm(predict(s, base, accum))) / s.lr
        seen = float(np.linalg.norm(s.delta)) / s.lr
        if seen < raw * (1 - 1e-3):
            norms.append(seen)
    return float(np.median(norms)) if norms else None


def _decay(steps: list[ObservedStep], base: Model, accum: int, kind: str) -> float | None:
    """Least-squares decay rate from the residual Δobs - Δpred against -lr·θ (coupled) or -θ (LR-free)."""
    num = den = 0.0
    for s in steps:
        residual = s.delta - predict(s, base, accum)
        basis = -(s.lr if kind == "coupled" else 1.0) * s.theta_prev
        num += float(residual @ basis)
        den += float(basis @ basis)
    rate = num / den if den else 0.0
    return rate if rate > 0 else None


def candidate_models(steps: list[ObservedStep], cal: Caliber) -> list[Model]:
    accum, asked = cal.grad_accum, cal.grad_clip
    reductions = ("mean", "sum") if cal.world_size > 1 else ("mean",)
    models: list[Model] = []
    for division in ("window", "accum", "none"):
        for reduce in reductions:
            base = Model(division, reduce, "asked", asked)
            models.append(base)
            if asked is None:
                norm = _inferred_norm(steps, base, accum)
                if norm is not None:
                    models.append(replace(base, clip="unasked", norm=norm))
            else:
                models += [replace(base, clip=c) for c in ("none", "micro_each", "micro_contribution",
                                                          "micro_running")]
                if all(s.loss_scale for s in steps):
                    models.append(replace(base, clip="before_unscale"))
            for kind in ("coupled", "lr_free"):
                rate = _decay(steps, base, accum, kind)
                if rate is not None:
                    models.append(replace(base, decay=kind, rate=rate))
    return models


WORDS: dict[str, Callable[[Model, Caliber], tuple[str, str]]] = {
    "division:accum": lambda m, c: ("window.short_underscaled", f"the short last window's losses divided by "
                                    f"grad_accum={c.grad_accum} instead of its own size"),
    "division:none": lambda m, c: ("loss.window_summed", "the window's micro-batch losses summed, not averaged"),
    "reduce:sum": lambda m, c: ("ddp.grad_summed", f"gradients summed over the {c.world_size} ranks, not averaged"),
    "clip:unasked": lambda m, c: ("clip.unasked", f"gradients clipped to a global norm of {m.norm:.4g} that "
                                  "was not asked"),
    "clip:none": lambda m, c: ("clip.not_applied", f"gradient clipping at a global norm of {c.grad_clip:.4g} "
                               "asked but not applied"),
    "clip:micro_each": lambda m, c: ("clip.per_micro_batch", f"each micro-batch's gradient clipped to "
                                     f"{m.norm:.4g} before accumulation"),
    "clip:micro_contribution": lambda m, c: ("clip.per_micro_batch", "each micro-batch's (loss-divided) gradient "
                                             f"clipped to {m.norm:.4g} before accumulation"),
    "clip:micro_running": lambda m, c: ("clip.per_micro_batch", "the accumulated gradient clipped to "
                                        f"{m.norm:.4g} after every micro-batch's backward"),
    "clip:before_unscale": lambda m, c: ("clip.before_unscale", "clipping applied to loss-scaled gradients "
                                         f"(effective norm {m.norm:.4g}/loss scale)"),
    "decay:coupled": lambda m, c: ("wd.unasked", f"weight decay {m.rate:.4g} coupled to the LR (Δ -= lr·wd·θ; for "
                                   "plain SGD the same as added to the gradient after clipping)"),
    "decay:lr_free": lambda m, c: ("wd.unasked", f"weight decay {m.rate:.4g}·θ per step, decoupled from the LR"),
}
KNOBS = {"window.short_underscaled": "divide each micro-batch loss by the size of the window actually accumulated",
         "loss.window_summed": "average the loss over the accumulation window (loss / window size)",
         "ddp.grad_summed": "average gradients over ranks (DDP's default all-reduce mean)",
         "clip.unasked": CLIP_OFF_KNOB,
         "clip.not_applied": "the wrapper's own clipping at the asked norm (gradient_clip_val / max_grad_norm / "
                             "clip_gradients), or clip_grad_norm_ before optimizer.step()",
         "clip.per_micro_batch": "clip once per optimizer step, after accumulation",
         "clip.before_unscale": "unscale gradients before clipping (scaler.unscale_)",
         "wd.unasked": "weight_decay=0 in the wrapper's optimizer"}


def describe(model: Model, cal: Caliber) -> list[tuple[str, str]]:
    keys = [f"division:{model.division}", f"reduce:{model.reduce}", f"clip:{model.clip}", f"decay:{model.decay}"]
    return [WORDS[k](model, cal) for k in keys if k in WORDS]


def _scale_words(steps: list[ObservedStep], cal: Caliber, windows: str = "") -> str:
    """The median |Δobs|/|Δexp|, over full or short windows only when `windows` says so."""
    exp = {s.step: predict(s, Model(norm=cal.grad_clip), cal.grad_accum) for s in steps}
    full = {s.step: len(s.grads[0]) == cal.grad_accum for s in steps}
    moved = [s for s in steps if np.linalg.norm(exp[s.step]) > 0] or steps     # a step at LR 0 scales nothing
    pick = [s for s in moved if not windows or full[s.step] == (windows == "full")] or moved
    scales = [np.linalg.norm(s.delta) / max(np.linalg.norm(exp[s.step]), 1e-300) for s in pick]
    return f"update {np.median(scales):.2f}x expected{f' at {windows} windows' if windows else ''}"


SCALE_WINDOWS = {"loss.window_summed": "full", "window.short_underscaled": "short"}


def check_update(job: str, steps: list[ObservedStep], cal: Caliber, declared: Callable[[str], str]
                 ) -> list[Finding]:
    expected = Model(norm=cal.grad_clip)
    wrong = [s.step for s in steps if not s.matches(predict(s, expected, cal.grad_accum))]
    if not wrong:
        return []
    good = [m for m in candidate_models(steps, cal) if m.changes and fits(steps, m, cal.grad_accum)]
    first, step = wrong[0], next(s for s in steps if s.step == wrong[0])
    exp_delta = predict(step, expected, cal.grad_accum)
    base = dict(job=job, first_step=first, expected=round(float(np.linalg.norm(exp_delta)), 8),
                observed=round(float(np.linalg.norm(step.delta)), 8),
                evidence={"steps_differing": wrong})
    if not good:
        cos = float(step.delta @ exp_delta / (np.linalg.norm(step.delta) * np.linalg.norm(exp_delta) + 1e-300))
        return [Finding(code="unexplained.update", title="parameter update differs from the oracle's (unexplained)",
                        size=f"{_scale_words(steps, cal)} (median), cosine {cos:.4f} at step {first}; "
                             f"{len(wrong)} of {len(steps)} steps differ", declared=declared("update"), **base)]
    simplest = min(m.changes for m in good)
    best = [m for m in good if m.changes == simplest]
    findings = []
    for code, words in dict.fromkeys(d for d in describe(best[0], cal)):
        others = [w for m in best[1:] for c, w in describe(m, cal) if c != code]
        findings.append(Finding(code=code, title=words, explained_by=[words, *dict.fromkeys(others)],
                                size=f"{_scale_words(steps, cal, SCALE_WINDOWS.get(code, ''))}; "
                                     f"{len(wrong)} of {len(steps)} steps differ",
                                knob=KNOBS.get(code, ""), declared=declared(code), **base))
    return findings
