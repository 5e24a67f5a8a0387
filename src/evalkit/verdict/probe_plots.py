"""Per probe run whose findings are differences from your loop (`Dimension.differences`: the semantic probe's): its
LR and update scale per optimizer step against what a careful loop does."""
from __future__ import annotations

import re

import numpy as np
from matplotlib.figure import Figure

from evalkit.analysis.records import RunRecord, probe_runs
from evalkit.probes.catalog import dimension, dimension_names
from evalkit.verdict.build import Verdict
from evalkit.verdict.figure import Plot, png, thin

PROBE_CAPTION = ("Left: the learning rate per optimizer step, expected (dashed) and observed (solid), one colour "
                 "per job; right: the update scale, |observed update| / |expected update|, against the line at 1. "
                 "Observed LR on the dashed line and update scale on 1 mean the wrapper did what a careful loop "
                 "does; a step where they leave it is where a finding starts (dotted lines mark each finding's "
                 "first step).")



def semantic_probe_runs(verdict: Verdict) -> list[RunRecord]:
    """Every run behind the verdict of a probe whose findings are differences from your loop, once (each joins every
    arm of its trainer and mode)."""
    runs = [r for arm in verdict.arms.values() for r in arm.runs]
    return [run for dim in dimension_names() if dimension(dim).differences for run in probe_runs(runs, dim)]


def probe_plots(runs: list[RunRecord]) -> list[Plot]:
    """One figure per probe run whose result holds series to draw."""
    plots = []
    for i, run in enumerate(runs, start=1):
        result = run.probe_results.get(run.probe) or {}
        jobs = probe_series(result)
        if jobs:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{run.probe}_{run.trainer}_{run.mode}_{i}.png")
            title = f"{run.trainer}/{run.mode} {run.probe} probe"
            plots.append(Plot(name, title, probe_figure(title, jobs, _first_steps(result)), PROBE_CAPTION))
    return plots


PROBE_COLUMNS = ("expected_lr", "observed_lr", "update_scale")


def probe_series(result: dict) -> dict[str, dict[str, np.ndarray]]:
    """job -> column -> floats (null or non-numeric as NaN), `step` included (1, 2, ... when not recorded); only
    jobs with a finite value to draw."""
    series = result.get("series")
    out = {}
    for job, columns in (series.items() if isinstance(series, dict) else ()):
        if not isinstance(columns, dict):
            continue
        drawn = {c: _floats(columns[c]) for c in PROBE_COLUMNS if isinstance(columns.get(c), list)}
        if not any(np.isfinite(v).any() for v in drawn.values()):
            continue
        n = max(len(v) for v in drawn.values())
        step = _floats(columns["step"]) if isinstance(columns.get("step"), list) else np.arange(1.0, n + 1)
        out[str(job)] = {"step": step, **drawn}
    return out


def _floats(values: list) -> np.ndarray:
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            pass
    return out


def _first_steps(result: dict) -> dict[str, list[float]]:
    """job -> the first steps of its findings, to mark on the plot."""
    out: dict[str, list[float]] = {}
    for f in result.get("findings") or []:
        if isinstance(f, dict) and isinstance(f.get("first_step"), (int, float)):
            out.setdefault(str(f.get("job")), []).append(float(f["first_step"]))
    return out


def probe_figure(title: str, jobs: dict[str, dict[str, np.ndarray]], first_steps: dict[str, list[float]]) -> bytes:
    """LR per optimizer step (expected dashed, observed solid) beside the update scale (reference line at 1),
    one colour per job; each finding's first step dotted in its job's colour."""
    fig = Figure(figsize=(11, 3.6))
    fig.suptitle(title, fontsize=10)
    lr_ax, scale_ax = fig.subplots(1, 2, gridspec_kw=dict(left=0.07, right=0.98, bottom=0.15, top=0.85, wspace=0.22))
    scale_ax.axhline(1.0, color="black", lw=0.8, ls=":", label="as expected (1)")
    for i, (job, cols) in enumerate(jobs.items()):
        color = f"C{i % 10}"
        for ax, column, style, label in ((lr_ax, "expected_lr", "--", f"{job} expected"),
                                         (lr_ax, "observed_lr", "-", f"{job} observed"),
                                         (scale_ax, "update_scale", "-", job)):
            _line(ax, cols["step"], cols.get(column), color=color, ls=style, lw=1.4 if style == "--" else 0.9,
                  label=label)
        for step in first_steps.get(job, []):
            for ax in (lr_ax, scale_ax):
                ax.axvline(step, color=color, ls=":", lw=1)
    _log_if_wide(scale_ax, [c.get("update_scale") for c in jobs.values()])
    for ax, what in ((lr_ax, "learning rate"), (scale_ax, "update scale (observed / expected)")):
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.set_ylabel(what, fontsize=8)
        ax.tick_params(labelsize=7)
        if len(ax.lines) <= 1:   # nothing but the reference line
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", color="0.5")
        else:
            ax.legend(fontsize=7, loc="best")
    return png(fig)


def _line(ax, step: np.ndarray, values: np.ndarray | None, **style) -> None:
    if values is None:
        return
    n = min(step.size, values.size)
    if n and np.isfinite(values[:n]).any():
        keep = thin(step[:n])
        ax.plot(step[:n][keep], values[:n][keep], **style)


def _log_if_wide(ax, columns: list[np.ndarray | None]) -> None:
    values = np.concatenate([c for c in columns if c is not None] or [np.empty(0)])
    values = values[np.isfinite(values)]
    if values.size and values.min() > 0 and values.max() / values.min() > 20:
        ax.set_yscale("log")
