"""How a loop normalizes a window's loss: the weight each micro-batch's mean-loss gradient gets in the window's
gradient, per normalization, and the finding each wrong one is named by.

On a task with a fixed number of loss terms per sample the careful loop divides each micro-batch loss by the window's
size ("window"); the wrong ones are dividing by grad_accum also in a short window ("accum") and not dividing at all
("none"). On a task whose micro-batches hold different numbers of loss terms (the token caliber: padded targets,
`ignore_index=-100`), the careful loop takes the token mean over the WHOLE window ("tokens": each micro-batch's
token-mean gradient times its tokens, over the window's tokens on all ranks), and the wrong ones are named by
`TOKEN_CODES`: the mean of micro-batch means (each divided by the window's size, or by grad_accum), the micro-batch
means summed (grad_accum times their mean on a full window: a compute_loss that ignores the transformers Trainer's
`num_items_in_batch`), the per-micro-batch sum (token losses summed, never divided by a count), the token mean
scaled by the accumulation count (times or divided by grad_accum), and, at several ranks only, the per-rank token mean
("rank_tokens": each rank's token losses over its OWN target tokens, the ranks' means then averaged as DDP averages:
the transformers Trainer with `average_tokens_across_devices=False`); at one rank it is the token mean itself, so it is
no alternative there. Pure: no torch, no records.
"""
from __future__ import annotations

FIXED = ("window", "accum", "none")
TOKENS = ("tokens", "window", "accum", "none", "token_sum", "tokens_x_accum", "tokens_per_accum")
RANKS = ("rank_tokens",)     # token normalizations that differ from "tokens" only at several ranks

# division -> (code, words) on the token caliber; "tokens" is the careful loop's and has none
TOKEN_CODES: dict[str, tuple[str, str]] = {
    "window": ("loss_norm.micro_mean", "mean of micro-batch means: each micro-batch's token mean divided by the "
               "window's micro-batch count, not weighted by its tokens"),
    "accum": ("loss_norm.micro_mean", "mean of micro-batch means divided by grad_accum: each micro-batch's token "
              "mean divided by grad_accum (also in a short window), not weighted by its tokens"),
    "none": ("loss_norm.micro_sum", "micro-batch means summed, not averaged: grad_accum times the mean of "
             "micro-batch means on a full window (a custom compute_loss that ignores num_items_in_batch)"),
    "token_sum": ("loss_norm.token_sum", "per-micro-batch sum: each micro-batch's token losses summed, never divided "
                  "by a token count"),
    "tokens_x_accum": ("loss_norm.accum_scaled", "the token mean over the window scaled by the accumulation count: "
                       "multiplied by grad_accum"),
    "tokens_per_accum": ("loss_norm.accum_scaled", "the token mean over the window scaled by the accumulation count: "
                         "divided by grad_accum once more"),
    "rank_tokens": ("loss_norm.rank_mean", "per-rank token mean: each rank's token losses over its own target "
                    "tokens, not the window's on all ranks, the ranks' means then averaged (a rank with fewer tokens "
                    "weighs each of them more)"),
}
TOKEN_KNOB = ("normalize by the window's token count: the sum of the window's token losses over its target tokens on "
              "all ranks (the transformers Trainer: a model that accepts num_items_in_batch, or a compute_loss that "
              "divides by it)")
NAMES = {"tokens": "the token mean over the window (the window's token losses summed, over its target tokens)",
         **{d: words.split(":")[0] for d, (_, words) in TOKEN_CODES.items()}}


def divisions(tokens: bool, world_size: int = 1) -> tuple[str, ...]:
    """The normalizations a model may pick: the careful loop's first (the per-rank token mean only at several ranks,
    where it differs from the token mean over the window)."""
    if not tokens:
        return FIXED
    return TOKENS + RANKS if world_size > 1 else TOKENS


def weights(division: str, n: int, counts: list[int] | None, total: int | None, accum: int, world_size: int
            ) -> list[float]:
    """The weight of each of a rank's `n` micro-batches (`counts`: their loss terms; `total`: the window's on all
    ranks): the ranks' gradients are then averaged, as DDP does, so a token weight over all ranks carries the world
    size; the per-rank token mean divides by the rank's own terms (`sum(counts)`) and carries none."""
    if division in FIXED:
        return [{"window": 1 / n if n else 0.0, "accum": 1 / accum, "none": 1.0}[division]] * n
    if counts is None:
        raise ValueError(f"the {division!r} normalization needs each micro-batch's loss terms")
    if division == "rank_tokens":
        return [c / max(sum(counts), 1) for c in counts]
    scale = {"tokens": world_size / max(total or 0, 1), "token_sum": 1.0,
             "tokens_x_accum": accum * world_size / max(total or 0, 1),
             "tokens_per_accum": world_size / (accum * max(total or 0, 1))}[division]
    return [c * scale for c in counts]
