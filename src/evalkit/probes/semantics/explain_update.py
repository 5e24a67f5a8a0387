"""Alternative update semantics: models of the optimizer step that predict every step's Δθ from the oracle's
float64 micro-batch gradients, the observed LR and parameters; a model explains the observation only if it
reproduces it within the oracle's allowance at EVERY checked step, with one set of constants (one clip norm,
one decay).

The optimizer itself is the one the wrapper stepped (`update_rule`, replayed over the steps in order); a model is four
choices about the gradient it is handed and the decay: how the window's micro-batch losses are normalized (by the
window's size: expected; by grad_accum; not at all; on the token caliber, the token mean over the window is expected
and the others are `normalization.TOKEN_CODES`, at several ranks the per-rank token mean too), how ranks combine
(mean: expected; sum; not at all, rank 0 on its own gradient), clipping (as asked; an unasked norm inferred where it
binds; per micro-batch; on loss-scaled gradients), and weight decay (none: expected; coupled or LR-independent,
estimated by least squares from the residual).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from evalkit.probes.findings import Finding
from evalkit.probes.semantics import normalization
from evalkit.probes.semantics.oracle import Caliber, ObservedStep, clip
from evalkit.probes.semantics.update_rule import Group, UpdateRule

CLIP_OFF_KNOB = "gradient clipping off (the wrapper's clipping setting at none or 0)"


@dataclass(frozen=True)
class Model:
    division: str = "window"     # window | accum | none; on the token caliber also tokens (expected) | token_sum |
    #                              tokens_x_accum | tokens_per_accum, and at several ranks rank_tokens
    #                              (normalization.py)
    reduce: str = "mean"         # mean | sum | local
    clip: str = "asked"          # asked | unasked | none | micro_each | micro_contribution | micro_running
    #                              | before_unscale
    norm: float | None = None    # the clip norm in effect (asked, or inferred)
    decay: str = "none"          # none | coupled | lr_free
    rate: float = 0.0

    def changes(self, expected: str = "window") -> int:
        """How many choices differ from the careful loop's (`expected`: its division, "tokens" on the token
        caliber)."""
        return sum([self.division != expected, self.reduce != "mean", self.clip != "asked", self.decay != "none"])


def expected_division(steps: list[ObservedStep]) -> str:
    """The careful loop's normalization: the token mean over the window where the steps carry token counts."""
    return "tokens" if any(s.counts is not None for s in steps) else "window"


def window_gradient(step: ObservedStep, model: Model, accum: int) -> np.ndarray:
    """The gradient the optimizer is handed under `model`'s division, reduction and clipping."""
    per_rank = []
    total = sum(sum(c) for c in step.counts.values()) if step.counts is not None else None
    for rank, gs in step.grads.items():
        counts = step.counts[rank] if step.counts is not None else None
        ws = normalization.weights(model.division, len(gs), counts, total, accum, len(step.grads))
        if model.clip == "micro_each":
            acc = sum(clip(g, model.norm) * w for g, w in zip(gs, ws))
        elif model.clip == "micro_contribution":
            acc = sum(clip(g * w, model.norm) for g, w in zip(gs, ws))
        elif model.clip == "micro_running":
            acc = np.zeros_like(gs[0])
            for g, w in zip(gs, ws):
                acc = clip(acc + g * w, model.norm)
        else:
            acc = sum(g * w for g, w in zip(gs, ws))
        per_rank.append(acc)
    if model.reduce == "local":      # no all-reduce: rank 0 (whose parameters are recorded) on its own gradient
        per_rank = per_rank[:1]
    g = np.sum(per_rank, axis=0) if model.reduce == "sum" else np.mean(per_rank, axis=0)
    if model.clip in ("asked", "unasked"):
        g = clip(g, model.norm)
    # "none": clipping was asked and not applied
    elif model.clip == "before_unscale":
        g = clip(g, model.norm / step.loss_scale)
    return g


def plain_sgd(size: int) -> UpdateRule:
    """Δ = -lr·g: the rule of the truth caliber's own recipe (SGD, no momentum, no decay)."""
    return UpdateRule("sgd", [Group(np.ones(size, dtype=bool), "sgd")])


def predict_all(steps: list[ObservedStep], model: Model, accum: int, rule: UpdateRule | None = None
                ) -> list[np.ndarray]:
    """Each step's Δθ under `model`, the optimizer's `rule` replayed over the steps in order (a rule with state
    needs them consecutive from step 1: `judge` passes only those)."""
    if not steps:
        return []
    rule = (rule or plain_sgd(steps[0].theta.size)).fresh()
    out = []
    for s in steps:
        delta = rule.delta(s.step, window_gradient(s, model, accum), s.theta_prev, s.lrs)
        if model.decay == "coupled":
            delta = delta - s.lr * model.rate * s.theta_prev
        elif model.decay == "lr_free":
            delta = delta - model.rate * s.theta_prev
        out.append(delta)
    return out


def predict(step: ObservedStep, model: Model, accum: int) -> np.ndarray:
    """One step's Δθ under `model` with plain SGD (stateless: needs no other step)."""
    return predict_all([step], model, accum)[0]


def fits(steps: list[ObservedStep], model: Model, accum: int, rule: UpdateRule | None = None) -> bool:
    return all(s.matches(d) for s, d in zip(steps, predict_all(steps, model, accum, rule)))


def _inferred_norm(steps: list[ObservedStep], base: Model, accum: int, rule: UpdateRule | None = None
                   ) -> float | None:
    """The one clip norm that binding steps show, or None. Plain SGD: |Δ|/lr below the raw norm; any other rule:
    the gradient norm the optimizer held at the step (the step record's `grad_norm`, read after clipping) below
    the raw window gradient's."""
    norms = []
    if rule is None or rule.plain_sgd:
        for s, d in zip(steps, predict_all(steps, base, accum)):
            raw = float(np.linalg.norm(d)) / s.lr if s.lr else 0.0
            seen = float(np.linalg.norm(s.delta)) / s.lr if s.lr else 0.0
            if s.lr and seen < raw * (1 - 1e-3):
                norms.append(seen)
    else:
        for s in steps:
            held, raw = s.row.get("grad_norm"), float(np.linalg.norm(window_gradient(s, base, accum)))
            if held is not None and float(held) < raw * (1 - 1e-3):
                norms.append(float(held))
    return float(np.median(norms)) if norms else None


def _decay(steps: list[ObservedStep], base: Model, accum: int, kind: str, rule: UpdateRule | None = None
           ) -> float | None:
    """Least-squares decay rate from the residual Δobs - Δpred against -lr·θ (coupled) or -θ (LR-free)."""
    num = den = 0.0
    for s, d in zip(steps, predict_all(steps, base, accum, rule)):
        residual = s.delta - d
        basis = -(s.lr if kind == "coupled" else 1.0) * s.theta_prev
        num += float(residual @ basis)
        den += float(basis @ basis)
    rate = num / den if den else 0.0
    return rate if rate > 0 else None


def candidate_models(steps: list[ObservedStep], cal: Caliber, rule: UpdateRule | None = None) -> list[Model]:
    accum, asked = cal.grad_accum, cal.grad_clip
    reductions = ("mean", "sum", "local") if cal.world_size > 1 else ("mean",)
    models: list[Model] = []
    for division in normalization.divisions(expected_division(steps) == "tokens", cal.world_size):
        for reduce in reductions:
            base = Model(division, reduce, "asked", asked)
            models.append(base)
            if asked is None:
                norm = _inferred_norm(steps, base, accum, rule)
                if norm is not None:
                    models.append(replace(base, clip="unasked", norm=norm))
            else:
                models += [replace(base, clip=c) for c in ("none", "micro_each", "micro_contribution",
                                                          "micro_running")]
                if all(s.loss_scale for s in steps):
                    models.append(replace(base, clip="before_unscale"))
            for kind in ("coupled", "lr_free"):
                rate = _decay(steps, base, accum, kind, rule)
                if rate is not None:
                    models.append(replace(base, decay=kind, rate=rate))
    return models


WORDS: dict[str, Callable[[Model, Caliber], tuple[str, str]]] = {
    "division:accum": lambda m, c: ("window.short_underscaled", f"the short last window's losses divided by "
                                    f"grad_accum={c.grad_accum} instead of its own size"),
    "division:none": lambda m, c: ("loss.window_summed", "the window's micro-batch losses summed, not averaged"),
    "reduce:sum": lambda m, c: ("ddp.grad_summed", f"gradients summed over the {c.world_size} ranks, not averaged"),
    "reduce:local": lambda m, c: ("ddp.unsynchronized", f"gradients not synchronized: each of the {c.world_size} "
                                  "ranks stepped on its own gradient (rank 0's parameters follow rank 0's data only)"),
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
         "ddp.unsynchronized": "a distributed process group and DDP (or the wrapper's distributed mode) on every rank",
         "clip.unasked": CLIP_OFF_KNOB,
         "clip.not_applied": "the wrapper's own clipping at the asked norm, or torch.nn.utils.clip_grad_norm_ "
                             "before optimizer.step()",
         "clip.per_micro_batch": "clip once per optimizer step, after accumulation",
         "clip.before_unscale": "unscale gradients before clipping (scaler.unscale_)",
         "wd.unasked": "weight_decay=0 in the wrapper's optimizer"}


def describe(model: Model, cal: Caliber, expected: str = "window") -> list[tuple[str, str]]:
    """(code, words) of each of `model`'s choices that differs from the careful loop's (`expected` division)."""
    keys = [f"reduce:{model.reduce}", f"clip:{model.clip}", f"decay:{model.decay}"]
    found = [WORDS[k](model, cal) for k in keys if k in WORDS]
    if expected == "tokens":
        return ([normalization.TOKEN_CODES[model.division]] if model.division != expected else []) + found
    return [WORDS[k](model, cal) for k in [f"division:{model.division}"] if k in WORDS] + found


def _scale_words(steps: list[ObservedStep], cal: Caliber, windows: str = "", rule: UpdateRule | None = None) -> str:
    """The median |Δobs|/|Δexp|, over full or short windows only when `windows` says so."""
    expected = Model(expected_division(steps), norm=cal.grad_clip)
    exp = {s.step: d for s, d in zip(steps, predict_all(steps, expected, cal.grad_accum, rule))}
    full = {s.step: len(s.grads[0]) == cal.grad_accum for s in steps}
    moved = [s for s in steps if np.linalg.norm(exp[s.step]) > 0] or steps     # a step at LR 0 scales nothing
    pick = [s for s in moved if not windows or full[s.step] == (windows == "full")] or moved
    scales = [np.linalg.norm(s.delta) / max(np.linalg.norm(exp[s.step]), 1e-300) for s in pick]
    return f"update {np.median(scales):.2f}x expected{f' at {windows} windows' if windows else ''}"


SCALE_WINDOWS = {"loss.window_summed": "full", "window.short_underscaled": "short"}


def expected_deltas(steps: list[ObservedStep], cal: Caliber, rule: UpdateRule | None = None,
                    clipped: bool = True) -> list[np.ndarray]:
    """Each step's expected Δθ: the run's clipping (or none: `clipped=False`), the optimizer's `rule`."""
    model = Model(expected_division(steps), norm=cal.grad_clip if clipped else None)
    return predict_all(steps, model, cal.grad_accum, rule)


def check_update(job: str, steps: list[ObservedStep], cal: Caliber, declared: Callable[[str], str],
                 rule: UpdateRule | None = None) -> list[Finding]:
    """Update findings of one job: `rule` is the optimizer the wrapper stepped (default: plain SGD)."""
    division = expected_division(steps)
    expected = Model(division, norm=cal.grad_clip)
    predicted = dict(zip((s.step for s in steps), predict_all(steps, expected, cal.grad_accum, rule)))
    wrong = [s.step for s in steps if not s.matches(predicted[s.step])]
    if not wrong:
        return []
    good = [m for m in candidate_models(steps, cal, rule)
            if m.changes(division) and fits(steps, m, cal.grad_accum, rule)]
    first, step = wrong[0], next(s for s in steps if s.step == wrong[0])
    exp_delta = predicted[first]
    base = dict(job=job, first_step=first, expected=round(float(np.linalg.norm(exp_delta)), 8),
                observed=round(float(np.linalg.norm(step.delta)), 8),
                evidence={"steps_differing": wrong})
    if not good:
        cos = float(step.delta @ exp_delta / (np.linalg.norm(step.delta) * np.linalg.norm(exp_delta) + 1e-300))
        return [Finding(code="unexplained.update", title="parameter update differs from the oracle's (unexplained)",
                        size=f"{_scale_words(steps, cal, rule=rule)} (median), cosine {cos:.4f} at step {first}; "
                             f"{len(wrong)} of {len(steps)} steps differ",
                        declared=declared("unexplained.update"), **base)]
    simplest = min(m.changes(division) for m in good)
    best = [m for m in good if m.changes(division) == simplest]
    findings = []
    for code, words in dict.fromkeys(d for d in describe(best[0], cal, division)):
        others = [w for m in best[1:] for c, w in describe(m, cal, division) if c != code]
        findings.append(Finding(code=code, title=words, explained_by=[words, *dict.fromkeys(others)],
                                size=f"{_scale_words(steps, cal, SCALE_WINDOWS.get(code, ''), rule)}; "
                                     f"{len(wrong)} of {len(steps)} steps differ",
                                knob=KNOBS.get(code, "") or (normalization.TOKEN_KNOB if code.startswith("loss_norm.")
                                                             else ""), declared=declared(code), **base))
    return findings
