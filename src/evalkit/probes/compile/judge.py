"""The compile probe's judge: from the jobs' stored records only.

Judged (a finding each, the cell fails): the wrapper's compiled job did not finish (`compile.failed`: unless the
baseline compiled by hand failed too, then torch.compile itself does not run here and the cell is inconclusive);
dynamo compiled nothing although the run asked it to (`compile.not_compiled`: the wrapper dropped the request); a
compiled step computes something the eager one does not (`compile.changes_step`: a semantic probe finding at the truth
caliber that the compiled job has and the eager one has not). The semantic oracle's tolerance was calibrated on eager
float32 loops; it holds for compiled kernels where the baseline compiled by hand, judged in the same probe run, has
no finding: otherwise what compiling changed cannot be told and that item is inconclusive.

Reported, not judged: the graphs dynamo built, each graph break and recompilation of the wrapper's with its reason
(evalkit's own instruments' are counted apart and never charged), the cold compile time beside the baseline's, and,
when the timed jobs ran (`probe.rounds` above 0), each loop's compiled step time over its eager one, with a 95 %
interval over batch means of the rounds (the performance probe's blocks.py).
"""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from evalkit.probes.compile.plan import BASELINE_COMPILED, COMPILED, EAGER, PAIRS, TIMED, TRUTH, job_name
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult
from evalkit.probes.performance.blocks import Size, estimate
from evalkit.probes.semantics.plan import job_name as semantics_job_name

DIM = "compile"
LEVEL = 0.95               # one look at a fixed number of rounds: no sequential correction
REASONS_SHOWN = 3


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    by = {j.name: j for j in jobs}
    compiled, eager = by.get(job_name(TRUTH, COMPILED)), by.get(job_name(TRUTH, EAGER))
    if compiled is None:
        return ProbeResult(DIM, False, inconclusive=True,
                           notes=["its compiled job did not run: run the probe again (evalkit probe=compile)"])
    baseline = by.get(job_name(TRUTH, BASELINE_COMPILED)) or (compiled if _trainer(compiled) == "baseline" else None)
    findings: list[Finding] = []
    notes: list[str] = []
    figures: dict[str, float] = {}
    if compiled.status != "FINISHED":
        if baseline is not None and baseline is not compiled and baseline.status != "FINISHED":
            return ProbeResult(DIM, False, inconclusive=True, notes=[
                f"the baseline compiled by hand failed too ({baseline.failure_reason or baseline.status}): "
                "torch.compile does not run on this machine; fix that first (a C++ compiler, torch's inductor)"])
        findings.append(Finding(f"{DIM}.failed", "the compiled job did not finish", compiled.name, _last(compiled),
                                size=compiled.failure_reason or compiled.status, explainable=False))
        return _result(findings, figures, notes, "compiled: " + (compiled.failure_reason or compiled.status)[:90])
    record = compiled.summary.get("compile")
    if not record:
        return ProbeResult(DIM, False, inconclusive=True, notes=[
            f"{compiled.name} recorded no compile record (summary `compile`): an evalkit older than the probe?"])
    if not record.get("frames_ok") or not record.get("graphs"):
        findings.append(Finding(f"{DIM}.not_compiled", "asked to compile (train.compile=true), dynamo compiled "
                                "nothing: the wrapper dropped the request", compiled.name, None,
                                size=f"{record.get('graphs', 0)} graphs", explainable=False))
    base_record = (baseline.summary.get("compile") or {}) if baseline is not None else {}
    figures.update(_compile_figures(record, base_record))
    notes += _named(record, "wrapper")
    unjudged: list[str] = []
    same = _same_steps(eager, compiled, baseline, unjudged)
    findings += same[0]
    figures.update(same[1])
    speed = _speed([by[n] for n in by if n.startswith(TIMED + "-")], figures, notes)
    headline = _headline(record, figures, same[2], speed)
    if unjudged and not findings:     # no pass without the step comparison: say what would decide it
        return ProbeResult(DIM, False, [], figures, unjudged + notes, headline=headline, inconclusive=True)
    return _result(findings, figures, unjudged + notes, headline)


def _trainer(job: JobEvidence) -> str:
    return str(job.config.get("trainer", {}).get("name", ""))


def _last(job: JobEvidence) -> int | None:
    return int(job.steps[-1]["step"]) if job.steps else None


def _result(findings, figures, notes, headline) -> ProbeResult:
    return ProbeResult(DIM, not findings, findings, figures, notes, headline=headline, sections=[])


def reason(message: str) -> str:
    """A break's or recompilation's reason in a few words: dynamo's explanation, else its first guard failure."""
    found = re.search(r"Explanation: (.*)", message) or re.search(r"- \d+/\d+: (.*)", message)
    text = (found.group(1) if found else message.splitlines()[0] if message else "").strip()
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return re.sub(r"\s+#.*$", "", text)[:160]


def _of(record: dict, kind: str, origin: str) -> list[dict]:
    return [e for e in record.get(kind, []) if e.get("origin") == origin]


def _compile_figures(record: dict, base: dict) -> dict[str, float]:
    out = {"graphs": float(record.get("graphs", 0)), "compile_s": float(record.get("compile_s", 0.0)),
           "graph_breaks": float(len(_of(record, "graph_breaks", "wrapper"))),
           "recompiles": float(len(_of(record, "recompiles", "wrapper"))),
           "evalkit_graph_breaks": float(len(_of(record, "graph_breaks", "evalkit")))}
    if base:
        out.update({"baseline_graphs": float(base.get("graphs", 0)),
                    "baseline_compile_s": float(base.get("compile_s", 0.0)),
                    "baseline_graph_breaks": float(len(_of(base, "graph_breaks", "wrapper"))),
                    "baseline_recompiles": float(len(_of(base, "recompiles", "wrapper")))})
    return out


def _named(record: dict, origin: str) -> list[str]:
    """Each distinct reason of the wrapper's breaks and recompilations, with its count."""
    lines = []
    for kind, word in (("graph_breaks", "graph break"), ("recompiles", "recompilation")):
        counts: dict[str, int] = {}
        for entry in _of(record, kind, origin):
            why = reason(entry["message"])
            counts[why] = counts.get(why, 0) + 1
        lines += [f"{word} x{n}: {why}" for why, n in counts.items()]
    return lines


def _semantic_codes(job: JobEvidence) -> tuple[set[str], list[Finding], bool]:
    """The semantic probe's findings on `job` judged as its truth-caliber job (world size 1, no clipping)."""
    from evalkit.probes.semantics.judge import judge as semantic_judge

    result = semantic_judge([dataclasses.replace(job, name=semantics_job_name(1, False))])
    return {f.code for f in result.findings}, result.findings, result.inconclusive


def _same_steps(eager, compiled, baseline, notes) -> tuple[list[Finding], dict[str, float], str]:
    """What compiling changed in a step: the semantic findings the compiled job has and the eager one has not, once
    the baseline compiled by hand shows the oracle's tolerance holds for compiled kernels. Where that cannot be
    judged, `notes` gets why and what would decide it (the judge then says inconclusive, never pass)."""
    figures: dict[str, float] = {}
    if eager is None or eager.status != "FINISHED":
        notes.append("what compiling changes was not judged: the eager job did not finish; run the probe again "
                     "(evalkit probe=compile) once it trains")
        return [], figures, "steps not judged (no eager run)"
    figures["loss_rel_diff_max"] = _loss_difference(eager, compiled)
    if baseline is None or baseline.status != "FINISHED":
        notes.append("what compiling changes was not judged: the baseline compiled by hand did not finish, so the "
                     "oracle's tolerance for compiled kernels is not shown")
        return [], figures, "steps not judged (baseline compiled failed)"
    base_codes, base_findings, base_open = _semantic_codes(baseline)
    if base_codes or base_open:
        notes.append("what compiling changes was not judged: the baseline compiled by hand "
                     + (f"has semantic findings ({', '.join(sorted(base_codes))})" if base_codes else
                        "could not be judged by the oracle") + ": its tolerance does not hold for these kernels")
        return [], figures, "steps not judged (oracle tolerance)"
    eager_codes, _, _ = _semantic_codes(eager)
    codes, found, open_ = _semantic_codes(compiled)
    if open_:
        notes.append("what compiling changes was not judged: the oracle could not judge the compiled job")
        return [], figures, "steps not judged (oracle)"
    new = [f for f in found if f.code not in eager_codes]
    figures["changed_semantics"] = float(len(new))
    findings = [Finding(f"{DIM}.changes_step", f"compiled, {f.title}", compiled.name, f.first_step,
                        f.expected, f.observed, f.size, explainable=False, evidence={"semantic_code": f.code})
                for f in new]
    return findings, figures, "steps as eager" if not new else f"{len(new)} step change(s)"


def _loss_difference(eager: JobEvidence, compiled: JobEvidence) -> float:
    a = {int(s["step"]): s.get("loss") for s in eager.steps}
    diffs = [abs(s["loss"] - a[int(s["step"])]) / max(abs(a[int(s["step"])]), 1e-12)
             for s in compiled.steps if s.get("loss") is not None and a.get(int(s["step"])) is not None]
    return float(max(diffs)) if diffs else math.nan


def _speed(timed: list[JobEvidence], figures: dict[str, float], notes: list[str]) -> str:
    if not timed:
        notes.append("steady-state speed not timed (probe.rounds=0, the quick preset): run without --quick")
        return "speed not timed"
    by = {j.name: j for j in timed}
    parts = []
    for label, (e, c) in zip(("", "baseline_"), PAIRS):
        eager, compiled = by.get(job_name(TIMED, e)), by.get(job_name(TIMED, c))
        if eager is None or compiled is None:
            continue
        te, tc = eager.summary.get("turns") or {}, compiled.summary.get("turns") or {}
        n = min(len(te.get("blocks_s", [])), len(tc.get("blocks_s", [])))
        if n < 2:
            notes.append(f"{label or 'wrapper '}speed not measured: {n} rounds taken in turns")
            continue
        steps = int(te["steps_per_block"])
        est = estimate([Size(0, steps, np.array(te["blocks_s"][:n]), np.array(tc["blocks_s"][:n]))], LEVEL)
        r = est.ratio[0]
        figures.update({f"{label}compiled_over_eager": r.estimate, f"{label}compiled_over_eager_low": r.low,
                        f"{label}compiled_over_eager_high": r.high,
                        f"{label}eager_step_ms": est.sizes[0].baseline_ms,
                        f"{label}compiled_step_ms": est.sizes[0].wrapper_ms, f"{label}rounds": float(n)})
        parts.append(f"{'by hand ' if label else ''}{r.estimate:.2f}x [{r.low:.2f}, {r.high:.2f}]")
    return ("step compiled/eager " + ", ".join(parts)) if parts else "speed not measured"


def _headline(record: dict, figures: dict[str, float], steps: str, speed: str) -> str:
    def count(n: float, word: str) -> str:
        return f"{int(n)} {word}{'' if int(n) == 1 else 's'}"

    base = f" (by hand {figures['baseline_compile_s']:.0f} s)" if "baseline_compile_s" in figures else ""
    return (f"{steps}; {count(figures['graphs'], 'graph')}, {count(figures['graph_breaks'], 'break')}, "
            f"{count(figures['recompiles'], 'recompile')}; {figures['compile_s']:.0f} s to compile{base}; {speed}")
