"""The performance probe's judge: the time per step the wrapper adds, extrapolated to a real model's step, and the
training memory it adds, each against its budget.

Time: the added time per optimizer step at the user's step time (`probe.performance.reference_step_ms`, 100 ms
when not said), as a fraction of it, the fixed ms per step beside it in the cell (blocks.py: the fit over the sizes
and its batch-means interval, at the decision level every look of the run used). Within the budget
(`probe.performance.budget`, 5 %) when the whole interval lies below it, outside when it lies above, else undecided:
inconclusive, with the rounds it would take. Why 5 %: the issue's two fixed points, an identical copy must pass and
a copy 10 % slower per step must fail, with the same margin on both sides; scripts/bench_performance_probe.py
measures how often each happens (docs/probes/performance.md has the counts).

Memory: the training memory (the peak above the import footprint) of the wrapper's job at the largest depth against
the baseline's, plus `probe.performance.memory_budget` of it (10 %); two processes of one program differ by up to
`MEMORY_NOISE_MIB` (allocator arenas, pages: measured between identical copies by the benchmark above), so the
wrapper is within only when below the budget by that much, outside when above it by that much, else undecided
(inconclusive).

When the cell is not a pass, the probe's second phase profiles both arms (plan.profile_jobs): the report then says
where the added time and memory go (attribution.py). A wrapper job that failed is a fail (its reason); a baseline
job that failed leaves the probe inconclusive (evalkit's own control arm). The judge reads the budget and the looks
from the jobs' resolved configs.
"""
from __future__ import annotations

import numpy as np

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult
from evalkit.probes.performance import attribution
from evalkit.probes.performance.arms import MEMORY_NOISE_MIB, NOT_JUDGED, ArmJob, Memory
from evalkit.probes.performance.blocks import (
    REFERENCE_STEP_MS,
    Estimate,
    Size,
    decide,
    decision_level,
    estimate,
    rounds_needed,
)
from evalkit.probes.performance.plan import BASELINE, PROFILE, WRAPPER, YOURS, parse_name, size_name
from evalkit.probes.performance.report import sections, startup_medians

DEFAULTS = {"budget": 0.05, "memory_budget": 0.10, "max_rounds": 512, "reference_step_ms": REFERENCE_STEP_MS}


def settings(jobs: list[JobEvidence]) -> dict:
    for job in jobs:
        found = job.config.get("probe", {}).get("performance")
        if found:
            return {**DEFAULTS, **found}
    return dict(DEFAULTS)


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    profiles = {j.name: j for j in jobs if j.name.endswith(PROFILE)}
    arms = [ArmJob.of(j) for j in jobs if not j.name.endswith(PROFILE)]
    result = _judge(arms, jobs)
    mode = _mode(jobs)
    if mode:
        result.notes.append(MODE_LABELS.get(mode, f"timed in {mode} mode"))
    where = _attribution(profiles)
    if where:
        result.sections.append(where)
    return result


MODE_LABELS = {
    "aligned": "timed in aligned mode: the wrapper's loggers and progress bars off, as in your loop",
    "defaults": "timed in defaults mode: the wrapper's loggers and progress bars as its quick start leaves them",
}


def _mode(jobs: list[JobEvidence]) -> str:
    """The mode the wrapper's jobs ran in (its resolved config's trainer.mode)."""
    for job in jobs:
        if parse_name(job.name.removesuffix(PROFILE))[1] == WRAPPER:
            return str(job.config.get("trainer", {}).get("mode") or "")
    return ""


def _attribution(profiles: dict[str, JobEvidence]) -> str | None:
    """The report's section on where the added time and memory go, from the two profile jobs (None without both)."""
    by_arm = {parse_name(name.removesuffix(PROFILE))[1]: job for name, job in profiles.items()}
    base, wrap = by_arm.get(BASELINE), by_arm.get(WRAPPER)
    if base is None or wrap is None:
        return None
    depth = parse_name(wrap.name.removesuffix(PROFILE))[0]
    if not base.profile or not wrap.profile:
        return (f"## Where the added time goes\n\nThe profile jobs did not record a profile ({base.name}: "
                f"{base.status}, {wrap.name}: {wrap.status}).")
    return "## Where the added time goes\n\n" + attribution.section(base.profile, wrap.profile, size_name(depth))


def _judge(arms: list[ArmJob], jobs: list[JobEvidence]) -> ProbeResult:
    chosen = settings(jobs)
    budget, level = chosen["budget"], decision_level(int(chosen["max_rounds"]))
    result = ProbeResult("performance", passed=False, notes=[])
    failed = [a for a in arms if not a.finished]
    wrapper_failed = [a for a in failed if a.arm == WRAPPER and not a.job.failure_reason.startswith("not run")]
    if wrapper_failed:
        first = wrapper_failed[0]
        result.headline = f"the wrapper's job {first.name} {first.job.status.lower()}"
        result.notes.append(f"{first.name} {first.job.status}: {first.job.failure_reason or 'no reason recorded'}")
        result.sections = sections(None, arms, budget, None)
        return result
    if failed:
        first = failed[0]
        return _inconclusive(result, arms, budget, f"job {first.name} {first.job.status.lower()}: "
                             f"{first.job.failure_reason or 'no reason recorded'}: run the probe again")
    sizes = _sizes(arms)
    if sizes is None:
        return _inconclusive(result, arms, budget, "the jobs recorded no blocks taken in turns (summary `turns`): "
                                                   "evidence from another version of the probe; run it again")
    est = estimate(sizes, level, float(chosen["reference_step_ms"]))
    memory = _memory(arms, chosen["memory_budget"])
    result.figures = {**_figures(est, arms), **({"memory_not_judged": 1.0} if memory.call == NOT_JUDGED else {})}
    result.sections = sections(est, arms, budget, memory)
    time_call = decide(est.fraction, budget)
    result.headline = _headline(est, budget, memory)
    if time_call == "outside" or memory.call == "outside":
        result.notes += ([_time_note(est, budget)] if time_call == "outside" else []) + \
                        ([memory.note] if memory.call == "outside" else [])
        return result
    if time_call == "within" and memory.call in ("within", NOT_JUDGED):
        result.passed = True
        result.notes += [memory.note] if memory.call == NOT_JUDGED else []
        return result
    result.inconclusive = True
    if time_call == "undecided":
        needed = rounds_needed(est.fraction, budget, est.rounds)
        blocks = 2 * len(est.sizes) * (needed - est.rounds) if needed else 0
        more = (f"about {needed} rounds in all ({needed - est.rounds} more, {blocks} blocks) would "
                "decide it: raise probe.performance.time_limit_s" if needed else
                "its estimate sits on the budget, nearer than two runs of one program differ: no number of rounds "
                "decides it")
        result.notes.append(f"{_time_note(est, budget)}: neither within nor above the budget; {more}")
    if memory.call != "within":
        result.notes.append(memory.note)     # undecided, unmeasured, or not judged (a team's model)
    return result


def _inconclusive(result: ProbeResult, arms: list[ArmJob], budget: float, why: str) -> ProbeResult:
    result.inconclusive = True
    result.headline = "not measured"
    result.notes.append(why)
    result.sections = sections(None, arms, budget, None)
    return result


def _sizes(arms: list[ArmJob]) -> list[Size] | None:
    out = []
    for depth in sorted({a.depth for a in arms}):
        pair = {a.arm: a for a in arms if a.depth == depth}
        base, wrap = pair.get(BASELINE), pair.get(WRAPPER)
        if base is None or wrap is None or not base.turns.get("blocks_s") or not wrap.turns.get("blocks_s"):
            return None
        n = min(len(base.turns["blocks_s"]), len(wrap.turns["blocks_s"]))
        out.append(Size(depth, int(base.turns["steps_per_block"]), np.array(base.turns["blocks_s"][:n]),
                         np.array(wrap.turns["blocks_s"][:n])))
    return out or None


def _memory(arms: list[ArmJob], memory_budget: float) -> Memory:
    depth = max(a.depth for a in arms)
    pair = {a.arm: a.train_mib for a in arms if a.depth == depth}
    base, wrap = pair.get(BASELINE), pair.get(WRAPPER)
    if base is None or wrap is None:
        return Memory("unmeasured", depth)
    allowed = memory_budget * base
    if depth == YOURS:
        return Memory(NOT_JUDGED, depth, base, wrap, allowed)
    added = wrap - base
    call = "within" if added < allowed - MEMORY_NOISE_MIB else "outside" if added > allowed + MEMORY_NOISE_MIB \
        else "undecided"
    return Memory(call, depth, base, wrap, allowed)


def _time_note(est: Estimate, budget: float) -> str:
    f = est.fraction
    return (f"added time per step at a {est.reference_ms:g} ms step: {100 * f.estimate:+.2f}% "
            f"[{100 * f.low:+.2f}, {100 * f.high:+.2f}] ({100 * est.level:.2f}% interval, {est.rounds} rounds), "
            f"budget {100 * budget:g}%")


def _headline(est: Estimate, budget: float, memory: Memory) -> str:
    f = est.fraction
    line = f"{100 * f.estimate:+.2f}% [{100 * f.low:+.2f},{100 * f.high:+.2f}] of a {est.reference_ms:g} ms step"
    if est.fixed_ms is not None:
        line += f" ({est.fixed_ms:+.2f} ms/step + {100 * est.proportional:+.1f}% of the step)"
    line += f", budget {100 * budget:g}%, {est.rounds} rounds"
    if memory.call == "outside":
        line += f", training memory {memory.wrapper_mib - memory.baseline_mib:+.1f} MiB @{size_name(memory.depth)}"
    elif memory.call == "undecided":     # the cell is inconclusive on memory alone where the time is decided
        line += (f", training memory {memory.wrapper_mib - memory.baseline_mib:+.1f} MiB "
                 f"@{size_name(memory.depth)} undecided (budget +{memory.budget_mib:.1f} MiB, "
                 f"noise {MEMORY_NOISE_MIB:g} MiB)")
    elif memory.call == "unmeasured":
        line += ", training memory not measured"
    elif memory.call == NOT_JUDGED:
        line += (f", training memory {memory.wrapper_mib - memory.baseline_mib:+.1f} MiB @{size_name(memory.depth)} "
                 "not judged")
    return line


def _figures(est: Estimate, arms: list[ArmJob]) -> dict[str, float]:
    figures: dict[str, float] = {"rounds": float(est.rounds), "level": est.level,
                                 "reference_step_ms": est.reference_ms,
                                 "added_fraction": est.fraction.estimate,
                                 "added_fraction_low": est.fraction.low,
                                 "added_fraction_high": est.fraction.high}
    if est.fixed_ms is not None:
        figures["added_ms_per_step"], figures["added_proportional"] = est.fixed_ms, est.proportional
    for w in est.sizes:
        key = f"d{w.depth}"
        figures[f"{key}/steps_per_block"] = float(w.steps)
        figures[f"{key}/baseline_ms"], figures[f"{key}/wrapper_ms"] = w.baseline_ms, w.wrapper_ms
        for name, iv in (("added_ms", est.added[w.depth]), ("ratio", est.ratio[w.depth])):
            figures[f"{key}/{name}"], figures[f"{key}/{name}_low"] = iv.estimate, iv.low
            figures[f"{key}/{name}_high"] = iv.high
        for arm in (BASELINE, WRAPPER):
            mib = next((a.train_mib for a in arms if a.depth == w.depth and a.arm == arm), None)
            if mib is not None:
                figures[f"{key}/train_mib/{arm}"] = mib
    for arm, milestones in startup_medians(arms).items():
        for m, seconds in milestones.items():
            figures[f"startup/{m}_s/{arm}"] = seconds
    return figures
