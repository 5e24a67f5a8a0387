"""Windows and padding judged from what each step saw, whatever the order: used when no known sampler
reproduces a job's order (a wrapper's own shuffling), where the layouts of `explain_windows` cannot be laid over it.

The ranks' micro-batches at one position of their streams form a global batch. Epochs are cut from the samples
alone: a global batch whose samples were all unseen in the epoch so far belongs to it; with several ranks, one that
repeats some of them while bringing the last unseen ones of the training set closes the epoch padded (those samples
seen twice); any other repeat starts a new epoch, and an epoch that saw every sample is complete. Findings:
- `order.padded`: a sample seen twice in one epoch (a last batch padded with repeats, or one sample on two ranks);
- `window.spans_epochs`: an optimizer step whose micro-batches belong to two epochs (accumulation counted on the
  global iteration, not per epoch);
- `ddp.not_sharded`: every rank saw the same micro-batches at every step (the epochs are then cut on one rank's);
- `batch.partial` (`check_partial_batches`, judged for every job whatever its order): a micro-batch with fewer
  samples than the batch size (a loader that keeps the epoch's incomplete last batch: its mean loss weighs its few
  samples like a full batch).
"""
from __future__ import annotations

from typing import Callable

from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import Caliber

Streams = dict[int, list[tuple[int, list[int]]]]     # rank -> (step, ids) of each micro-batch, in order
COVERAGE_KNOB = "the wrapper's sampler = evalkit's (drop_last, no padding), accumulation windows per epoch"


def global_batches(streams: Streams) -> list[tuple[int, list[int]]]:
    """(step, the samples of every rank) at each stream position all ranks reached."""
    ranks = sorted(streams)
    depth = min(len(streams[r]) for r in ranks) if ranks else 0
    return [(streams[ranks[0]][j][0], [i for r in ranks for i in streams[r][j][1]]) for j in range(depth)]


def epochs_of(batches: list[tuple[int, list[int]]], n: int, may_pad: bool
              ) -> tuple[list[int], list[tuple[int, list[int]]]]:
    """Each global batch's epoch (0-based), and (step, samples seen twice) for each padded batch. `may_pad`: a
    batch that repeats samples while completing the epoch closes it padded (several ranks: a sampler that evens them
    out); one process never pads, and there such a batch is the next epoch's first, holding the sample an epoch
    that dropped its incomplete last batch never served."""
    epoch, seen, out, padded = 0, set(), [], []
    for step, ids in batches:
        repeats = sorted({i for i in ids if i in seen} | {i for i in ids if ids.count(i) > 1})
        unseen = set(ids) - seen
        if repeats and not (may_pad and unseen and len(seen | unseen) == n):
            epoch, seen = epoch + 1, set()          # a new epoch begins with this batch
            repeats = sorted({i for i in ids if ids.count(i) > 1})
            unseen = set(ids)
        out.append(epoch)
        seen |= unseen
        if repeats:
            padded.append((step, repeats))
        if len(seen) == n:                            # every sample seen: the epoch is complete
            epoch, seen = epoch + 1, set()
    return out, padded


def check_coverage(job: str, cal: Caliber, streams: Streams, declared: Callable[[str], str]) -> list[Finding]:
    found: list[Finding] = []
    ranks = sorted(streams)
    if len(ranks) > 1 and all(streams[r] == streams[ranks[0]] for r in ranks):
        found.append(Finding(code="ddp.not_sharded", title="every rank trained on the same samples", job=job,
                             first_step=streams[ranks[0]][0][0] if streams[ranks[0]] else None,
                             expected=f"each sample on one of the {len(ranks)} ranks",
                             observed="the same micro-batches on every rank at every step",
                             size=f"{len(streams[ranks[0]])} micro-batches repeated on {len(ranks)} ranks",
                             explained_by=["the data not sharded across ranks (a process that does not know it is "
                                           "one of several: no distributed sampler)"], knob=COVERAGE_KNOB,
                             declared=declared("ddp.not_sharded")))
        streams = {ranks[0]: streams[ranks[0]]}       # the epochs, windows and batches of one rank
    batches = global_batches(streams)
    if not batches:
        return found
    epochs, padded = epochs_of(batches, cal.n_train, may_pad=len(streams) > 1)
    if padded:
        step, ids = padded[0]
        found.append(Finding(code="order.padded", title="samples seen twice in one epoch", job=job,
                             first_step=step, expected="each sample at most once an epoch", observed=ids,
                             size=f"sample(s) {ids} repeated at step {step}; {len(padded)} padded batch(es)",
                             explained_by=["the last batch of an epoch padded with samples already seen (even "
                                           "batches across ranks)"], knob=COVERAGE_KNOB,
                             declared=declared("order.padded")))
    per_step: dict[int, set[int]] = {}
    for (step, _), epoch in zip(batches, epochs):
        per_step.setdefault(step, set()).add(epoch)
    spanning = [k for k in sorted(per_step) if len(per_step[k]) > 1]
    if spanning:
        found.append(Finding(code="window.spans_epochs", title="accumulation windows that span two epochs", job=job,
                             first_step=spanning[0], expected="every window inside one epoch",
                             observed=f"steps {spanning} take micro-batches of two epochs",
                             size=f"{len(spanning)} of {len(per_step)} steps",
                             explained_by=["accumulation counted on the global iteration, not restarted at each "
                                           "epoch (the epoch's remainder joins the next epoch's first window)"],
                             knob=COVERAGE_KNOB, declared=declared("window.spans_epochs")))
    return found


def check_partial_batches(job: str, cal: Caliber, streams: Streams, declared: Callable[[str], str]
                          ) -> list[Finding]:
    """Micro-batches of fewer samples than the batch size, whatever the order (judged for every job)."""
    partial = [(step, len(ids)) for r in sorted(streams) for step, ids in streams[r] if len(ids) < cal.batch_size]
    if not partial:
        return []
    step, size = min(partial)
    return [Finding(code="batch.partial", title="micro-batches smaller than the batch size", job=job,
                    first_step=step, expected=f"{cal.batch_size} samples per micro-batch",
                    observed=f"{size} sample(s)", size=f"{len(partial)} micro-batch(es) of fewer samples",
                    explained_by=["a loader that keeps each epoch's incomplete last batch (drop_last=False)"],
                    knob=COVERAGE_KNOB, declared=declared("batch.partial"))]
