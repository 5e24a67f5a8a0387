"""The performance probe's markdown: per width the paired figures, the fitted per-step cost, start-up and import
footprint per arm."""
from __future__ import annotations

import statistics

from evalkit.names import STARTUP_MILESTONES
from evalkit.probes.performance.measure import REFERENCE_STEP_MS, Fit, JobTiming, Paired, WidthResult
from evalkit.probes.performance.plan import BASELINE, WRAPPER

MIB = 2**20


def _interval(p: Paired | None, scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
    if p is None:
        return "-"
    return f"{p.estimate * scale:.{digits}f}{unit} [{p.low * scale:.{digits}f}, {p.high * scale:.{digits}f}]"


def width_table(widths: list[WidthResult]) -> str:
    rows = ["| width | pairs | baseline ms/step | wrapper ms/step | added ms/step | step ratio | training MiB "
            "(baseline / wrapper) | memory ratio | timing |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in widths:
        mem = [(b.train_mem, w.train_mem) for b, w in r.pairs if b.train_mem and w.train_mem]
        mib = (f"{statistics.median(b for b, _ in mem) / MIB:.1f} / {statistics.median(w for _, w in mem) / MIB:.1f}"
               if mem else "-")
        rows.append(f"| h{r.width} | {len(r.pairs)} | {r.baseline_ms:.3f} | {r.wrapper_ms:.3f} | "
                    f"{_interval(r.added_ms)} | {_interval(r.ratio)} | {mib} | {_interval(r.mem_ratio)} | "
                    f"{'stable' if r.stable else 'unstable: ' + '; '.join(r.problems)} |")
    return "\n".join(rows)


def fit_text(fit: Fit | None) -> str:
    if fit is None:
        return "Per-step cost: not fitted (fewer than two stable pairs)."
    how = ("fitted over the widths: added = fixed + proportional x baseline step time" if fit.proportional
           else "one width: the whole difference taken as a fixed cost per step")
    return f"Per-step cost the wrapper adds ({how}, {fit.fixed.n} pairs): {fit.text()}."


def startup_table(startup: dict[str, dict[str, float]], timings: list[JobTiming]) -> str:
    head = " | ".join(f"{m.replace('_', ' ')} s" for m in STARTUP_MILESTONES)
    rows = [f"| arm | {head} | import footprint MiB |",
            "|---" * (len(STARTUP_MILESTONES) + 2) + "|"]
    for arm in (BASELINE, WRAPPER):
        imports = [t.import_mem for t in timings if t.arm == arm and t.import_mem]
        cells = [f"{startup.get(arm, {})[m]:.2f}" if m in startup.get(arm, {}) else "-" for m in STARTUP_MILESTONES]
        rows.append(f"| {arm} | " + " | ".join(cells) + f" | {statistics.median(imports) / MIB:.0f} |"
                    if imports else f"| {arm} | " + " | ".join(cells) + " | - |")
    return "\n".join(rows)


def sections(widths: list[WidthResult], fit: Fit | None, startup: dict, timings: list[JobTiming]) -> list[str]:
    return [
        "## Step time and training memory, wrapper against baseline (paired by repeat, 95% intervals)\n\n"
        + width_table(widths),
        "## Per-step cost\n\n" + fit_text(fit) + f" The reference model's step takes {REFERENCE_STEP_MS:.0f} ms.",
        "## Start-up (median seconds since the process started) and import footprint\n\n"
        + startup_table(startup, timings),
    ]
