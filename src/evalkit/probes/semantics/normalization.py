"""How a loop normalizes a window's loss: the weight each micro-batch's mean-loss gradient gets in the window's
gradient, per normalization, and the finding each wrong one is named by.

On a task with a fixed number of loss terms per sample the careful loop divides each micro-batch loss by the window's
size ("window"); the wrong ones are dividing by grad_accum also in a short window ("accum") and not dividing at all
("none"). On a task whose micro-batches hold different numbers of loss terms (the token caliber: padded targets,
`ignore_index=-100`), the careful loop takes the token mean over the WHOLE window ("tokens": each micro-batch's
token-mean gradient times its tokens, over the window's tokens on all ranks), and the wrong ones are named by
`TOKEN_CODES`: the mean of micro-batch means (each divided by the window's size, or by grad_accum), the micro-batch
means summed (grad_accum times their mean on a full window: a compute_loss that ignores the transformers Trainer's
`num_items_in_batch`), the per-micro-batch sum (token losses summed, never divided by a count), and the token mean
scaled by the accumulation count (times or divided by grad_accum). Pure: no torch, no records.
"""
from __future__ import annotations

FIXED = ("window", "accum", "none")
TOKENS = ("tokens", "window", "accum", "none", "token_sum", "tokens_x_accum", "tokens_per_accum")

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
}
TOKEN_KNOB = ("normalize by the window's token count: the sum of the window's token losses over its target tokens on "
              "all ranks (the transformers Trainer: a model that accepts num_items_in_batch, or a compute_loss that "
              "divides by it)")
NAMES = {"tokens": "the token mean over the window (the window's token losses summed, over its target tokens)",
         **{d: words.split(":")[0] for d, (_, words) in TOKEN_CODES.items()}}


def divisions(tokens: bool) -> tuple[str, ...]:
    """The normalizations a model may pick: the careful loop's first."""
    return TOKENS if tokens else FIXED


def weights(division: str, n: int, counts: list[int] | None, total: int | None, accum: int, world_size: int
            ) -> list[float]:
    """The weight of each of a rank's `n` micro-batches (`counts`: their loss terms; `total`: the window's on all
    ranks): the ranks' gradients are then averaged, as DDP does, so a token weight carries the world size."""
    if division in FIXED:
        return [{"window": 1 / n if n else 0.0, "accum": 1 / accum, "none": 1.0}[division]] * n
    if counts is None:
        raise ValueError(f"the {division!r} normalization needs each micro-batch's loss terms")
    scale = {"tokens": world_size / max(total or 0, 1), "token_sum": 1.0,
             "tokens_x_accum": accum * world_size / max(total or 0, 1),
             "tokens_per_accum": world_size / (accum * max(total or 0, 1))}[division]
    return [c * scale for c in counts]
