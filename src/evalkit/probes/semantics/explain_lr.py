"""Alternative LR semantics: each predicts the LR sequence (or scheduler step counts) and says if it reproduces it.

An observed LR matches a prediction within `LR_REL_TOL` relative (plus 1e-12 absolute). A candidate explains the
observation only when it reproduces every step's LR.
"""
from __future__ import annotations

from typing import Callable

from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import LR_REL_TOL, Caliber, Window, expected_lr

SCHED_KNOB = "the wrapper's scheduler interval = optimizer step (one scheduler.step() per optimizer step)"
Completed = Callable[[int], float]      # optimizer step (1-based) -> predicted LR


def _close(observed: float, predicted: float) -> bool:
    return abs(observed - predicted) <= LR_REL_TOL * abs(predicted) + 1e-12


def _cumulative_micro(rows: list[dict]) -> dict[int, int]:
    """Micro-batches run before each step (rank 0's records)."""
    out, total = {}, 0
    for row in sorted(rows, key=lambda r: r["step"]):
        out[int(row["step"])] = total
        total += int(row.get("micro_batches") or 0)
    return out


def _epoch_of(windows: list[Window]) -> Callable[[int], int]:
    """The epoch of optimizer step k: its window's; past the windows (a wrapper that ran on beyond max_steps to its
    epoch's end), epochs of as many steps as the first one held."""
    known = {w.step: w.epoch for w in windows}
    per_epoch = sum(1 for w in windows if w.epoch == min(known.values())) if known else 0
    return lambda k: known[k] if k in known else (k - 1) // per_epoch if per_epoch else 0


def lr_candidates(cal: Caliber, rows: list[dict], windows: list[Window]) -> list[tuple[str, str, Completed]]:
    """(code, plain words, predicted LR of step k) for each alternative LR semantics."""
    micro_before = _cumulative_micro(rows)
    window_size = {int(r["step"]): int(r.get("micro_batches") or 1) for r in rows}
    epoch_of = _epoch_of(windows)
    a, W = cal.grad_accum, cal.world_size
    out: list[tuple[str, str, Completed]] = [
        ("lr.per_micro_batch", "the scheduler stepped once per micro-batch (its count = micro-batches run)",
         lambda k: cal.lr_at(micro_before.get(k, 0))),
        ("lr.per_micro_batch", "the LR set once per micro-batch, before each one (an optimizer step runs with the "
         "LR of its window's last micro-batch)",
         lambda k: cal.lr_at(micro_before.get(k, 0) + window_size.get(k, 1) - 1)),
        ("lr.per_epoch", "the scheduler stepped once per epoch (its count = epochs completed)",
         lambda k: cal.lr_at(epoch_of(k))),
    ]
    for m in (2, 3, 4):
        out.append(("lr.twice_per_step", f"the scheduler stepped {m} times per optimizer step",
                    lambda k, m=m: cal.lr_at(m * (k - 1))))
    out += [
        ("lr.warmup_off_by_one", "the LR of step k computed from k completed steps instead of k-1 (one ahead)",
         lambda k: cal.lr_at(k)),
        ("lr.warmup_off_by_one", "the LR of step k computed from k-2 completed steps instead of k-1 "
         "(one behind: step 1 at LR 0)", lambda k: cal.lr_at(k - 2)),
        ("lr.warmup_from_zero", "a warm-up that starts at LR 0 (step/warmup, lr 0 at step 1), the decay "
         "unchanged (the common 'linear schedule with warmup' convention)",
         lambda k: cal.lr_at(k - 2) if k - 1 < cal.warmup_steps else cal.lr_at(k - 1)),
    ]
    for m, unit in ((a, "micro-batches"), (W, "rank-steps"), (a * W, "micro-batches of all ranks")):
        if m > 1:
            out.append(("lr.warmup_unit", f"warm-up and decay lengths counted in {unit} ({cal.warmup_steps}x{m} "
                        f"and {cal.max_steps}x{m}) while the scheduler steps once per optimizer step",
                        lambda k, m=m: cal.lr_at(k - 1, cal.warmup_steps * m, cal.max_steps * m)))
    for stretch in (1, 2, 3, 4, 6):
        for shift in (-2, -1, 0, 1, 2):
            for m in sorted({1, a, W, a * W}):
                if (stretch, shift, m) != (1, 0, 1):
                    out.append(("lr.rescaled_schedule", f"evalkit's schedule with its step count x{stretch}"
                                f"{f' shifted by {shift:+d}' if shift else ''}"
                                f"{f', warm-up/decay lengths x{m}' if m > 1 else ''}",
                                lambda k, s=stretch, b=shift, m=m: cal.lr_at(s * (k - 1) + b, cal.warmup_steps * m,
                                                                           cal.max_steps * m)))
    return out


def check_lr(job: str, cal: Caliber, rows: list[dict], windows: list[Window], declared: Callable[[str], str]
             ) -> tuple[list[Finding], float]:
    """LR findings of one job (at most one) and the largest relative LR error."""
    observed = {int(r["step"]): float(r["lr"]) for r in rows if r.get("lr") is not None}
    if not observed:
        return [], float("nan")
    errors = {k: abs(v - expected_lr(cal, k)) / max(expected_lr(cal, k), 1e-12) for k, v in observed.items()}
    worst = max(errors.values())
    wrong = [k for k in sorted(observed) if not _close(observed[k], expected_lr(cal, k))]
    if not wrong:
        return [], worst
    matching = [(code, words) for code, words, predict in lr_candidates(cal, rows, windows)
                if all(_close(v, predict(k)) for k, v in observed.items())]
    named = [m for m in matching if m[0] != "lr.rescaled_schedule"] or matching
    code = named[0][0] if named else "unexplained.lr"
    first = wrong[0]
    words = list(dict.fromkeys(w for c, w in named if c == code)) + \
        list(dict.fromkeys(w for c, w in matching if c != code))
    return [Finding(
        code=code, title="LR schedule differs" if named else "LR differs from the schedule (unexplained)",
        job=job, first_step=first, expected=round(expected_lr(cal, first), 6), observed=round(observed[first], 6),
        size=f"lr {observed[first]:.4g} vs {expected_lr(cal, first):.4g} at step {first}; "
             f"{len(wrong)} of {len(observed)} steps differ",
        explained_by=words, knob=SCHED_KNOB, declared=declared(code),
        evidence={"steps": sorted(observed), "observed_lr": [observed[k] for k in sorted(observed)],
                  "expected_lr": [expected_lr(cal, k) for k in sorted(observed)]})], worst


def check_sched_count(job: str, rows: list[dict], windows: list[Window], declared: Callable[[str], str]
                      ) -> list[Finding]:
    """Scheduler step() calls counted before each step against the optimizer steps before it (k - 1)."""
    counts = {int(r["step"]): int(r["sched_steps"]) for r in rows if r.get("sched_steps") is not None}
    wrong = [k for k in sorted(counts) if counts[k] != k - 1]
    if not wrong or not any(counts.values()):      # all zero: the wrapper moves the LR without step() calls
        return []
    micro_before, epoch_of = _cumulative_micro(rows), _epoch_of(windows)
    models = [("once per micro-batch", lambda k: micro_before.get(k)), ("once per epoch", epoch_of)]
    models += [(f"{m} times per optimizer step", lambda k, m=m: m * (k - 1)) for m in (2, 3, 4)]
    models += [("once per optimizer step, counted one ahead", lambda k: k),
               ("once per optimizer step, counted one behind", lambda k: max(0, k - 2))]
    words = [f"the scheduler's step() was called {name}" for name, f in models
             if all(counts[k] == f(k) for k in counts)]
    first = wrong[0]
    return [Finding(code="sched.count", title="scheduler step count differs from optimizer steps", job=job,
                    first_step=first, expected=first - 1, observed=counts[first],
                    size=f"{counts[first]} scheduler steps before optimizer step {first} (expected {first - 1})",
                    explained_by=words, knob=SCHED_KNOB, declared=declared("sched.count"),
                    evidence={"steps": sorted(counts), "sched_steps": [counts[k] for k in sorted(counts)]})]
