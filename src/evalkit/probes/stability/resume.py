"""A resumed job against the uninterrupted run of the same seed, step by step: where it resumed, whether every step
is there once, and the first step where anything differs, with the cause the records show.

Per step the records hold the samples (ids), the LR, the RNG digest at the step's first forward, the loss and the
parameters (and buffers: BatchNorm running statistics) after it; a resumed job also records those it started from.
The first difference names its cause: start weights (model state lost), start buffers (buffers lost: used in eval
mode only, they change no training loss, so only their record shows them), samples (data position lost), LR
(scheduler state lost; wrong at the first step only: the optimizer's param groups, which hold the LR, were not
restored), the forwards' compute dtype (precision lost), the loss scale of the first resumed step (the gradient
scaler's state lost), RNG digest (RNG state lost), the loss beyond LOSS_LOST_RTOL with all of those agreeing (state
that is not a parameter lost, which the records do not name), and when all of those agree, the parameters after
the step (the update differs: optimizer state lost). Outcome: bit for bit, within tolerance, or the failure with its
causes.

Reproducibility: the interrupted job is compared with the uninterrupted one up to the kill, quantity by
quantity. Where it had already left the uninterrupted run (its parameters: the wrapper is not bitwise
reproducible; its samples, LR or RNG digest: that quantity is not reproducible), only that quantity's comparison
after the resume is relaxed: the resume point, the step numbers and count, and every quantity that did reproduce
are still checked on every resume, and any cause they find fails the item. A resumed step whose loss differs by
less than LOSS_LOST_RTOL while every input agrees (the weights and buffers it started from, its samples, LR, RNG
digest and model mode) is the same: the computation is not bitwise reproducible there (where it was seen, and
how often: docs/probes/stability.md). Beyond it, the difference is not noise: a state the records do not hold was
lost. A resume with no cause whose parameters and loss cannot be compared is `not reproducible` (not exercised),
never a pass.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from evalkit.probes.evidence import JobEvidence

BIT_FOR_BIT, WITHIN_TOLERANCE, DIVERGED, FAILED = "bit for bit", "within tolerance", "diverged", "failed"
NOT_REPRODUCIBLE = "not reproducible"   # no cause found, but parameters and loss could not be compared
RTOL = 1e-5          # loss and parameters: relative difference still "within tolerance"
SAME_INPUTS = "same inputs"   # _cause: the loss differs (within LOSS_LOST_RTOL) while every input of the step agrees
# A loss further off than this (relative) with every recorded input agreeing is a lost state, not noise. Chosen from
# the noise side: 10x the largest reproducibility noise seen (3e-5, docs/probes/stability.md), whose tail two
# sightings in four runs do not bound; float32 reordering on the stability model gives 3e-7 (threads 1 vs 2). A
# precision lost on resume that the recorded dtype does not show lands beyond it: fp32 -> bf16 in 89 % of steps, fp16
# in 38 % only; per cell (every ws1 drill losing it: first resumed steps 7 and 19) bf16 in 98 %, fp16 in 55 %
# (tests/unit/probes/stability/test_resume_calibration.py measures both sides on the stability model).
LOSS_LOST_RTOL = 3e-4
LOST_STATE = ("loss differs with the same inputs: state that is not a parameter was lost (buffers, loss scale, "
              "precision)")


@dataclass
class ResumeOutcome:
    verdict: str                       # BIT_FOR_BIT | WITHIN_TOLERANCE | DIVERGED | FAILED
    expected_at: int                   # the latest complete checkpoint's step when the job was killed
    resumed_at: int | None = None      # the step the resumed job continued after
    diverged_at: int | None = None
    causes: list[str] = field(default_factory=list)
    max_param_delta: float | None = None
    relaxed: dict[str, str] = field(default_factory=dict)   # quantity not compared -> why (not reproducible)

    @property
    def ok(self) -> bool:
        return self.verdict in (BIT_FOR_BIT, WITHIN_TOLERANCE) and not self.causes

    @property
    def judged(self) -> bool:
        """A cause found, or the whole comparison made: a resume with no cause and parameters that could not be
        compared is not exercised."""
        return bool(self.causes) or self.verdict != NOT_REPRODUCIBLE

    def text(self) -> str:
        if self.verdict == FAILED:
            return "; ".join(self.causes)
        where = f"resumed after step {self.resumed_at}"
        if self.ok:
            delta = f", final weights max |Δ| {self.max_param_delta:.2g}" if self.max_param_delta else ""
            return f"{self.verdict} ({where}{delta})"
        relaxed = f"; not compared: {'; '.join(self.relaxed.values())}" if self.relaxed else ""
        if not self.causes:
            return (f"{self.verdict} ({where}): the resume point, the step count and the "
                    f"{_checked(self.relaxed)} of every step agree with the uninterrupted run{relaxed}")
        at = f" at step {self.diverged_at}" if self.diverged_at is not None else ""
        return f"{self.verdict}{at} ({where}): " + "; ".join(self.causes) + relaxed


def step_modes(job: JobEvidence, rank: int = 0, key: str = "train_mode") -> dict[int, tuple]:
    """Per step, the model's train mode (or `key`: the compute `dtype`) at each micro-batch's forward (where the
    records hold it)."""
    out: dict[int, tuple] = {}
    for row in job.micro.get(rank, []):
        if not row.get("skipped") and row.get(key) is not None:
            out[int(row["step"])] = (*out.get(int(row["step"]), ()), row[key])
    return out


def _modes(modes: tuple[bool, ...]) -> str:
    return "/".join(sorted({"train" if m else "eval" for m in modes}))


def step_ids(job: JobEvidence, rank: int = 0) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for row in job.micro.get(rank, []):
        if not row.get("skipped"):
            out.setdefault(int(row["step"]), []).extend(row["ids"])
    return out


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= RTOL * max(abs(a), abs(b), 1e-12)


def _params_close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= RTOL * np.maximum(np.abs(b), 1e-3)))


def compare(reference: JobEvidence, resumed: JobEvidence, expected_at: int, max_steps: int,
            killed: JobEvidence | None = None) -> ResumeOutcome:
    """`killed`: the interrupted job, whose parameters up to the kill tell what its checkpoint was written from (and
    whether it had already left the uninterrupted run's trajectory before any resume)."""
    out = ResumeOutcome(DIVERGED, expected_at)
    if resumed.status != "FINISHED":
        out.verdict = FAILED
        out.causes.append(f"the resume failed: {resumed.failure_reason or resumed.status}")
        return out
    steps = resumed.steps
    if not steps:
        out.verdict = FAILED
        out.causes.append("the resumed job recorded no optimizer step")
        return out
    numbers = [int(s["step"]) for s in steps]
    out.resumed_at = numbers[0] - 1
    _resume_point(out, numbers, max_steps)
    if killed is not None:
        out.relaxed = not_reproduced(reference, killed)
    _first_difference(out, reference, resumed, numbers, killed)
    if out.causes:
        return out
    if "params" in out.relaxed:
        out.verdict = NOT_REPRODUCIBLE
        return out
    if out.diverged_at is None:
        exact = all(r.get("loss") == s.get("loss") for r, s in _pairs(reference, resumed, numbers))
        last = numbers[-1]
        if last in reference.params and last in resumed.params:
            delta = float(np.max(np.abs(reference.params[last] - resumed.params[last])))
            out.max_param_delta = delta
            exact = exact and delta == 0.0
        out.verdict = BIT_FOR_BIT if exact else WITHIN_TOLERANCE
    return out


def _resume_point(out: ResumeOutcome, numbers: list[int], max_steps: int) -> None:
    repeated = sorted(n for n, c in Counter(numbers).items() if c > 1)
    missing = sorted(set(range(numbers[0], max(numbers) + 1)) - set(numbers))
    if out.resumed_at == 0 and out.expected_at > 0:
        out.causes.append(f"started again from step 1 although the checkpoint of step {out.expected_at} was "
                          "complete (a fresh start: nothing restored)")
    elif out.resumed_at != out.expected_at:
        lost = " (work lost)" if out.resumed_at < out.expected_at else ""
        out.causes.append(f"resumed after step {out.resumed_at}, but the latest complete checkpoint was of step "
                          f"{out.expected_at}{lost}")
    if repeated:
        out.causes.append(f"step number(s) {_few(repeated)} recorded twice")
    if missing:
        out.causes.append(f"step number(s) {_few(missing)} missing")
    left = max_steps - out.resumed_at
    if len(numbers) != left:
        out.causes.append(f"{len(numbers)} optimizer steps after resuming where {left} were left (step counter off "
                          f"by {len(numbers) - left:+d}: a step repeated or skipped)")


def _pairs(reference: JobEvidence, resumed: JobEvidence, numbers: list[int]):
    by_step = {int(s["step"]): s for s in reference.steps}
    return [(by_step.get(n, {}), s) for n, s in zip(numbers, resumed.steps)]


QUANTITIES = {"ids": "samples", "lr": "LR", "rng": "RNG digest"}   # besides the parameters and the loss
START_STATE = {   # what a resumed job records of the state it started from -> the cause when it is not restored
    "params": "model state lost: the weights it resumed with are not those after step {start}, which its checkpoint "
              "was written from",
    "buffers": "buffers lost: the buffers it resumed with (BatchNorm running statistics) are not those after step "
               "{start}, which its checkpoint was written from (the weights are)"}


def not_reproduced(reference: JobEvidence, killed: JobEvidence) -> dict[str, str]:
    """The quantities the interrupted job had already left the uninterrupted run's values of before the kill
    (a difference after the resume then says nothing about the resume): quantity -> why, in words. `params`
    stands for the parameters and the loss (the wrapper is not bitwise reproducible)."""
    out: dict[str, str] = {}
    for step in sorted(s for s in killed.params if s in reference.params):
        if not _params_close(killed.params[step], reference.params[step]):
            out["params"] = (f"parameters and loss (not reproducible: the interrupted run's parameters already "
                             f"differ from the uninterrupted run's after step {step}, before any kill or resume)")
            break
    ref_ids, kill_ids = step_ids(reference), step_ids(killed)
    by_step = {int(s["step"]): s for s in reference.steps}
    for row in killed.steps:
        n = int(row["step"])
        ref = by_step.get(n)
        if ref is None:
            continue
        differs = {"ids": n in ref_ids and n in kill_ids and ref_ids[n] != kill_ids[n],
                   "lr": ref.get("lr") is not None and row.get("lr") is not None and not _close(ref["lr"], row["lr"]),
                   "rng": ref.get("rng") is not None and row.get("rng") is not None and ref["rng"] != row["rng"]}
        for key, what in QUANTITIES.items():
            if differs[key] and key not in out:
                out[key] = (f"{what} (not reproducible: the interrupted run's {what} already differs from the "
                            f"uninterrupted run's at step {n}, before any kill or resume)")
    return out


def _checked(relaxed: dict[str, str]) -> str:
    left = [what for key, what in QUANTITIES.items() if key not in relaxed]
    return ", ".join(left[:-1]) + (" and " if len(left) > 1 else "") + left[-1] if left else "step numbers"


def _first_difference(out: ResumeOutcome, reference: JobEvidence, resumed: JobEvidence, numbers: list[int],
                      killed: JobEvidence | None = None) -> None:
    ref_ids, res_ids = step_ids(reference), step_ids(resumed)
    owner = {tuple(v): k for k, v in ref_ids.items()}
    start, relaxed = out.resumed_at, out.relaxed
    # the weights (then the buffers) its checkpoint was written from: the interrupted run's own (reproducible or
    # not), else the uninterrupted run's (only when the parameters reproduce)
    for key, lost in START_STATE.items():
        written = getattr(killed, key).get(start) if killed is not None else None
        expected = written if written is not None else None if "params" in relaxed else \
            getattr(reference, key).get(start)
        got = getattr(resumed, key).get(start)
        if expected is not None and got is not None and not _params_close(got, expected):
            out.diverged_at = start + 1
            out.causes.append(lost.format(start=start))
            return
    ref_modes, res_modes = step_modes(reference), step_modes(resumed)
    ref_dtypes, res_dtypes = step_modes(reference, key="dtype"), step_modes(resumed, key="dtype")
    for (ref, res), n in zip(_pairs(reference, resumed, numbers), numbers):
        if not ref:
            out.diverged_at = n
            out.causes.append(f"step {n} is past the uninterrupted run's last step")
            return
        if n in ref_modes and n in res_modes and ref_modes[n] != res_modes[n]:
            out.diverged_at = n
            out.causes.append(f"model mode lost: step {n} trained in {_modes(res_modes[n])} mode, the uninterrupted "
                              f"run in {_modes(ref_modes[n])} mode")
            return
        lost = _precision_lost(n, ref_dtypes.get(n), res_dtypes.get(n), ref, res, n == numbers[0])
        if lost:
            out.diverged_at = n
            out.causes.append(lost)
            return
        cause = _cause(ref, res, n, ref_ids.get(n), res_ids.get(n), owner, reference, resumed, relaxed)
        if cause == SAME_INPUTS:
            # Nothing a resume restores differs (weights, buffers, samples, LR, RNG, mode, dtype), the loss within
            # LOSS_LOST_RTOL: the computation gave another loss from the same inputs. Not a state lost: the run is
            # not bitwise reproducible here, so its parameters and loss cannot be compared from this step on;
            # everything else still is.
            relaxed["params"] = (f"parameters and loss (not reproducible: the loss of step {n} differs "
                                 f"({res.get('loss'):.6g} vs {ref.get('loss'):.6g}) with the same weights, samples, "
                                 "LR, RNG and model mode: the computation itself, not a state the resume restores)")
        elif cause:
            out.diverged_at = n
            out.causes.append(cause)
            return


def _cause(ref, res, n, ref_ids, res_ids, owner, reference, resumed, relaxed=()) -> str | None:
    if "ids" not in relaxed and ref_ids is not None and res_ids is not None and ref_ids != res_ids:
        same = owner.get(tuple(res_ids))
        where = (f"the samples of step {same} ({'repeated' if same < n else 'skipped ahead'})" if same is not None
                 else "samples the uninterrupted run did not train on at that point")
        return f"data position lost: step {n} trained on {where}"
    if "lr" not in relaxed and not _close(ref.get("lr"), res.get("lr")):
        lr = f"LR {res.get('lr'):.6g} at step {n}, the uninterrupted run had {ref.get('lr'):.6g}"
        if n == int(resumed.steps[0]["step"]) and _lr_agrees_after(reference, resumed, n):
            return (f"optimizer state lost: {lr}, and the LR agrees again from the next step: the optimizer's "
                    "param groups (which hold the LR) were not restored, the scheduler's state was")
        return f"scheduler state lost: {lr}"
    if "rng" not in relaxed and ref.get("rng") is not None and res.get("rng") is not None and ref["rng"] != res["rng"]:
        return f"RNG state lost: the RNG at step {n}'s first forward is not the uninterrupted run's (dropout differs)"
    if "params" in relaxed:        # not reproducible: the loss and the update differ run to run
        return None
    if not _close(ref.get("loss"), res.get("loss")):
        if ref.get("loss") is None or res.get("loss") is None:
            return SAME_INPUTS
        off = abs(ref["loss"] - res["loss"]) / max(abs(ref["loss"]), abs(res["loss"]), 1e-12)
        if off <= LOSS_LOST_RTOL:
            return SAME_INPUTS
        return (f"{LOST_STATE}: the loss of step {n} is {res['loss']:.6g}, the uninterrupted run's {ref['loss']:.6g} "
                f"(relative {off:.2g}, beyond the {LOSS_LOST_RTOL:g} reproducibility noise stays within), with the "
                "same weights, buffers, samples, LR, RNG and model mode")
    if n in reference.params and n in resumed.params and not _params_close(resumed.params[n], reference.params[n]):
        return (f"optimizer state lost: the update of step {n} differs with the same weights, samples and LR "
                "(the optimizer's moments or step count were not restored)")
    return None


def _precision_lost(n: int, ref_dtypes, res_dtypes, ref: dict, res: dict, first: bool) -> str | None:
    """The compute dtypes of step `n`'s forwards, and at the first resumed step the loss scale it ran with (the
    scaler's state restored sets it; later its own history, which noise can change, does)."""
    if ref_dtypes and res_dtypes and set(ref_dtypes) != set(res_dtypes):
        return (f"precision lost: step {n} computed in {'/'.join(sorted(set(res_dtypes)))}, the uninterrupted run in "
                f"{'/'.join(sorted(set(ref_dtypes)))}")
    scales = ref.get("loss_scale"), res.get("loss_scale")
    if first and None not in scales and not _close(*scales):
        return (f"loss scale lost: step {n} ran with loss scale {scales[1]:g}, the uninterrupted run with "
                f"{scales[0]:g} (the gradient scaler's state was not restored)")
    return None


def _lr_agrees_after(reference: JobEvidence, resumed: JobEvidence, n: int) -> bool:
    ref = {int(s["step"]): s.get("lr") for s in reference.steps}
    later = [(ref.get(int(s["step"])), s.get("lr")) for s in resumed.steps if int(s["step"]) > n]
    return bool(later) and all(_close(a, b) for a, b in later)


def _few(values: list[int]) -> str:
    return ", ".join(map(str, values[:5])) + (f" and {len(values) - 5} more" if len(values) > 5 else "")
