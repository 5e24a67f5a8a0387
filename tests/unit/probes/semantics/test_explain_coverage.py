"""Windows, padding and batch sizes judged from what each step saw when the order is the wrapper's own (issue 29):
`explain_coverage` on streams with known truth, and the judge on the recorded baseline relabeled so that no known
sampler reproduces its order; and the window layout of Fabric's accumulation page (`iteration % N != 0`)."""
from __future__ import annotations

import numpy as np
from semantic_plants import codes, regroup, replant_updates, set_stream

from evalkit.probes.semantics.explain_coverage import check_coverage, check_partial_batches, epochs_of
from evalkit.probes.semantics.explain_update import Model, predict
from evalkit.probes.semantics.judge import judge
from evalkit.probes.semantics.oracle import Caliber

N = 41


def _cal(world_size: int = 1) -> Caliber:
    return Caliber(0.05, "linear", 3, 10, 0.0, 4, 3, None, 4, world_size, 0, N, 0.0, 0.0, "fp32")


def _shuffled_epochs(count: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.permutation(N).tolist() for _ in range(count)]


def _cut(ids: list[int], size: int, drop_last: bool) -> list[list[int]]:
    out = [ids[i:i + size] for i in range(0, len(ids), size)]
    return [b for b in out if len(b) == size] if drop_last else out


def _stream(batches: list[list[int]], windows: list[int]) -> list[tuple[int, list[int]]]:
    """Micro-batches numbered into steps by the window sizes given."""
    out, k = [], 0
    for step, size in enumerate(windows, 1):
        out += [(step, b) for b in batches[k:k + size]]
        k += size
    return out


def nothing(code: str) -> str:
    return ""


def test_shuffled_epochs_with_per_epoch_windows_raise_nothing():
    batches, windows = [], []
    for epoch in _shuffled_epochs(3):
        cut = _cut(epoch, 4, drop_last=True)      # 10 micro-batches: windows 3, 3, 3, 1
        batches += cut
        windows += [3, 3, 3, 1]
    assert check_coverage("j", _cal(), {0: _stream(batches, windows)}, nothing) == []
    # the sample a dropped last batch never served opens the next epoch: not padding at world size 1
    assert epochs_of([(1, b) for b in batches], N, may_pad=False)[1] == []


def test_windows_counted_across_epochs_and_kept_incomplete_batches_are_named():
    batches = [b for epoch in _shuffled_epochs(3) for b in _cut(epoch, 4, drop_last=False)]   # 11 per epoch
    streams = {0: _stream(batches, [3] * 11)}
    found = {f.code: f for f in check_coverage("j", _cal(), streams, nothing)
             + check_partial_batches("j", _cal(), streams, nothing)}
    assert set(found) == {"window.spans_epochs", "batch.partial"}
    assert found["window.spans_epochs"].first_step == 4       # micro-batches 10-12: the first epoch's last two
    assert found["batch.partial"].first_step == 4 and found["batch.partial"].observed == "1 sample(s)"


def test_a_last_batch_padded_across_two_ranks_is_named():
    streams = {0: [], 1: []}
    for epoch in _shuffled_epochs(2):
        padded = epoch + epoch[:7]                # 48 = 6 global batches of 8: 7 samples repeated
        for j in range(6):
            step = len(streams[0]) // 3 + 1           # windows of 3 micro-batches
            for r in (0, 1):
                streams[r].append((step, padded[8 * j + 4 * r: 8 * j + 4 * r + 4]))
    found = {f.code: f for f in check_coverage("j", _cal(2), streams, nothing)}
    assert set(found) == {"order.padded"}, sorted(found)
    assert len(found["order.padded"].observed) == 7


def _relabeled(job, seed: int = 5) -> None:
    """Every sample id mapped through one permutation: the same structure, an order no known sampler produces."""
    mapping = np.random.default_rng(seed).permutation(Caliber.of(job.config).n_train).tolist()
    for rows in job.micro.values():
        for m in rows:
            m["ids"] = [mapping[i] for i in m["ids"]]


def test_windows_across_epochs_under_the_wrappers_own_order(jobs):
    job = jobs["ws1-noclip"]
    _relabeled(job)
    regroup(job, [3] * 8 + [1, 1])       # 26 micro-batches in windows of 3 across epoch ends
    replant_updates(job)
    result = judge([job])
    assert "window.spans_epochs" in codes(result) and "order.shuffled" in codes(result), codes(result)
    assert not [c for c in codes(result) if c.startswith("unexplained")]
    assert any("judged from what each step saw" in n for n in result.notes)


def test_fabric_pages_accumulation_first_window_of_one_is_named(jobs):
    job = jobs["ws1-noclip"]
    regroup(job, [1, 3, 3, 3] * 3)   # steps at each epoch's iterations 0, 3, 6, 9
    replant_updates(job)
    result = judge([job])
    assert codes(result) == ["window.first_single"], codes(result)
    assert result.findings[0].first_step == 1


def test_ranks_that_trained_on_the_same_samples_unsynchronized_are_named(jobs):
    """Accelerate's quick start under a CPU launch that stays undistributed (issue 29): every rank trains on all the
    data in the same order, and each steps on its own gradient."""
    job = jobs["ws2-noclip"]
    groups = {k: {0: [], 1: []} for k in range(1, len(job.steps) + 1)}
    for m in sorted(job.micro[0], key=lambda m: (m["step"], m["i"])):
        groups[m["step"]][0].append(m["ids"])
        groups[m["step"]][1].append(m["ids"])          # rank 1 saw rank 0's samples
    set_stream(job, groups)
    # rank 1's micro-batches are rank 0's: the local gradient is rank 0's alone, like the mean of two equal ones
    replant_updates(job, lambda s: predict(s, Model(reduce="local"), 3))
    found = codes(judge([job]))
    assert "ddp.not_sharded" in found, found


def test_an_unsynchronized_rank_is_named_from_its_updates(jobs):
    job = jobs["ws2-noclip"]
    replant_updates(job, lambda s: predict(s, Model(reduce="local"), 3))
    result = judge([job])
    assert codes(result) == ["ddp.unsynchronized"], codes(result)
    assert "own gradient" in result.findings[0].title
