"""Report plots as PNG bytes: loss curves with seed bands, LR schedules, throughput and memory ratios, and (from
`probe_plots`) per run of a probe of differences its LR and update scale against what a careful loop does.

Uses matplotlib's object API (`matplotlib.figure.Figure`), so no pyplot state or GUI backend is
touched. Curves are thinned to at most `MAX_POINTS` steps: the plot cannot show more.
"""
from __future__ import annotations

import math
from itertools import groupby

import numpy as np
from matplotlib.figure import Figure

from evalkit.analysis.arms import Arm
from evalkit.analysis.compare import BUDGET
from evalkit.analysis.curves import CurveSet, align, divergence_band, empty_curves, seed_curves
from evalkit.verdict.build import Row, Verdict
from evalkit.verdict.figure import Plot, png, thin
from evalkit.verdict.probe_plots import probe_plots, semantic_probe_runs

COLS = 3
LOSS_CAPTION = ("Look for the blue line (the wrapper's mean over seeds) leaving the grey band, which is where seed "
                "noise alone would put it given the baseline's seeds; a red dotted line marks the first step it "
                "leaves. Inside the band the wrapper trains like the baseline.")
LR_CAPTION = ("The schedules should lie on top of each other: a shifted or stretched curve means the wrapper steps "
              "the scheduler at another cadence (per micro-batch, per epoch) or counts steps differently.")
PERFORMANCE_CAPTION = ("Each point is the wrapper's ratio to the baseline with its interval; the red dashed line is "
                       "the budget. Throughput left of it, or peak memory right of it, fails the budget; an "
                       "interval that crosses it is inconclusive.")
def all_plots(verdict: Verdict) -> list[Plot]:
    plots: list[Plot] = []
    groups = groupby(verdict.rows, key=lambda r: (r.key.task, r.key.caliber))
    for i, ((task, caliber), rows) in enumerate(groups, start=1):
        rows = list(rows)
        where = f"{task} [{caliber}]"
        plots.append(Plot(f"loss_{task}_{i}.png", f"Training loss vs baseline band, {where}",
                          loss_figure(rows, verdict), LOSS_CAPTION))
        plots.append(Plot(f"lr_{task}_{i}.png", f"Learning-rate schedules, {where}", lr_figure(rows, verdict),
                          LR_CAPTION))
    if any(c.kind == BUDGET for r in verdict.rows for c in r.comparisons):
        plots.append(Plot("performance.png", "Throughput and peak memory vs baseline", performance_figure(verdict),
                          PERFORMANCE_CAPTION))
    return plots + probe_plots(semantic_probe_runs(verdict))


def _curves(arm: Arm | None, column: str) -> CurveSet:
    return seed_curves(arm.finished, column) if arm else empty_curves()


def loss_figure(rows: list[Row], verdict: Verdict) -> bytes:
    """One panel per wrapper arm: the baseline band (where the wrapper's seed mean should stay;
    see `evalkit.analysis.curves`), the wrapper's mean ± 1 sd over seeds, the divergence step."""
    column = verdict.options.curve_column
    n_rows = math.ceil(len(rows) / COLS)
    fig = Figure(figsize=(4.2 * min(COLS, len(rows)), 3.0 * n_rows))
    axes = fig.subplots(n_rows, min(COLS, len(rows)), squeeze=False,
                        gridspec_kw=dict(left=0.06, right=0.98, bottom=0.12 / n_rows, top=1 - 0.1 / n_rows,
                                         hspace=0.45, wspace=0.2)).ravel()
    for ax, row in zip(axes, rows):
        wrap = _curves(verdict.arms[row.key], column)
        base = _curves(verdict.arms.get(row.baseline), column)
        ax.set_title(row.key.label, fontsize=9)
        if wrap.n_seeds and base.n_seeds:
            _draw_band(ax, wrap, base, verdict.options.curve_confidence, verdict.options.curve_rtol)
        if row.divergence_step is not None:
            ax.axvline(row.divergence_step, color="crimson", ls=":", lw=1, label=f"leaves band @ {row.divergence_step}")
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.tick_params(labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
    for ax in axes[len(rows):]:
        ax.set_visible(False)
    return png(fig)


def _draw_band(ax, wrap: CurveSet, base: CurveSet, confidence: float, rtol: float) -> None:
    band = divergence_band(wrap, base, confidence, rtol)
    steps, wrap, _ = align(wrap, base)
    keep = thin(steps)
    x, center, half = steps[keep], band.center[keep], band.half[keep]
    kind = "paired" if band.paired else "unpaired"
    ax.fill_between(x, center - half, center + half, color="0.6", alpha=0.5,
                    label=f"baseline band ({base.n_seeds} seeds, {kind})")
    ax.plot(x, center, color="black", lw=0.8)
    mean, sd = wrap.mean()[keep], np.nan_to_num(wrap.sd()[keep])
    ax.fill_between(x, mean - sd, mean + sd, color="tab:blue", alpha=0.15)
    ax.plot(x, mean, color="tab:blue", lw=0.9, label=f"wrapper mean ± sd ({wrap.n_seeds} seeds)")
    finite = center[np.isfinite(center)]
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 20:
        ax.set_yscale("log")


def lr_figure(rows: list[Row], verdict: Verdict) -> bytes:
    """Every arm's LR (mean over seeds) on one axis; the baseline dashed black."""
    fig = Figure(figsize=(7, 3.2))
    ax = fig.subplots(gridspec_kw=dict(left=0.12, right=0.98, bottom=0.15, top=0.95))
    base_key = rows[0].baseline
    for key, style in [(base_key, dict(color="black", ls="--", lw=1.6))] + [(r.key, dict(lw=1)) for r in rows]:
        curves = _curves(verdict.arms.get(key), "lr")
        if key is None or not curves.steps.size:
            continue
        keep = thin(curves.steps)
        ax.plot(curves.steps[keep], curves.mean()[keep], label=key.label, **style)
    ax.set_xlabel("optimizer step", fontsize=8)
    ax.set_ylabel("learning rate", fontsize=8)
    ax.tick_params(labelsize=7)
    if ax.lines:
        ax.legend(fontsize=7, ncol=2, loc="upper right")
    return png(fig)


def performance_figure(verdict: Verdict) -> bytes:
    """Throughput and peak-memory ratios with their intervals; dashed lines mark the budgets."""
    height = 0.8 + 0.25 * max(len(verdict.rows), 4)
    fig = Figure(figsize=(12, height))
    axes = fig.subplots(1, 2, sharey=True, gridspec_kw=dict(left=0.4, right=0.98, bottom=0.5 / height,
                                                            top=1 - 0.35 / height, wspace=0.08))
    labels = [f"{r.key.label} {r.key.task} [{r.key.caliber}]" for r in verdict.rows]
    limits = {True: verdict.options.throughput_min, False: verdict.options.memory_max}
    for ax, higher, title in zip(axes, (True, False), ("throughput ratio", "peak memory ratio")):
        points = [(y, c) for y, row in enumerate(verdict.rows) for c in row.comparisons
                  if c.kind == BUDGET and c.higher_is_better == higher and math.isfinite(c.ratio)]
        if points:  # one errorbar call per panel: matplotlib's per-call cost dominates otherwise
            ys, comps = zip(*points)
            ratio = np.array([c.ratio for c in comps])
            low = np.nan_to_num(ratio - [c.ratio_low for c in comps]).clip(0)
            high = np.nan_to_num(np.array([c.ratio_high for c in comps]) - ratio).clip(0)
            ax.errorbar(ratio, ys, xerr=[low, high], fmt="o", color="tab:blue", capsize=3)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.axvline(limits[higher], color="crimson", ls="--", lw=1)
        ax.set_title(title + " (wrapper / baseline)", fontsize=9)
        ax.tick_params(labelsize=6)
    axes[0].set_yticks(range(len(labels)), labels)
    axes[0].invert_yaxis()
    return png(fig)
