"""Accumulation windows: which micro-batches each optimizer step consumed, against the layouts a loop may use.

Layouts of one sampler's epochs: "evalkit" (windows of grad_accum, a short window at each epoch's end),
"dropped" (the short window never run nor stepped), "carried" (micro-batches cut into windows across epoch
ends), "merged" (windows counted from each epoch's start; the short remainder is not stepped but accumulates
into the next epoch's first window, which then holds more than grad_accum micro-batches), "leading" (a step at each
epoch's iterations 0, N, 2N, ...: a first window of one micro-batch, the remainder carried). The observed windows
match a layout when every step holds exactly its micro-batches on every rank.
"""
from __future__ import annotations

from typing import Callable

from evalkit.probes.findings import Finding
from evalkit.probes.semantics.explain_order import Sampler, micro_epochs
from evalkit.probes.semantics.oracle import Caliber

Groups = dict[int, dict[int, list[list[int]]]]        # step -> rank -> micro-batches' ids
WINDOW_KNOB = "step at each epoch's end on the short window (gradient accumulation that flushes at the epoch end)"
LAYOUTS = {
    "dropped": ("window.short_dropped", "the short last window of each epoch never stepped (its samples absent, "
                "fewer steps per epoch)"),
    "carried": ("window.short_carried", "the short last window carried into the next epoch (a window spanning "
                "two epochs)"),
    "merged": ("window.short_merged", "the short last window not stepped: its gradients join the next epoch's "
               "first window (one step over more than grad_accum micro-batches)"),
    "leading": ("window.first_single", "the step taken when the epoch's iteration i has i % grad_accum == 0 "
                "(`is_accumulating = iteration % N != 0`): each epoch's first window holds one micro-batch, and an "
                "epoch's remainder joins the next epoch's first window"),
}


def observed_groups(streams: dict[int, list[tuple[int, list[int]]]]) -> Groups:
    groups: Groups = {}
    for rank, stream in streams.items():
        for step, ids in stream:
            groups.setdefault(step, {}).setdefault(rank, []).append(ids)
    return groups


def layout_groups(cal: Caliber, sampler: Sampler, layout: str, n_steps: int, ranks: list[int]) -> Groups:
    per_rank: dict[int, list[list[list[int]]]] = {}
    for rank in ranks:
        windows: list[list[list[int]]] = []
        carry: list[list[int]] = []
        for count, epoch in enumerate(micro_epochs(cal, sampler, rank)):
            # "dropped" never completes a window when epochs are shorter than one: stop where any layout would be done
            if not epoch or len(windows) >= n_steps or count > n_steps * cal.grad_accum:
                break
            if layout == "leading":
                for i, batch in enumerate(epoch):
                    carry.append(batch)
                    if i % cal.grad_accum == 0:
                        windows.append(carry)
                        carry = []
                continue
            batches, head, carry = (epoch, carry, []) if layout == "merged" else (carry + epoch, [], [])
            for lo in range(0, len(batches), cal.grad_accum):
                window = batches[lo:lo + cal.grad_accum]
                if len(window) < cal.grad_accum and layout != "evalkit":
                    carry = window if layout in ("carried", "merged") else []
                    break
                windows.append(head + window)
                head = []
        per_rank[rank] = windows[:n_steps]
    return {k + 1: {r: per_rank[r][k] for r in ranks if k < len(per_rank[r])} for k in range(n_steps)}


def _first_mismatch(observed: Groups, predicted: Groups) -> int | None:
    return next((k for k in sorted(observed) if observed[k] != predicted.get(k)), None)


def check_windows(job: str, cal: Caliber, sampler: Sampler, streams, declared: Callable[[str], str]
                  ) -> list[Finding]:
    """Window findings of one job whose micro-batch stream `sampler` reproduces (or that drops windows)."""
    observed = observed_groups(streams)
    if not observed:
        return []
    n_steps, ranks = max(observed), sorted(streams)
    first = _first_mismatch(observed, layout_groups(cal, sampler, "evalkit", n_steps, ranks))
    if first is None:
        return []
    sizes = {k: len(observed[k].get(0, [])) for k in observed}
    for layout, (code, words) in LAYOUTS.items():
        if _first_mismatch(observed, layout_groups(cal, sampler, layout, n_steps, ranks)) is None:
            return [Finding(code=code, title=words, job=job, first_step=first, expected="a short window per epoch",
                            observed=f"windows of {sorted(set(sizes.values()))} micro-batches",
                            size=f"micro-batches per step {[sizes[k] for k in sorted(sizes)]}",
                            explained_by=[words], knob=WINDOW_KNOB, declared=declared(code))]
    return [Finding(code="unexplained.windows", title="micro-batches grouped into steps differently (unexplained)",
                    job=job, first_step=first, observed=f"micro-batches per step {[sizes[k] for k in sorted(sizes)]}",
                    size=f"from step {first}", declared=declared("unexplained.windows"))]


def merged_stream_matches(cal: Caliber, sampler: Sampler, streams) -> bool:
    """The stream is the sampler's with each epoch's short window joined to the next epoch's first window: the
    steps with more than grad_accum micro-batches are accounted for."""
    observed = observed_groups(streams)
    if not observed:
        return False
    predicted = layout_groups(cal, sampler, "merged", max(observed), sorted(streams))
    return _first_mismatch(observed, predicted) is None


def dropped_stream_matches(cal: Caliber, sampler: Sampler, streams) -> bool:
    """The stream equals the sampler's with each epoch's short window removed (the order itself is right)."""
    observed = observed_groups(streams)
    if not observed:
        return False
    predicted = layout_groups(cal, sampler, "dropped", max(observed), sorted(streams))
    return _first_mismatch(observed, predicted) is None
