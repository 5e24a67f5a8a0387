"""Direct checks of a job's records: step count, validation cadence and mode, forwards no step accounts for,
training mode, precision; and the adapter's own words about a difference (`declared`, by the deviation's code)."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from evalkit.contract.effective import EffectiveConfig
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import Caliber, expected_val_steps


def declared_lookup(effective: dict) -> Callable[[str], str]:
    """finding code -> the text of the deviation the adapter reported that explains it, matched by code
    (`Deviation.explains`: the same code or its family, never words of the text); "" when none does."""
    deviations = EffectiveConfig.of(effective).deviations

    def declared(code: str) -> str:
        return next((d.declared for d in deviations if d.explains(code)), "")
    return declared


def aligning_setting(effective: dict, code: str) -> str:
    """The setting the adapter reports (`aligns`) as aligning findings of `code`: by the code, else its family."""
    aligns = effective.get("aligns") or {}
    return str(aligns.get(code) or aligns.get(code.split(".")[0]) or "")


def check_threads(job: str, evidence: JobEvidence) -> list[Finding]:
    """torch's intra-op threads at the end of training against the number evalkit fixed for every arm: a wrapper
    that changes them changes its speed for a reason that is not the wrapper's training step."""
    asked = int(evidence.config.get("hardware", {}).get("threads") or 0)
    seen = evidence.summary.get("threads_at_end")
    if not asked or seen is None or int(seen) == asked:
        return []
    return [Finding(code="threads.changed", title="the wrapper changed torch's intra-op thread count", job=job,
                    first_step=None, expected=asked, observed=int(seen), size=f"{seen} threads instead of {asked}",
                    explained_by=[f"torch.set_num_threads({seen}) (or OMP/MKL settings) inside the wrapper"],
                    knob="leave the thread count to the caller (evalkit sets it, the same for every arm)")]


def check_steps(job: str, cal: Caliber, rows: list[dict], declared) -> list[Finding]:
    steps = sorted(int(r["step"]) for r in rows)
    if not steps or steps[-1] == cal.max_steps:
        return []
    code = "steps.extra" if steps[-1] > cal.max_steps else "steps.fewer"
    first = cal.max_steps + 1 if code == "steps.extra" else steps[-1] + 1   # the first step too many or missing
    return [Finding(code=code, title=f"{'more' if code == 'steps.extra' else 'fewer'} optimizer steps than max_steps",
                    job=job, first_step=first, expected=cal.max_steps, observed=steps[-1],
                    size=f"{steps[-1]} steps vs max_steps={cal.max_steps}",
                    explained_by=[f"the run took {steps[-1]} optimizer steps"], knob="max_steps = evalkit's "
                    "train.max_steps (optimizer steps, not micro-batches or epochs)", declared=declared(code))]


def _cadence_words(cal: Caliber, rows: list[dict], after: set[int]) -> list[str]:
    """The cadences in micro-batches (every val_every or val_every x grad_accum of them, or once per epoch of
    floor or ceil(n / (batch x world size)) of them), run after or before the window's optimizer step, with or
    without a validation at the end, that give exactly the validation steps seen."""
    micro = _micro_before(rows)
    per_epoch = cal.n_train / (cal.batch_size * cal.world_size)
    cadences = [(e, f"every {e} micro-batches") for e in sorted({cal.val_every, cal.val_every * cal.grad_accum,
                                                                  cal.grad_accum}) if e]
    cadences += [(e, f"once per epoch (every {e} micro-batches)") for e in sorted({int(per_epoch),
                                                                                   math.ceil(per_epoch)})]
    words = []
    for every, what in cadences:
        for before_step, when in ((False, ""), (True, ", before the window's optimizer step")):
            steps = _every_micro_batches(micro, every, before_step)
            ends = [at_end for end, at_end in (({cal.max_steps}, "and at the end"), (set(), "not at the end"))
                    if steps and steps | end == after]
            if ends:
                words.append(f"validation {what}{when} ({ends[0]})")
                break
    return words


def _micro_before(rows: list[dict]) -> dict[int, int]:
    total, out = 0, {0: 0}
    for row in sorted(rows, key=lambda r: r["step"]):
        total += int(row.get("micro_batches") or 0)
        out[int(row["step"])] = total
    return out


def _every_micro_batches(micro: dict[int, int], every: int, before_step: bool = False) -> set[int]:
    """Steps completed when validation runs after every `every`-th micro-batch: mid-window, the step before; on a
    window's last micro-batch, after its optimizer step (or before it, `before_step`)."""
    out = set()
    steps = sorted(micro)
    for before, k in zip(steps, steps[1:]):
        for m in range(micro[before] + 1, micro[k] + 1):
            if m % every == 0:
                out.add(k if m == micro[k] and not before_step else before)
    return out


def check_validation(job: str, cal: Caliber, rows: list[dict], val: list[dict], declared) -> list[Finding]:
    findings = []
    seen = [int(v["step"]) for v in val]
    if 0 in seen:
        findings.append(Finding(code="forward.before_training", title="validation forwards before the first step",
                                job=job, first_step=0, expected="no forward before step 1",
                                observed=f"{seen.count(0)} validation run(s) at step 0",
                                size=f"{next(v for v in val if v['step'] == 0).get('batches')} batch(es) at step 0",
                                explained_by=["a validation run before the first optimizer step: one at the start "
                                              "of training, or an epoch-end validation of an epoch that ended "
                                              "before its first window did"],
                                knob="no validation before the first optimizer step",
                                declared=declared("forward.before_training")))
    after = [s for s in seen if s > 0]
    last = max((int(r["step"]) for r in rows), default=cal.max_steps)
    expected = expected_val_steps(replace(cal, max_steps=last))   # "and after the last step": the one it took
    if sorted(set(after)) != expected or len(after) != len(set(after)):
        words = _cadence_words(cal, rows, set(after))
        first = min(set(after) ^ set(expected)) if set(after) != set(expected) else after[0]
        findings.append(Finding(code="val.cadence", title="validation after other steps than asked", job=job,
                                first_step=first, expected=expected, observed=after,
                                size=f"at steps {after} instead of {expected}", explained_by=words,
                                knob="validation every val_every optimizer steps and after the last, counted in "
                                "optimizer steps", declared=declared("val.cadence")))
    train_mode = [v for v in val if (v.get("train_mode_batches") or 0) > 0]
    if train_mode:
        findings.append(Finding(code="val.train_mode", title="validation forwards in train mode", job=job,
                                first_step=int(train_mode[0]["step"]), expected="eval mode",
                                observed=f"{train_mode[0]['train_mode_batches']} of {train_mode[0]['batches']} "
                                f"batches in train mode", size=f"{len(train_mode)} validation run(s)",
                                explained_by=["model.eval() not called before validation"],
                                knob="model.eval() during validation", declared=declared("val.train_mode")))
    repeated = [v for v in val if int(v.get("repeated_samples") or 0) > 0]
    if repeated:
        counted = "counted once in the metric, as the wrapper's evaluation does" \
            if str(repeated[0].get("deduplicated")).lower() == "true" else "each counted again in the metric"
        findings.append(Finding(code="val.repeated", title="validation samples scored more than once", job=job,
                                first_step=int(repeated[0]["step"]), expected="each validation sample once",
                                observed=f"{repeated[0]['repeated_samples']} repeated forward(s) ({counted})",
                                size=f"{len(repeated)} validation run(s)",
                                explained_by=["a distributed sampler repeating samples to even out the ranks' "
                                              "validation batches"],
                                knob="a validation sampler that shards without repeating samples",
                                declared=declared("val.repeated")))
    return findings


def check_micro(job: str, cal: Caliber, evidence: JobEvidence, declared) -> list[Finding]:
    findings = []
    rows = [m for rank in sorted(evidence.micro) for m in evidence.micro[rank]]
    eval_mode = [m for m in rows if m.get("train_mode") is False]
    if eval_mode:
        findings.append(Finding(code="micro.train_mode", title="training micro-batches in eval mode", job=job,
                                first_step=min(int(m["step"]) for m in eval_mode), expected="train mode",
                                observed=f"{len(eval_mode)} of {len(rows)} micro-batches in eval mode",
                                explained_by=["model.train() not in effect during training"],
                                knob="model.train() before the training loop", declared=declared("micro.train_mode")))
    want = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(cal.precision.split("_")[0])
    dtypes = {str(m.get("dtype")) for m in rows} | set((evidence.summary.get("observed_dtypes") or {}).keys())
    other = sorted(d for d in dtypes - {want, "None", "none"} if d)
    if want and other:
        first = min((int(m["step"]) for m in rows if m.get("dtype") in other), default=None)
        findings.append(Finding(code="precision.mismatch", title=f"requested {cal.precision}, computed in {other}",
                                job=job, first_step=first, expected=want, observed=other,
                                size=f"dtypes seen: {sorted(dtypes)}", explained_by=[f"forwards computed in {other}"],
                                knob="the wrapper's precision = fp32 (no autocast)",
                                declared=declared("precision.mismatch")))
    return findings


def check_extra_forwards(job: str, cal: Caliber, rows: list[dict], declared) -> list[Finding]:
    """Grad-enabled forwards beyond a window: more micro-batches (or loss calls) in a step than grad_accum."""
    over = [r for r in sorted(rows, key=lambda r: r["step"])
            if max(int(r.get("micro_batches") or 0), int(r.get("loss_calls") or 0)) > cal.grad_accum]
    if not over:
        return []
    r = over[0]
    return [Finding(code="forward.extra_train", title="grad-enabled forwards that no window accounts for", job=job,
                    first_step=int(r["step"]), expected=f"at most {cal.grad_accum} micro-batches per step",
                    observed=f"{r.get('micro_batches')} micro-batches, {r.get('loss_calls')} loss calls",
                    size=f"{len(over)} step(s) with more micro-batches than grad_accum={cal.grad_accum}",
                    explained_by=[f"step {r['step']} ran {r.get('micro_batches')} grad-enabled forwards"],
                    declared=declared("forward.extra_train"))]
