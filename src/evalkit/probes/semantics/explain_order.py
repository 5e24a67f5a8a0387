"""Data order and window layout: the micro-batches each rank saw against evalkit's order, and the samplers
that reproduce what was seen instead.

A rank's observed stream is its micro-batches in step order. It matches a sampler when it equals the sampler's
micro-batch sequence (epoch after epoch) over its whole length, on every rank. The windows are then checked
against that sampler's epochs: `grad_accum` micro-batches per window, one short window at each epoch's end.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import Caliber, epoch_micro_batches

ORDER_KNOB = "the wrapper's sampler = evalkit's (job.train_sampler / train_loader), no sampler injection"
SEEDS = (0, 42, 1234)
Epochs = Callable[[int, int], list[int]]     # (epoch, rank) -> the rank's sample ids of that epoch


@dataclass
class Sampler:
    code: str | None        # None: evalkit's own order
    words: str
    epochs: Epochs
    drop_last: bool = True  # the loader drops an incomplete micro-batch
    pads: bool = False      # the sampler repeats samples to even out the ranks


def _batches(ids: list[int], size: int, drop_last: bool) -> list[list[int]]:
    out = [ids[i:i + size] for i in range(0, len(ids), size)]
    return [b for b in out if len(b) == size] if drop_last else out


def micro_epochs(cal: Caliber, sampler: Sampler, rank: int) -> Iterator[list[list[int]]]:
    epoch = 0
    while True:
        yield _batches(sampler.epochs(epoch, rank), cal.batch_size, sampler.drop_last)
        epoch += 1


def _perm(seed: int, n: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def _distributed(n: int, W: int, seed: int, drop_last: bool, fixed_epoch: bool) -> Epochs:
    def epochs(e: int, r: int) -> list[int]:
        ids = _perm(seed + (0 if fixed_epoch else e), n)
        total = (n // W) * W if drop_last else math.ceil(n / W) * W
        ids = (ids + ids * math.ceil(total / n))[:total]
        return ids[r:total:W]
    return epochs


def _sequential_distributed(n: int, W: int, drop_last: bool) -> Epochs:
    """DistributedSampler(shuffle=False): 0..n-1 (padded with its first samples, or cut) to a multiple of W."""
    total = (n // W) * W if drop_last else math.ceil(n / W) * W
    ids = (list(range(n)) * 2)[:total]
    return lambda e, r: ids[r:total:W]


def _seed_plus_epoch(cal: Caliber, seed: int) -> Epochs:
    def epochs(e: int, r: int) -> list[int]:
        per_batch = cal.batch_size * cal.world_size
        used = _perm(seed + e, cal.n_train)[: cal.n_train // per_batch * per_batch]
        return [i for b in range(0, len(used), per_batch)
                for i in used[b + r * cal.batch_size: b + (r + 1) * cal.batch_size]]
    return epochs


def _random_sampler(n: int, seed: int) -> Epochs:
    cache: list[list[int]] = []

    def epochs(e: int, r: int) -> list[int]:
        g = torch.Generator().manual_seed(seed)
        while len(cache) <= e:
            cache.clear()
            cache.extend(torch.randperm(n, generator=g).tolist() for _ in range(e + 1))
        return cache[e]
    return epochs


def samplers(cal: Caliber) -> list[Sampler]:
    n, W, own = cal.n_train, cal.world_size, cal.seed
    evalkit = lambda seed: (lambda e, r: [i for b in epoch_micro_batches(cal, e, r, seed) for i in b])  # noqa: E731
    out = [Sampler(None, "evalkit's order", evalkit(own))]
    out += [Sampler("order.fixed_seed", f"evalkit's order drawn with seed {s} (not the job's seed {own})",
                    evalkit(s)) for s in SEEDS if s != own]
    for seed in sorted({*SEEDS, own}):
        out.append(Sampler("order.fixed_seed" if seed != own else "order.shuffled",
                           f"a permutation per epoch seeded {seed} + epoch, cut into global batches like evalkit's",
                           _seed_plus_epoch(cal, seed)))
    interleave_code = "order.distributed_interleave" if W > 1 else "order.shuffled"
    for fixed in (False, True):
        for seed in sorted({*SEEDS, own}):
            for drop in (False, True):
                for batch_drop in (True, False):
                    where = ", set_epoch never called" if fixed else ""
                    words = (f"torch DistributedSampler(shuffle=True, seed={seed}, drop_last={drop}{where}), "
                             f"loader drop_last={batch_drop}")
                    out.append(Sampler(interleave_code, words, _distributed(n, W, seed, drop, fixed), batch_drop,
                                       pads=not drop and n % W != 0))
    if W > 1:
        out.append(Sampler("order.distributed_interleave", "evalkit's epoch permutation interleaved over ranks "
                           "(rank r takes positions r::W)",
                           lambda e, r: cal.sampler(0).epoch_order(e).tolist()[: (n // W) * W][r::W]))
        for drop in (False, True):
            for batch_drop in (True, False):
                out.append(Sampler("order.distributed_interleave",
                                   f"torch DistributedSampler(shuffle=False, drop_last={drop}): the dataset order "
                                   f"interleaved over ranks, loader drop_last={batch_drop}",
                                   _sequential_distributed(n, W, drop), batch_drop, pads=not drop and n % W != 0))
    else:
        for seed in sorted({*SEEDS, own}):
            for batch_drop in (True, False):
                out.append(Sampler("order.shuffled", f"torch RandomSampler with a generator seeded {seed}, "
                                   f"loader drop_last={batch_drop}", _random_sampler(n, seed), batch_drop))
        out += [Sampler("order.shuffled", f"dataset order, no shuffling, loader drop_last={d}",
                        lambda e, r: list(range(n)), d) for d in (True, False)]
    return out


def observed_stream(job: JobEvidence, rank: int) -> list[tuple[int, list[int]]]:
    """(step, ids) of each training micro-batch of `rank`, in order."""
    rows = sorted((m for m in job.micro.get(rank, []) if not m.get("skipped")), key=lambda m: (m["step"], m["i"]))
    return [(int(m["step"]), list(m["ids"])) for m in rows]


def _reproduces(cal: Caliber, sampler: Sampler, streams: dict[int, list[tuple[int, list[int]]]]) -> bool:
    for rank, stream in streams.items():
        seen, predicted = [ids for _, ids in stream], []
        for epoch in micro_epochs(cal, sampler, rank):
            if len(predicted) >= len(seen) or not epoch:
                break
            predicted += epoch
        if predicted[:len(seen)] != seen:
            return False
    return True


def identify(cal: Caliber, job: JobEvidence) -> tuple[list[Sampler], dict[int, list[tuple[int, list[int]]]]]:
    streams = {r: observed_stream(job, r) for r in range(cal.world_size) if r in job.micro}
    return [s for s in samplers(cal) if _reproduces(cal, s, streams)], streams


UNIDENTIFIED_SHUFFLE = ("shuffled: each sample at most once per epoch, in an order none of the known samplers "
                        "reproduces (e.g. a RandomSampler drawing from the global RNG)")


def check_order(job: str, cal: Caliber, evidence: JobEvidence, declared: Callable[[str], str]
                ) -> tuple[list[Finding], Sampler | None]:
    """Order findings of one job and the sampler that reproduces its stream (None when none does)."""
    found, streams = identify(cal, evidence)
    if not streams or any(ids and min(ids) < 0 for s in streams.values() for _, ids in s):
        return [], None
    if found and found[0].code is None:
        return [], found[0]
    first = _first_difference(cal, streams)
    codes = list(dict.fromkeys(s.code for s in found))
    code = codes[0] if codes else "order.shuffled"
    words = [s.words for s in found]
    repeated = None if found else _repeated_in_first_epoch(cal, streams)
    unidentified = [] if found or repeated else [UNIDENTIFIED_SHUFFLE]
    findings = [Finding(code=code, title="data order differs from evalkit's", job=job, first_step=first,
                        expected="evalkit's OrderedSampler", observed=words[0] if words else "an unidentified order",
                        size="sampler identified" if words else "no known sampler reproduces the order",
                        explained_by=words or unidentified, knob=ORDER_KNOB, declared=declared(code))]
    duplicates = _padded_samples(cal, found[0], streams) if found and found[0].pads else repeated
    if duplicates:
        findings.append(Finding(code="order.padded", title="samples repeated across ranks to pad the epoch",
                                job=job, first_step=duplicates[0], observed=duplicates[1],
                                size=f"sample(s) {duplicates[1]} seen twice in epoch 0",
                                explained_by=[found[0].words if found else "samples repeated within one epoch"],
                                knob=ORDER_KNOB, declared=declared("order.padded")))
    return findings, found[0] if found else None


def _first_difference(cal: Caliber, streams: dict[int, list[tuple[int, list[int]]]]) -> int | None:
    own = samplers(cal)[0]
    steps = []
    for rank, stream in streams.items():
        predicted = [b for e, _ in zip(micro_epochs(cal, own, rank), range(len(stream) + 1)) for b in e]
        steps += [step for (step, ids), exp in zip(stream, predicted) if ids != exp][:1]
    return min(steps) if steps else None


def _used(cal: Caliber, sampler: Sampler, n: int) -> int:
    """How many of an epoch's `n` sampled indices a rank trains on: whole batches only when the loader drops the
    last incomplete one."""
    return n // cal.batch_size * cal.batch_size if sampler.drop_last else n


def _padded_samples(cal: Caliber, sampler: Sampler, streams) -> tuple[int, list[int]] | None:
    per_rank = {r: _used(cal, sampler, len(sampler.epochs(0, r))) for r in streams}
    seen: dict[int, int] = {}
    for rank, stream in streams.items():
        count = 0
        for _step, ids in stream:
            for i in ids[: max(0, per_rank[rank] - count)]:
                seen.setdefault(i, 0)
                seen[i] += 1
            count += len(ids)
    twice = sorted(i for i, c in seen.items() if c > 1)
    return (1, twice) if twice else None


def _repeated_in_first_epoch(cal: Caliber, streams) -> tuple[int, list[int]] | None:
    """Samples seen twice among the ranks' first floor(n / W / batch) micro-batches (inside epoch 0 whatever the
    sampler, when it serves every sample once an epoch)."""
    per_rank = cal.n_train // cal.world_size // cal.batch_size * cal.batch_size
    seen: dict[int, int] = {}
    for stream in streams.values():
        for i in [i for _, ids in stream for i in ids][:per_rank]:
            seen[i] = seen.get(i, 0) + 1
    twice = sorted(i for i, c in seen.items() if c > 1)
    return (1, twice) if twice else None
