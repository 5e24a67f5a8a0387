"""Runs whose training went non-finite (NaN or inf): where it first happened, from the stored records.

A diverging run usually still finishes: the loop runs to max_steps on NaN weights, and MLflow keeps
its last finite training-loss point while the validation metric reads NaN. The step records
(`records/steps_rank0.csv`) keep every NaN, so the first non-finite step is read from them, then from
the validation records; the final metric alone says only that it happened.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalkit.analysis.records import RunRecord

TRAIN_LOSS = "train loss"


@dataclass(frozen=True)
class NonFinite:
    run: RunRecord
    step: int | None     # first optimizer step with a non-finite value; None when only the final metric shows it
    where: str           # "train loss", "val/<metric>", "val/loss" or "final val/<metric>"


def first_nonfinite(run: RunRecord, metric_key: str) -> NonFinite | None:
    """The first non-finite training loss or validation value of `run`; None when all are finite."""
    found = [_first(run.steps, "loss", TRAIN_LOSS), _first(run.val, metric_key.removeprefix("val/"), metric_key),
             _first(run.val, "loss", "val/loss")]
    found = [f for f in found if f is not None]
    if found:
        step, where = min(found, key=lambda f: f[0])
        return NonFinite(run, step, where)
    if metric_key in run.metrics and not np.isfinite(run.metrics[metric_key]):
        return NonFinite(run, None, f"final {metric_key}")
    return None


def _first(table: dict, column: str, where: str) -> tuple[int, str] | None:
    if column not in table or "step" not in table:
        return None
    bad = ~np.isfinite(np.asarray(table[column], float))
    steps = np.asarray(table["step"])[bad]
    steps = steps[np.isfinite(steps)]
    return (int(steps.min()), where) if steps.size else None


def nonfinite_runs(runs: list[RunRecord], metric_key: str) -> list[NonFinite]:
    """Every run of `runs` that went non-finite, in seed order."""
    found = [f for f in (first_nonfinite(r, metric_key) for r in runs) if f is not None]
    return sorted(found, key=lambda f: (f.run.seed is None, f.run.seed or 0, f.run.repeat))


def first_step(found: list[NonFinite]) -> int | None:
    steps = [f.step for f in found if f.step is not None]
    return min(steps) if steps else None


def seeds_text(found: list[NonFinite], limit: int = 8) -> str:
    """'seeds 1,3' or 'seed 3' (run ids stand in for runs without a seed tag), the first `limit` then '…'."""
    names = list(dict.fromkeys(str(f.run.seed) if f.run.seed is not None else f.run.run_id[:8] for f in found))
    listed = ",".join(names[:limit]) + (",…" if len(names) > limit else "")
    return ("seed " if len(names) == 1 else "seeds ") + listed


def summary(found: list[NonFinite], total: int) -> str:
    """'non-finite from step 20 in 2/5 runs: seeds 1,3' (the consistency figure)."""
    return f"non-finite {since(found)} in {len(found)}/{total} runs: {seeds_text(found)}"


def since(found: list[NonFinite]) -> str:
    step = first_step(found)
    return f"from step {step}" if step is not None else f"in the {found[0].where}"


def detail(found: list[NonFinite]) -> str:
    """'first non-finite train loss at step 20 (seed 1 step 20, seed 3 step 20)'."""
    first = min(found, key=lambda f: (f.step is None, f.step or 0))
    where = f"{first.where} at step {first.step}" if first.step is not None else first.where
    runs = ", ".join(f"seed {f.run.seed} " + (f"step {f.step}" if f.step is not None else f"({f.where})")
                     for f in found[:8])
    return f"first non-finite {where} ({runs}{', …' if len(found) > 8 else ''})"
