"""Calibration of the performance probe's judge-side thresholds (issue 44) where they are applied: the 5 % time budget
(`blocks.decide` on `blocks.estimate`'s fraction) with the sequential looks of the quick preset, and the memory
budget with MEMORY_NOISE_MIB (`judge._memory`). No process runs.

Time. The noise is the recorded one: rounds of tests/fixtures/performance/identical.json.gz (an identical copy against
the baseline, 64 rounds, measured by a real `probe=performance` run), at the quick preset's two depths (2 and 32;
a round's log ratio spreads 15 % at d2 and 9.5 % at d32 there, lag-1 autocorrelation <= 0.04). A simulated run
draws its rounds from those, in runs of 4 consecutive rounds (a moving-block bootstrap, keeping what drift there is),
and the wrapper's blocks carry a known added cost of c x its step (the fraction the budget is judged on is then c).
The quick preset stops at the first look (32 rounds) that decides, else at its 12 s time limit: 50 rounds at the
recorded round length (0.238 s; switching between processes only makes that fewer). Every look is at the decision
level of max_rounds 512 (1 - 0.05/6), as the judge reads it.

Measured (200 simulated runs per cost, rng seed 31), over both looks, on the recording of the parked jobs (0.203 s a
round, 59 rounds at the limit), the intervals holding blocks.PROCESS_SD (before it: identical within 69 % and 10 %
outside 70 % on the first recording, 86.5 % on this one):
  added   within   outside   undecided
   0 %    60.5 %     0 %      39.5 %     false alarm 0 %; an identical copy passes 6 times in 10 (32 % at the first
   3 %     7 %       0 %       93 %          look alone)
   5 %     0 %       0 %      100 %      on the budget: undecided
   7 %     0 %      10 %       90 %
  10 %     0 %      84 %       16 %      power 84 % (54.5 % at the first look alone)
The budget is placed right (0 % and 10 % are both decided more often than not, never on the wrong side), but the
quick preset's 12 s leave 40 % of the 0 % cases and 16 % of the 10 % ones undecided (inconclusive, with the rounds
that would decide); the thorough preset's 60 s (about 200 rounds at three depths) decide both all but always
(measured 200/200 within at 0 %, 199/200 outside at 10 %, while writing this test, before PROCESS_SD; not repeated
here for its time).

Memory. At the largest depth the wrapper's training memory is within when it adds less than memory_budget x the
baseline's minus MEMORY_NOISE_MIB, outside when more than plus it. Noise between two runs of one program: the
recorded pairs differ by 0.0 to 2.0 MiB (identical/slow fixtures), issue 31 measured up to 2.2 MiB over 120 pairs;
modelled here as normal with sd 0.8 MiB (its maximum over 120 pairs is then about 2.2 MiB). At the quick preset's
d32 baseline (42 MiB, recorded), 2000 draws: an identical copy is within 98.8 % (never outside), a wrapper adding
20 % is outside 98.5 % (never within), one adding exactly the budget (10 %) is undecided 99.8 %. The undecided band
is wide there: +-2.5 MiB is +-6 % of a 42 MiB baseline, so only below +4 % is within and only above +16 % outside.
"""
from __future__ import annotations

import numpy as np
import pytest
from probe_runs import recording

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.performance import judge as perf
from evalkit.probes.performance.arms import MEMORY_NOISE_MIB, ArmJob
from evalkit.probes.performance.blocks import FIRST_LOOK, Size, decide, decision_level, estimate, looks
from evalkit.probes.performance.settings import PRESETS

BUDGET = perf.DEFAULTS["budget"]
LEVEL = decision_level(perf.DEFAULTS["max_rounds"])
QUICK_DEPTHS = (2, 32)
QUICK_LIMIT_S = 12.0
RUNS = 200
CALLS = ("within", "outside", "undecided")


def test_the_simulation_runs_the_quick_presets_looks():
    assert "probe.performance.depths=[2,32]" in PRESETS["quick"].settings
    assert f"probe.performance.time_limit_s={QUICK_LIMIT_S:g}" in PRESETS["quick"].settings
    assert BUDGET == 0.05 and perf.DEFAULTS["memory_budget"] == 0.10
    assert looks(512)[0] == FIRST_LOOK == 32 and LEVEL == pytest.approx(1 - 0.05 / 6)


class Recorded:
    """The identical copy's recorded rounds at the quick preset's depths."""

    def __init__(self):
        jobs, _ = recording("performance", "identical")
        turns = {j.name: j.summary["turns"] for j in jobs}
        self.steps = {d: int(turns[f"d{d}-baseline"]["steps_per_block"]) for d in QUICK_DEPTHS}
        self.base = {d: np.array(turns[f"d{d}-baseline"]["blocks_s"]) for d in QUICK_DEPTHS}
        self.wrap = {d: np.array(turns[f"d{d}-wrapper"]["blocks_s"]) for d in QUICK_DEPTHS}
        self.rounds = len(self.base[QUICK_DEPTHS[0]])
        round_s = sum(self.base[d].mean() + self.wrap[d].mean() for d in QUICK_DEPTHS)
        self.limit_rounds = int(QUICK_LIMIT_S / round_s)

    def run(self, rng, added: float, block: int = 4, rounds: int | None = None) -> list[Size]:
        rounds = rounds or self.limit_rounds
        starts = rng.integers(0, self.rounds - block + 1, rounds // block + 1)
        idx = np.concatenate([np.arange(s, s + block) for s in starts])[:rounds]
        return [Size(d, self.steps[d], self.base[d][idx], self.wrap[d][idx] * (1 + added)) for d in QUICK_DEPTHS]


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    return Recorded()


def sequential(sizes: list[Size], stops: list[int]) -> tuple[str, str]:
    """(the first look's call, the run's call): stop at the first look that decides."""
    calls = []
    for n in stops:
        calls.append(decide(estimate([Size(s.depth, s.steps, s.baseline_s[:n], s.wrapper_s[:n]) for s in sizes],
                                     LEVEL).fraction, BUDGET))
        if calls[-1] != "undecided":
            break
    return calls[0], calls[-1]


@pytest.fixture(scope="module")
def measured(recorded) -> dict[float, tuple[dict, dict]]:
    """added cost -> (rates at the first look, rates over the run)."""
    stops = [n for n in looks(perf.DEFAULTS["max_rounds"]) if n < recorded.limit_rounds] + [recorded.limit_rounds]
    out = {}
    for added in (0.0, 0.03, 0.05, 0.07, 0.10):
        rng = np.random.default_rng(31)
        runs = [sequential(recorded.run(rng, added), stops) for _ in range(RUNS)]
        out[added] = tuple({c: sum(r[i] == c for r in runs) / RUNS for c in CALLS} for i in (0, 1))
    return out


def test_the_quick_preset_looks_at_32_rounds_then_at_its_time_limit(recorded):
    assert 40 <= recorded.limit_rounds <= 70    # 12 s over a recorded round (0.238 s: 50; 0.203 s: 59)


def test_an_identical_copy_is_never_outside_and_mostly_within(measured):
    first, run = measured[0.0]
    assert run["outside"] == 0 and first["outside"] == 0, measured[0.0]       # false alarm: 0 of 200 (<= 5 %)
    assert 0.5 <= run["within"] <= 0.92, run                                   # 60.5 %; the rest undecided
    assert first["within"] < run["within"]                                     # the second look adds passes


def test_a_copy_ten_percent_slower_is_never_within_and_mostly_outside(measured):
    first, run = measured[0.10]
    assert run["within"] == 0, run
    assert 0.58 <= run["outside"] <= 0.92, run                                 # power 84 % (54.5 % at 32 rounds)
    assert 0.28 <= first["outside"] <= 0.70, first


def test_a_copy_on_the_budget_is_undecided_most_of_the_time(measured):
    run = measured[0.05][1]
    assert run["undecided"] >= 0.93 and run["within"] <= 0.04 and run["outside"] <= 0.04, run   # 100 %, 0 %, 0 %


def test_the_calls_move_monotonically_with_the_added_cost(measured):
    """3 %: within 7 %, never outside; 7 %: outside 10 %, never within."""
    within = [measured[c][1]["within"] for c in sorted(measured)]
    outside = [measured[c][1]["outside"] for c in sorted(measured)]
    assert within == sorted(within, reverse=True) and outside == sorted(outside), (within, outside)
    assert measured[0.03][1]["outside"] == 0 and measured[0.07][1]["within"] == 0


# ------------------------------------------------------------------ memory
BASE_MIB = 42.4                   # the recorded baseline's training memory at d32 (identical.json.gz)
MEMORY_SD_MIB = 0.8               # two runs of one program (see the module docstring)


def memory_job(arm: str, mib: float) -> ArmJob:
    return ArmJob.of(JobEvidence(f"d32-{arm}", f"run-{arm}", "FINISHED", {}, {},
                                 summary={"peak_mem_bytes": mib * 2**20}))


def memory_calls(added: float, runs: int = 2000) -> dict[str, float]:
    rng = np.random.default_rng(32)
    counts = dict.fromkeys(CALLS, 0)
    for noise in rng.normal(0.0, MEMORY_SD_MIB, runs):
        wrapper = BASE_MIB * (1 + added) + noise
        counts[perf._memory([memory_job("baseline", BASE_MIB), memory_job("wrapper", wrapper)],
                            perf.DEFAULTS["memory_budget"]).call] += 1
    return {c: n / runs for c, n in counts.items()}


def test_the_memory_noise_model_spans_the_measured_differences():
    rng = np.random.default_rng(33)
    widest = np.abs(rng.normal(0.0, MEMORY_SD_MIB, (200, 120))).max(axis=1)
    assert 1.8 <= np.median(widest) <= 2.6 and np.median(widest) < MEMORY_NOISE_MIB   # issue 31: 2.2 (here 2.19)


def test_an_identical_copys_memory_is_never_outside_and_mostly_within():
    calls = memory_calls(0.0)
    assert calls["outside"] == 0 and calls["within"] >= 0.95, calls            # 98.8 % within


def test_a_wrapper_adding_twice_the_memory_budget_is_never_within_and_mostly_outside():
    calls = memory_calls(0.20)
    assert calls["within"] == 0 and calls["outside"] >= 0.95, calls            # 98.5 % outside


def test_a_wrapper_adding_exactly_the_memory_budget_is_undecided():
    calls = memory_calls(0.10)
    assert calls["undecided"] >= 0.99, calls                                   # 99.8 %


def memory_call(added_mib: float) -> str:
    return perf._memory([memory_job("baseline", BASE_MIB), memory_job("wrapper", BASE_MIB + added_mib)], 0.10).call


def test_the_memory_lines_sit_the_noise_away_from_the_budget():
    allowed = perf.DEFAULTS["memory_budget"] * BASE_MIB
    assert memory_call(allowed - MEMORY_NOISE_MIB - 0.01) == "within"
    assert memory_call(allowed - MEMORY_NOISE_MIB + 0.01) == "undecided"
    assert memory_call(allowed + MEMORY_NOISE_MIB - 0.01) == "undecided"
    assert memory_call(allowed + MEMORY_NOISE_MIB + 0.01) == "outside"


# ------------------------------------------------------------------ between processes
BETWEEN_SD = 0.0044     # the largest spread between runs measured beyond their intervals (blocks.PROCESS_SD's comment)


def between_runs(recorded: Recorded, added: float, between: float, runs: int = RUNS,
                 rounds: int | None = None) -> list[tuple[Size, ...]]:
    """Runs (at the quick preset's time limit, or `rounds` rounds), each a new pair of processes per depth: the
    wrapper's blocks off by its own N(0, between) besides the known added cost (the recording holds one pair, so its
    rounds alone cannot show this)."""
    rng = np.random.default_rng(34)
    out = []
    for _ in range(runs):
        sizes = recorded.run(rng, added, rounds=rounds)
        out.append(tuple(Size(s.depth, s.steps, s.baseline_s, s.wrapper_s * (1 + rng.normal(0.0, between)))
                         for s in sizes))
    return out


def coverage(recorded: Recorded, runs: list[tuple[Size, ...]], added: float, rounds: int) -> float:
    """The share of the runs' fractions (at `rounds` rounds) whose interval holds the truth: the recording's own
    fraction with the added cost, which every run's processes scatter around."""
    whole = [Size(d, recorded.steps[d], recorded.base[d], recorded.wrap[d] * (1 + added)) for d in QUICK_DEPTHS]
    truth = estimate(whole, LEVEL).fraction.estimate
    hits = [(f := estimate([Size(s.depth, s.steps, s.baseline_s[:rounds], s.wrapper_s[:rounds])
                            for s in sizes], LEVEL).fraction).low <= truth <= f.high for sizes in runs]
    return float(np.mean(hits))


def test_the_process_floor_keeps_the_intervals_coverage_between_processes(recorded, monkeypatch):
    """Runs scattered between processes as much as measured, at max_rounds (512, where the batch means are narrow):
    the 99.2 % intervals of the batch means alone hold the truth in 90.5 % of runs, with PROCESS_SD in 99.5 %. At the
    quick preset's 32 rounds the recording's own spread (a half depth of 5 %) swamps it: 98 % and 98.5 %."""
    from evalkit.probes.performance import blocks

    runs = between_runs(recorded, 0.03, BETWEEN_SD, rounds=512)
    with_floor = coverage(recorded, runs, 0.03, 512)
    monkeypatch.setattr(blocks, "PROCESS_SD", 0.0)
    without = coverage(recorded, runs, 0.03, 512)
    assert BETWEEN_SD <= 0.005
    assert with_floor >= 0.98, with_floor
    assert without <= 0.95, without


def test_between_processes_an_identical_copy_never_fails_and_a_ten_percent_slower_one_never_passes(recorded):
    stops = [n for n in looks(perf.DEFAULTS["max_rounds"]) if n < recorded.limit_rounds] + [recorded.limit_rounds]
    same = [sequential(list(sizes), stops)[1] for sizes in between_runs(recorded, 0.0, BETWEEN_SD)]
    slower = [sequential(list(sizes), stops)[1] for sizes in between_runs(recorded, 0.10, BETWEEN_SD)]
    assert "outside" not in same and same.count("within") >= 0.5 * RUNS, same.count("within")
    assert "within" not in slower and slower.count("outside") >= 0.5 * RUNS, slower.count("outside")
