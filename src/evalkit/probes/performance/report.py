"""The performance probe's markdown: per depth the blocks and the paired figures, the fit and its extrapolation,
training memory, start-up and the import footprint per arm."""
from __future__ import annotations

import statistics

from evalkit.names import STARTUP_MILESTONES
from evalkit.probes.performance.arms import ArmJob, Memory
from evalkit.probes.performance.blocks import Estimate, Interval
from evalkit.probes.performance.plan import BASELINE, WRAPPER, size_name


def _iv(p: Interval, scale: float = 1.0, digits: int = 3, sign: str = "") -> str:
    return (f"{p.estimate * scale:{sign}.{digits}f} [{p.low * scale:{sign}.{digits}f}, "
            f"{p.high * scale:{sign}.{digits}f}]")


def size_table(est: Estimate, arms: list[ArmJob]) -> str:
    rows = ["| size | steps per block | rounds | baseline ms/step | wrapper ms/step | added ms/step | step ratio | "
            "training MiB (baseline / wrapper) |", "|---|---|---|---|---|---|---|---|"]
    for w in est.sizes:
        mib = {a.arm: a.train_mib for a in arms if a.depth == w.depth}
        memory = (f"{mib[BASELINE]:.1f} / {mib[WRAPPER]:.1f}" if mib.get(BASELINE) is not None
                  and mib.get(WRAPPER) is not None else "-")
        rows.append(f"| {size_name(w.depth)} | {w.steps} | {w.rounds} | {w.baseline_ms:.3f} | {w.wrapper_ms:.3f} | "
                    f"{_iv(est.added[w.depth], sign='+')} | {_iv(est.ratio[w.depth])} | {memory} |")
    return "\n".join(rows)


def fit_text(est: Estimate, budget: float) -> str:
    f = est.fraction
    if est.fixed_ms is None:
        how = "One depth only: no fit; the step ratio minus one is taken as the fraction (a fixed cost counted as " \
              "proportional)."
    else:
        how = (f"Fitted over the sizes: added ms per step = {est.fixed_ms:+.3f} + {est.proportional:+.4f} x the "
               "baseline's ms per step.")
    return (f"{how} On a model whose step takes {est.reference_ms:g} ms the wrapper adds "
            f"{_iv(f, 100, 2, '+')}% of the step ({100 * est.level:.2f}% interval over {f.batches} batches of "
            f"{est.rounds} rounds; the level every look of the run used); budget {100 * budget:g}%.")


def startup_medians(arms: list[ArmJob]) -> dict[str, dict[str, float]]:
    """arm -> milestone -> median seconds since the process started (the jobs start two at a time, each on a core
    of its own)."""
    out: dict[str, dict[str, float]] = {}
    for arm in (BASELINE, WRAPPER):
        for m in STARTUP_MILESTONES:
            values = [a.startup[m] for a in arms if a.arm == arm and m in a.startup]
            if values:
                out.setdefault(arm, {})[m] = statistics.median(values)
    return out


def startup_table(arms: list[ArmJob]) -> str:
    startup = startup_medians(arms)
    head = " | ".join(f"{m.replace('_', ' ')} s" for m in STARTUP_MILESTONES)
    rows = [f"| arm | {head} | import footprint MiB |", "|---" * (len(STARTUP_MILESTONES) + 2) + "|"]
    for arm in (BASELINE, WRAPPER):
        imports = [a.import_mib for a in arms if a.arm == arm and a.import_mib]
        cells = [f"{startup.get(arm, {})[m]:.2f}" if m in startup.get(arm, {}) else "-" for m in STARTUP_MILESTONES]
        rows.append(f"| {arm} | " + " | ".join(cells) + f" | {statistics.median(imports):.0f} |" if imports
                    else f"| {arm} | " + " | ".join(cells) + " | - |")
    return "\n".join(rows)


def sections(est: Estimate | None, arms: list[ArmJob], budget: float, memory: Memory | None) -> list[str]:
    jobs = "\n".join(f"- {a.name}: {a.job.status}" + (f" ({a.job.failure_reason})" if a.job.failure_reason else "")
                     for a in sorted(arms, key=lambda a: (a.depth, a.arm)))
    out = []
    if est is not None:
        out.append("## Per size: blocks taken in turns, wrapper against baseline (paired by round)\n\n"
                   + size_table(est, arms))
        out.append("## Per-step cost, extrapolated\n\n" + fit_text(est, budget))
    if memory is not None:
        out.append("## Training memory\n\n" + memory.note[0].upper() + memory.note[1:] + ".")
    out.append("## Start-up (median seconds since the process started; the jobs start two at a time, each on a core "
               "of its own) and import footprint\n\n" + startup_table(arms))
    out.append("## Jobs\n\n" + jobs)
    return out
