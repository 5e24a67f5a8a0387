"""The semantic probe's judge: a pure function from the probe's job records to findings with evidence.

Per job it checks the step count, validation cadence and mode, forwards no step accounts for, train mode,
precision, the LR of every step and the scheduler's step count (explain_lr), the data order and the windows
(explain_order, explain_windows), and every step's parameter update against the float64 oracle (oracle,
explain_update); across jobs, whether two seeds saw the same order. Tolerances: see `oracle` (updates) and
`LR_REL_TOL` (LR, relative 1e-6). A finding seen in several jobs with the same details is reported once.

Every pass rests on evidence (`PASS_REQUIRES`): every planned job ran (the clip job too), and in every finished job
as many optimizer steps were checked against the oracle as the job asked for (`max_steps`), which needs its
step records, its parameters and LR at every step and every micro-batch attributed to its sample ids; in a clip job,
clipping at the asked norm changed at least one checked update beyond the tolerance (else the job cannot tell
clipped from unclipped). What is missing is an evidence gap, named with how to get it; gaps and no finding:
inconclusive, never pass. A finding still fails the probe whatever is missing (fail beats inconclusive).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from evalkit.contract.effective import EffectiveConfig
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult, markdown_cell
from evalkit.probes.refusals import DOCUMENTED, Refusal, refusal_of
from evalkit.probes.semantics import checks
from evalkit.probes.semantics.explain_coverage import check_coverage, check_partial_batches
from evalkit.probes.semantics.explain_lr import check_lr, check_sched_count
from evalkit.probes.semantics.explain_optimizer import check_group_lrs, check_optimizer
from evalkit.probes.semantics.explain_order import ORDER_KNOB, check_order, observed_stream, samplers
from evalkit.probes.semantics.explain_update import check_update, expected_deltas
from evalkit.probes.semantics.explain_windows import check_windows, dropped_stream_matches, merged_stream_matches
from evalkit.probes.semantics.normalization import NAMES
from evalkit.probes.semantics.oracle import (
    Caliber,
    GradientOracle,
    ObservedStep,
    attributed,
    clip_norm_for,
    expected_lr,
    expected_windows,
    observed_steps,
    rounding_level,
    rounding_level_names,
)
from evalkit.probes.semantics.plan import job_name
from evalkit.probes.semantics.update_rule import UpdateRule, asked_rule, observed_rule

DIMENSION = "semantics"
PASS_REQUIRES = ("every planned job run (the clip job too); in every job max_steps optimizer steps checked against "
                 "the oracle (step records, parameters and LR at every step, every micro-batch attributed to its "
                 "sample ids); in a clip job, clipping changing at least one checked update")
HOOKS = ("evalkit's observers see an optimizer step only through torch's global optimizer step hooks "
         "(torch.optim.Optimizer.step)")
# kind of gap -> how to get the evidence
HOW = {
    "no job": "run the probe at a combination the wrapper supports (e.g. probe.world_sizes=[1])",
    "no step": f"{HOOKS}: step a torch.optim.Optimizer (not a fused or hand-written update) or make the wrapper call "
               "its optimizer's step()",
    "no micro-batch": "the observers attribute micro-batches to the optimizer step that follows them: same hooks; run "
                      "with observe.sample_ids=true (the probe sets it)",
    "parameters": "the probe records them after every step (observe.params=true, set by the probe): the step's "
                  "post hook did not fire, or the run stopped before its records were written",
    "LR": "read from the optimizer's param_groups in the step hook: step a torch.optim.Optimizer whose param_groups "
          "carry 'lr'",
    "sample ids": "the task's loader yields sample ids that the observers read in the model's forward hook "
                  "(observe.sample_ids=true, set by the probe): the wrapper fed the model batches without them, or "
                  "forwarded outside the hooked model",
    "steps": "the steps left unchecked are named in the notes",
    "clip": "the plan clips where a careful loop's partial window sums exceed the norm on most steps "
            "(oracle.clip_norm_for): a job recorded at another norm needs the probe run again; otherwise the "
            "wrapper's LR was 0 or its gradients stayed below the norm on every checked step",
    "clip job": "the clip norm comes from the job without clipping's config: rerun the probe once that job runs",
    "a replayable optimizer": "the oracle replays torch.optim.SGD, Adam and AdamW (update_rule.py): the wrapper "
                              "stepped another optimizer class, whose updates are not checked",
    "every earlier step (the optimizer's state)": "an optimizer with state (momentum, Adam's moments) is replayed "
                                                  "from step 1 on: the steps after the first one left unchecked "
                                                  "(named above) are unchecked too",
}


class _Tally:
    def __init__(self) -> None:
        self.steps_checked, self.max_update_rel_err, self.max_lr_rel_err = 0, 0.0, 0.0
        self.steps_asked = 0
        self.checked: dict[str, set[int]] = {}          # job -> the steps whose update was checked
        self.gaps: list[tuple[str, str, str]] = []     # (kind, job, what is missing there)
        self.refused: dict[int, Refusal] = {}          # world size -> a documented refusal there (not judged)
        self.uncited: dict[int, Refusal] = {}          # world size -> a refusal whose citation does not check

    def gap(self, kind: str, job: str, what: str) -> None:
        self.gaps.append((kind, job, what))


def judge(jobs: list[JobEvidence]) -> ProbeResult:
    findings: list[Finding] = []
    notes: list[str] = []
    series: dict[str, dict[str, list]] = {}
    tally = _Tally()
    for job in jobs:
        findings += _judge_job(job, notes, series, tally)
    _clip_jobs_not_run(jobs, tally)
    if jobs and not any(j.status == "FINISHED" for j in jobs) and not findings:
        tally.gap("no job", "every job", "no job of the truth caliber ran (each refused as documented-unsupported)")
    findings += _same_order_under_two_seeds(jobs, findings)
    merged = _deduplicate(findings)
    notes += _declared_not_observed(jobs, merged)
    checked = [j.name for j in jobs if j.status == "FINISHED"]
    notes.insert(0, f"checked {len(checked)} job(s) {checked}: steps, validation, forwards, train mode, precision, "
                    f"LR per step, scheduler steps, data order, windows, updates against a float64 oracle "
                    f"({tally.steps_checked} of {tally.steps_asked} step(s) asked); a pass requires {PASS_REQUIRES}")
    gaps = _gap_lines(tally.gaps)
    inconclusive = bool(gaps) and not merged
    if gaps:
        notes[:0] = [("inconclusive: " if inconclusive else "besides the findings, ")
                     + f"the evidence a pass requires is missing: {'; '.join(g for g, _ in gaps)}"]
        notes[1:1] = [f"missing evidence: {g}: {how}" for g, how in gaps]
    judged = sorted({j.world_size for j in jobs if j.status == "FINISHED"})
    unjudged = {ws: r for ws, r in sorted(tally.refused.items()) if ws not in judged}
    headline = _headline(len(merged), gaps if inconclusive else [], judged, unjudged, tally.uncited)
    return ProbeResult(
        dimension=DIMENSION, passed=not merged and not gaps, findings=merged, notes=notes, series=series,
        headline=headline, inconclusive=inconclusive, sections=quick_start_sections(jobs),
        figures={"findings": float(len(merged)), "unexplained": float(sum(f.unexplained for f in merged)),
                 "jobs": float(len(jobs)), "steps_checked": float(tally.steps_checked),
                 "steps_asked": float(tally.steps_asked), "evidence_gaps": float(len(gaps)),
                 "max_update_rel_err": tally.max_update_rel_err, "max_lr_rel_err": tally.max_lr_rel_err,
                 "world_sizes_not_judged": float(len(unjudged)), **{f"ws{ws}_not_judged": 1.0 for ws in unjudged}})


def _headline(findings: int, gaps: list[tuple[str, str]], judged: list[int], unjudged: dict[int, Refusal],
              uncited: dict[int, Refusal]) -> str:
    """The cell's figure: "" (the verdict counts the findings) unless the evidence is missing, a world size was not
    judged (a documented refusal: '0 findings at ws1; ws2 not judged (documented-unsupported: <page>)') or a refusal's
    citation is no page of the wrapper's docs ('1 finding; ws2: citation not a page of <wrapper>'s docs: <value>')."""
    if gaps:
        more = f" (+{len(gaps) - 1} more)" if len(gaps) > 1 else ""
        text = f"0 findings on missing evidence: {gaps[0][0]}{more}"
    elif unjudged or uncited:
        at = f" at {', '.join(f'ws{ws}' for ws in judged)}" if unjudged and judged else ""
        text = f"{findings} finding{'' if findings == 1 else 's'}{at}"
    else:
        return ""
    text += "".join(f"; ws{ws} not judged ({r.cited()})" for ws, r in unjudged.items())
    return text + "".join(f"; ws{ws}: {r.uncited}" for ws, r in sorted(uncited.items()))


def quick_start_sections(jobs: list[JobEvidence]) -> list[str]:
    """Defaults mode: the quick start the adapter followed (its pages) and its departures from it, each with why
    evalkit owns it, as the adapter wrote them into its effective config (the first job that has them)."""
    effective = next((j.effective for j in jobs if j.effective.get("quick_start") is not None), None)
    if effective is None:
        return []
    pages = [f"[{p.get('address')}]({p.get('address')}) (version {p.get('version')}"
             + (f"; {p['follows']}" if p.get("follows") else "") + ")" for p in effective.get("quick_start") or []]
    lines = ["**The quick start followed** (defaults mode): " + ("; ".join(pages) or "no page cited"), ""]
    departures = effective.get("departures") or []
    if departures:
        lines += ["| departure from the page | why evalkit owns it | owns |", "|---|---|---|"]
        lines += [f"| {markdown_cell(d.get('what', ''))} | {markdown_cell(d.get('why', ''))} | {d.get('owns', '')} |"
                  for d in departures]
    else:
        lines.append("No departure from the page.")
    return ["\n".join(lines)]



def _gap_lines(gaps: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(what is missing, with the jobs it is missing in; how to get it), one per kind and words."""
    jobs: dict[tuple[str, str], list[str]] = {}
    for kind, job, what in gaps:
        jobs.setdefault((kind, what), []).append(job)
    return [(f"{what} [{', '.join(dict.fromkeys(names))}]", HOW[kind]) for (kind, what), names in jobs.items()]


def _clip_jobs_not_run(jobs: list[JobEvidence], tally: _Tally) -> None:
    """A clip job the plan left out because its job without clipping gave no norm to clip at (the plan's rule:
    `SemanticsProbe.plan`), as a gap: clipping was not checked at that world size."""
    names = {j.name for j in jobs}
    for job in jobs:
        free, clipped = job_name(job.world_size, False), job_name(job.world_size, True)
        if job.name == free and clipped not in names and clip_norm_for(job) is None:
            tally.gap("clip job", clipped, f"{clipped} not run ({free} gave no clipping norm): clipping not checked")


def _judge_job(job: JobEvidence, notes: list[str], series: dict, tally: _Tally) -> list[Finding]:
    refused = refusal_of(job)
    if refused is not None and refused.kind == DOCUMENTED:
        # the wrapper documents that it cannot run this combination (the functional column counts it, not claimed):
        # there are no semantics to compare here, only a capability missing; the headline names the world size
        notes.append(f"{job.name}: not judged: refused as documented-unsupported ({refused.message}, see "
                     f"{refused.documented_at}); the functional column counts it as not claimed")
        tally.refused.setdefault(job.world_size, refused)
        return []
    if job.status != "FINISHED":
        notes.append(f"{job.name}: {job.status}: {job.failure_reason or 'no reason recorded'}")
        why = ""
        if refused is not None and refused.uncited:
            tally.uncited.setdefault(job.world_size, refused)
            why = f"{refused.uncited}, so judged as an undocumented refusal: "
        return [Finding(code="job.failed", title="the wrapper could not run the truth caliber", job=job.name,
                        first_step=None, observed=job.status, size=why + (job.failure_reason or job.status),
                        explained_by=[job.failure_reason] if job.failure_reason else [])]
    cal = Caliber.of(job.config)
    tally.steps_asked += cal.max_steps
    if not job.steps:
        notes.append(f"{job.name}: no step records; nothing checked")
        tally.gap("no step", job.name, "no optimizer step was observed (the wrapper's optimizer does not fire "
                                       "torch's global optimizer hooks)")
        return []
    missing: dict[str, list[int]] = {}
    found = _judge_steps(job, cal, notes, series, tally, missing)
    _evidence_gaps(job, cal, series.get(job.name), tally.checked.get(job.name, set()), missing, tally)
    return found


def _evidence_gaps(job: JobEvidence, cal: Caliber, series: dict | None, checked: set[int],
                   missing: dict[str, list[int]], tally: _Tally) -> None:
    """What a pass needs from one finished job with step records that it does not show: every step up to
    max_steps checked (up to the last one taken when it took fewer: that is a finding, `steps.fewer`), and in a clip
    job a checked update that clipping changed."""
    if not any(job.micro.values()):
        tally.gap("no micro-batch", job.name, "no micro-batch records (data order, windows and updates not checked)")
    elif not _attributed(job):
        tally.gap("sample ids", job.name, "micro-batches without sample ids (data order and windows not checked)")
    last = min(cal.max_steps, max(int(r["step"]) for r in job.steps))
    unchecked = [k for k in range(1, last + 1) if k not in checked]
    if unchecked:
        said = len(tally.gaps)
        if not job.params:
            tally.gap("parameters", job.name, "no parameters recorded (no update checked)")
        else:
            for kind, steps in missing.items():
                if kind != "sample ids" or _attributed(job):
                    tally.gap(kind, job.name, f"{kind} not recorded at {len(steps)} step(s) (first: step {steps[0]})")
        if len(tally.gaps) == said:
            tally.gap("steps", job.name, f"{len(checked)} of max_steps={cal.max_steps} steps' updates checked "
                                         f"(first unchecked: step {unchecked[0]})")
    if cal.grad_clip is not None and checked and not any((series or {}).get("clip_binds") or []):
        tally.gap("clip", job.name, f"clipping at {cal.grad_clip:.6g} changed no checked update beyond the "
                                    "tolerance (clipped and unclipped cannot be told apart)")


def _attributed(job: JobEvidence) -> bool:
    """Every micro-batch of every rank has its sample ids (observe.sample_ids; none unattributed)."""
    return all(attributed([m.get("ids") or [] for m in rows if not m.get("skipped")]) for rows in job.micro.values())


def _judge_steps(job: JobEvidence, cal: Caliber, notes: list[str], series: dict, tally: _Tally,
                 missing: dict[str, list[int]]) -> list[Finding]:
    declared = checks.declared_lookup(job.effective)
    rows = job.steps
    found = checks.check_steps(job.name, cal, rows, declared) + checks.check_threads(job.name, job)
    found += checks.check_validation(job.name, cal, rows, job.val, declared)
    found += checks.check_micro(job.name, cal, job, declared)
    found += check_optimizer(job.name, job.config, job.optimizer, declared) + check_group_lrs(job.name, rows, declared)
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
    elif not any(job.micro.values()):
        notes.append(f"{job.name}: no micro-batch records; data order and windows not checked")
    elif not _attributed(job):
        notes.append(f"{job.name}: micro-batches without sample ids; data order and windows not checked")
    else:
        found += _order_and_windows(job, cal, declared, notes)
    if not job.params:
        notes.append(f"{job.name}: no parameters recorded; updates not checked")
        return _with_wrapper_settings(job, found)
    if any(f.code == "precision.mismatch" for f in found):
        notes.append(f"{job.name}: updates not checked against the fp32 oracle (computed in another precision)")
        return _with_wrapper_settings(job, found)
    oracle = GradientOracle(job.config)
    rule = _update_rule(job, oracle, notes)
    if rule is None:
        missing.setdefault("a replayable optimizer", []).extend(range(1, cal.max_steps + 1))
        return _with_wrapper_settings(job, found)
    steps = _replayable(rule, observed_steps(job, oracle, notes, missing=missing), missing)
    rule, steps = _rounding_level_set_aside(job, rule, steps, oracle, notes)
    updates = check_update(job.name, steps, cal, declared, rule)
    for keep in ("first", "last") if extra and updates else ():     # the window among the extra forwards
        kept = _replayable(rule, observed_steps(job, oracle, keep=keep), {})
        if not check_update(job.name, kept, cal, declared, rule):
            steps, updates = kept, []
            notes.append(f"{job.name}: updates match the {keep} micro-batches of each step's window; the "
                         "extra forwards did not contribute")
            break
    found += updates
    tokens = [n for s in steps for c in (s.counts or {}).values() for n in c]
    if tokens and not updates:
        notes.append(f"{job.name}: the window's loss normalized as {NAMES['tokens']}, as a careful loop does "
                     f"(micro-batches of {min(tokens)} to {max(tokens)} target tokens)")
    series[job.name] = _series(cal, rows, steps, tally, rule)
    tally.checked[job.name] = {s.step for s in steps}
    return _with_wrapper_settings(job, found)


def _update_rule(job: JobEvidence, oracle: GradientOracle, notes: list[str]) -> UpdateRule | None:
    """The optimizer the wrapper stepped (its first record), replayed by the update check; without a record
    (runs recorded before it existed) the run's own recipe. None when its class is not one the oracle replays."""
    size = oracle.theta0.size
    if not job.optimizer:
        return _frozen_kept(asked_rule(job.config, size), oracle, job, notes)
    if len(job.optimizer) > 1:
        notes.append(f"{job.name}: the optimizer changed during the run (records at steps "
                     f"{[r.get('step') for r in job.optimizer]}); updates replayed with the first")
    rule = observed_rule(job.optimizer[0], oracle.layout, size)
    if rule is None:
        notes.append(f"{job.name}: updates not checked: the oracle does not replay "
                     f"{job.optimizer[0].get('class')} (SGD, Adam and AdamW only)")
        return None
    return _frozen_kept(rule, oracle, job, notes)


def _rounding_level_set_aside(job: JobEvidence, rule: UpdateRule, steps: list[ObservedStep],
                              oracle: GradientOracle, notes: list[str]) -> tuple[UpdateRule, list[ObservedStep]]:
    """Under Adam, the coordinates whose gradient is at rounding level on every checked step (`rounding_level`: a
    bias right before a normalization layer, the key bias of an attention layer, whose gradients the normalization or
    the softmax cancels) are left out of the update check and named: Adam divides a gradient by its own size, so the
    float32 run moves them by about the LR in the direction of its rounding noise, which no float64 oracle
    reproduces. A frozen parameter is not among them (`_frozen_kept`)."""
    if not steps or all(g.kind != "adam" for g in rule.groups):
        return rule, steps
    mask, _ = rounding_level(steps, oracle.layout)
    mask &= ~oracle.frozen_mask
    if not mask.any():
        return rule, steps
    named = rounding_level_names(mask, oracle.layout)
    notes.append(f"{job.name}: update of {', '.join(named)} not judged: its gradient is at float32 rounding level "
                 "(cancelled by a normalization or a softmax after it), and Adam's step on rounding noise is noise")
    kept = [dataclasses.replace(s, theta=np.where(mask, s.theta_prev, s.theta)) for s in steps]
    return rule.without(mask), kept


def _frozen_kept(rule: UpdateRule, oracle: GradientOracle, job: JobEvidence, notes: list[str]) -> UpdateRule:
    """The rule with the task's frozen parameters expected never to move (named in the notes)."""
    if not oracle.frozen:
        return rule
    note = f"{job.name}: frozen parameter(s) {', '.join(oracle.frozen)} (requires_grad=False) expected never to move"
    if note not in notes:
        notes.append(note)
    return rule.without(oracle.frozen_mask)


def _replayable(rule: UpdateRule, steps: list[ObservedStep], missing: dict[str, list[int]]) -> list[ObservedStep]:
    """A rule with state (momentum, Adam's moments) replays consecutive steps from step 1 only: the steps after
    the first gap are left unchecked (named in `missing`)."""
    if not rule.stateful:
        return steps
    kept = []
    for k, s in enumerate(steps, 1):
        if s.step != k:
            break
        kept.append(s)
    later = [s.step for s in steps[len(kept):]]
    if later:
        missing.setdefault("every earlier step (the optimizer's state)", []).extend(later)
    return kept


def _with_wrapper_settings(job: JobEvidence, found: list[Finding]) -> list[Finding]:
    """Each finding's knob in the wrapper's own terms where its adapter reports one (`aligns`)."""
    for f in found:
        f.knob = checks.aligning_setting(job.effective, f.code) or f.knob
    return found


def _order_and_windows(job: JobEvidence, cal: Caliber, declared, notes: list[str]) -> list[Finding]:
    streams = _streams(job)
    return check_partial_batches(job.name, cal, streams, declared) + _order_and_layout(job, cal, declared, notes)


def _order_and_layout(job: JobEvidence, cal: Caliber, declared, notes: list[str]) -> list[Finding]:
    own = samplers(cal)[0]
    streams = _streams(job)
    if dropped_stream_matches(cal, own, streams):
        return check_windows(job.name, cal, own, streams, declared)
    found, sampler = check_order(job.name, cal, job, declared)
    if sampler is None:
        notes.append(f"{job.name}: no known sampler reproduces the order: windows, padding and batch sizes judged "
                     "from what each step saw (epochs cut where the samples repeat)")
        known = {f.code for f in found}
        return found + [f for f in check_coverage(job.name, cal, streams, declared) if f.code not in known]
    return found + check_windows(job.name, cal, sampler, streams, declared)


def _streams(job: JobEvidence) -> dict[int, list[tuple[int, list[int]]]]:
    return {r: observed_stream(job, r) for r in sorted(job.micro)}


def _series(cal: Caliber, rows: list[dict], steps: list[ObservedStep], tally: _Tally, rule: UpdateRule
            ) -> dict[str, list]:
    by_step = {s.step: s for s in steps}
    clipped = dict(zip(by_step, expected_deltas(steps, cal, rule)))
    free = dict(zip(by_step, expected_deltas(steps, cal, rule, clipped=False)))
    out: dict[str, list] = {"step": [], "expected_lr": [], "observed_lr": [], "update_scale": [], "cosine": [],
                            "clip_binds": []}
    for row in sorted(rows, key=lambda r: r["step"]):
        k = int(row["step"])
        out["step"].append(k)
        out["expected_lr"].append(expected_lr(cal, k))
        out["observed_lr"].append(row.get("lr"))
        s = by_step.get(k)
        if s is None:
            out["update_scale"].append(None)
            out["cosine"].append(None)
            out["clip_binds"].append(None)
            continue
        exp, obs = clipped[k], s.delta
        # clipping tested at this step: the clipped and unclipped updates differ beyond the tolerance
        out["clip_binds"].append(cal.grad_clip is not None
                                 and float(np.linalg.norm(exp - free[k])) > s.allowance(exp))
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
    done = [j for j in jobs if j.status == "FINISHED" and j.micro.get(0) and _attributed(j)]
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
    """The deviations the adapter reported that no finding's code matches, each once: never a reason to drop a
    finding, and not a finding either (many are about resuming or fp16, which this caliber does not exercise)."""
    reported = dict.fromkeys(d for job in jobs for d in EffectiveConfig.of(job.effective).deviations)
    return [f"declared by the adapter, not observed at this caliber: {d.text} [{d.code}]" for d in reported
            if not any(d.explains(f.code) for f in findings)]


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
