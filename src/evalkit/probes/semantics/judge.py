"""The semantic probe's judge: a pure function from the probe's job records to findings with evidence.

Per job it checks the step count, validation cadence and mode, forwards no step accounts for, train mode,
precision, the LR of every step and the scheduler's step count (explain_lr), the data order and the windows
(explain_order, explain_windows), and every step's parameter update against the float64 oracle (oracle,
explain_update); across jobs, whether two seeds saw the same order. Tolerances: see `oracle` (updates) and
`LR_REL_TOL` (LR, relative 1e-6). A finding seen in several jobs with the same details is reported once.
"""
from __future__ import annotations

import numpy as np

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult
from evalkit.probes.semantics import checks
from evalkit.probes.semantics.explain_lr import check_lr, check_sched_count
from evalkit.probes.semantics.explain_order import ORDER_KNOB, check_order, observed_stream, samplers
from evalkit.probes.semantics.explain_update import check_update
from evalkit.probes.semantics.explain_windows import check_windows, dropped_stream_matches, merged_stream_matches
from evalkit.probes.semantics.oracle import (
    Caliber,
    GradientOracle,
    ObservedStep,
    expected_lr,
    expected_update,
    expected_windows,
    observed_steps,
)

DIMENSION = "semantics"


class _Tally:
    def __init__(self) -> None:
        self.steps_checked, self.max_update_rel_err, self.max_lr_rel_err = 0, 0.0, 0.0


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    findings: list[Finding] = []
    notes: list[str] = []
    series: dict[str, dict[str, list]] = {}
    tally = _Tally()
    for job in jobs:
        findings += _judge_job(job, notes, series, tally)
    findings += _same_order_under_two_seeds(jobs, findings)
    merged = _deduplicate(findings)
    notes += _declared_not_observed(jobs, merged)
    checked = [j.name for j in jobs if j.status == "FINISHED"]
    notes.insert(0, f"checked {len(checked)} job(s) {checked}: steps, validation, forwards, train mode, precision, "
                    f"LR per step, scheduler steps, data order, windows, updates against a float64 oracle "
                    f"({tally.steps_checked} step(s))")
    return ProbeResult(
        dimension=DIMENSION, passed=not merged, findings=merged, notes=notes, series=series,
        figures={"findings": float(len(merged)), "unexplained": float(sum(f.unexplained for f in merged)),
                 "jobs": float(len(jobs)), "steps_checked": float(tally.steps_checked),
                 "max_update_rel_err": tally.max_update_rel_err, "max_lr_rel_err": tally.max_lr_rel_err})


def _judge_job(job: JobEvidence, notes: list[str], series: dict, tally: _Tally) -> list[Finding]:
    if job.status != "FINISHED":
        notes.append(f"{job.name}: {job.status}: {job.failure_reason or 'no reason recorded'}")
        return [Finding(code="job.failed", title="the wrapper could not run the truth caliber", job=job.name,
                        first_step=None, observed=job.status, size=job.failure_reason or job.status,
                        explained_by=[job.failure_reason] if job.failure_reason else [])]
    if not job.steps:
        notes.append(f"{job.name}: no step records; nothing checked")
        return []
    cal = Caliber.of(job.config)
    declared = checks.declared_lookup(job.effective)
    rows = job.steps
    found = checks.check_steps(job.name, cal, rows, declared) + checks.check_threads(job.name, job)
    found += checks.check_validation(job.name, cal, rows, job.val, declared)
    found += checks.check_micro(job.name, cal, job, declared)
    extra = checks.check_extra_forwards(job.name, cal, rows, declared)
    streams = _streams(job)
    if extra and job.micro and any(merged_stream_matches(cal, s, streams) for s in samplers(cal)):
        extra = []      # the extra micro-batches are the previous epoch's short window (check_windows names it)
    found += extra
    windows = expected_windows(cal)
    lr_findings, lr_err = check_lr(job.name, cal, rows, windows, declared)
    counts = check_sched_count(job.name, rows, windows, declared)
    if lr_findings and counts:      # one cause: the count is the mechanism behind the LR, said in its size
        lr_findings[0].size += "; " + "; ".join(f.size for f in counts)
        counts = []
    found += lr_findings + counts
    tally.max_lr_rel_err = max(tally.max_lr_rel_err, lr_err if np.isfinite(lr_err) else 0.0)
    if extra:
        notes.append(f"{job.name}: data order and windows not checked (extra forwards in the stream)")
    elif not job.micro:
        notes.append(f"{job.name}: no micro-batch records; data order and windows not checked")
    else:
        found += _order_and_windows(job, cal, declared, notes)
    if not job.params:
        notes.append(f"{job.name}: no parameters recorded; updates not checked")
        return _with_wrapper_settings(job, found)
    if any(f.code == "precision.mismatch" for f in found):
        notes.append(f"{job.name}: updates not checked against the fp32 oracle (computed in another precision)")
        return _with_wrapper_settings(job, found)
    oracle = GradientOracle(job.config)
    steps = observed_steps(job, oracle, notes)
    updates = check_update(job.name, steps, cal, declared)
    for keep in ("first", "last") if extra and updates else ():     # the window among the extra forwards
        kept = observed_steps(job, oracle, keep=keep)
        if not check_update(job.name, kept, cal, declared):
            steps, updates = kept, []
            notes.append(f"{job.name}: updates match the {keep} micro-batches of each step's window; the "
                         "extra forwards did not contribute")
            break
    found += updates
    series[job.name] = _series(cal, rows, steps, tally)
    return _with_wrapper_settings(job, found)


def _with_wrapper_settings(job: JobEvidence, found: list[Finding]) -> list[Finding]:
    """Each finding's knob in the wrapper's own terms where its adapter reports one (`aligns`)."""
    for f in found:
        f.knob = checks.aligning_setting(job.effective, f.code) or f.knob
    return found


def _order_and_windows(job: JobEvidence, cal: Caliber, declared, notes: list[str]) -> list[Finding]:
    own = samplers(cal)[0]
    streams = _streams(job)
    if dropped_stream_matches(cal, own, streams):
        return check_windows(job.name, cal, own, streams, declared)
    found, sampler = check_order(job.name, cal, job, declared)
    if sampler is None:
        notes.append(f"{job.name}: windows not checked (no known sampler reproduces the order)")
        return found
    return found + check_windows(job.name, cal, sampler, streams, declared)


def _streams(job: JobEvidence) -> dict[int, list[tuple[int, list[int]]]]:
    return {r: observed_stream(job, r) for r in sorted(job.micro)}


def _series(cal: Caliber, rows: list[dict], steps: list[ObservedStep], tally: _Tally) -> dict[str, list]:
    by_step = {s.step: s for s in steps}
    out: dict[str, list] = {"step": [], "expected_lr": [], "observed_lr": [], "update_scale": [], "cosine": []}
    for row in sorted(rows, key=lambda r: r["step"]):
        k = int(row["step"])
        out["step"].append(k)
        out["expected_lr"].append(expected_lr(cal, k))
        out["observed_lr"].append(row.get("lr"))
        s = by_step.get(k)
        if s is None:
            out["update_scale"].append(None)
            out["cosine"].append(None)
            continue
        exp, obs = expected_update(s, cal.grad_clip), s.delta
        norm_exp, norm_obs = float(np.linalg.norm(exp)), float(np.linalg.norm(obs))
        out["update_scale"].append(norm_obs / norm_exp if norm_exp else None)
        out["cosine"].append(float(obs @ exp) / (norm_obs * norm_exp) if norm_exp and norm_obs else None)
        tally.steps_checked += 1
        if norm_exp:
            tally.max_update_rel_err = max(tally.max_update_rel_err, float(np.linalg.norm(obs - exp)) / norm_exp)
    return out


def _same_order_under_two_seeds(jobs: list[JobEvidence], findings: list[Finding]) -> list[Finding]:
    """Two finished jobs of one world size with different seeds whose rank-0 streams are the same."""
    if any(f.code == "order.fixed_seed" for f in findings):
        return []
    done = [j for j in jobs if j.status == "FINISHED" and j.micro.get(0)]
    for i, a in enumerate(done):
        for b in done[i + 1:]:
            if a.world_size != b.world_size or a.config.get("seed") == b.config.get("seed"):
                continue
            sa, sb = [ids for _, ids in observed_stream(a, 0)], [ids for _, ids in observed_stream(b, 0)]
            common = min(len(sa), len(sb))
            if common and sa[:common] == sb[:common]:
                return [Finding(code="order.fixed_seed", title="the data order ignores evalkit's seed",
                                job=f"{a.name}, {b.name}", first_step=1,
                                expected=f"different orders for seeds {a.config.get('seed')} and "
                                         f"{b.config.get('seed')}", observed="the same order",
                                size=f"{common} micro-batches identical under two seeds",
                                explained_by=["shuffled with a seed that ignores evalkit's seed"],
                                knob=checks.aligning_setting(a.effective, "order.fixed_seed") or ORDER_KNOB,
                                declared=checks.declared_lookup(a.effective)("order.fixed_seed"))]
    return []


def _declared_not_observed(jobs: list[JobEvidence], findings: list[Finding]) -> list[str]:
    """The adapter's own `known_deviations` that no finding confirms, each once: never a reason to drop a
    finding, and not a finding either (many are about resuming or fp16, which this caliber does not exercise)."""
    quoted = {f.declared for f in findings if f.declared}
    lines = dict.fromkeys(line for job in jobs for line in job.effective.get("known_deviations") or []
                          if isinstance(line, str) and line not in quoted)
    return [f"declared by the adapter, not observed at this caliber: {line}" for line in lines]


def _deduplicate(findings: list[Finding]) -> list[Finding]:
    """One finding per kind seen in several jobs: the jobs listed, the first job's step and size kept, and the
    explanations that hold in every one of them (a sampler that reproduces one job's order but not the other's
    is not the explanation). Findings whose explanations share nothing stay apart."""
    merged: list[Finding] = []
    for f in findings:
        same = next((m for m in merged if (m.code, m.title) == (f.code, f.title)
                     and (_common(m.explained_by, f.explained_by) or m.explained_by == f.explained_by)), None)
        if same is None:
            merged.append(Finding(**{**f.__dict__, "explained_by": list(f.explained_by)}))
            continue
        same.job = ", ".join(dict.fromkeys([*same.job.split(", "), *f.job.split(", ")]))
        same.explained_by = _common(same.explained_by, f.explained_by) or same.explained_by
    return merged


def _common(a: list[str], b: list[str]) -> list[str]:
    return [x for x in a if x in b]
