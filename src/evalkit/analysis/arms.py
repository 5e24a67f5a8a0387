"""Arms: all runs of one adapter and mode at one caliber and task, over seeds and repeats."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from evalkit import names
from evalkit.analysis.records import RunRecord

BASELINE = "baseline"


class ArmKey(NamedTuple):
    task: str
    caliber: str
    trainer: str
    mode: str

    @property
    def label(self) -> str:
        return f"{self.trainer}/{self.mode}"

    @property
    def is_baseline(self) -> bool:
        return self.trainer == BASELINE


@dataclass
class Arm:
    key: ArmKey
    runs: list[RunRecord] = field(default_factory=list)

    @property
    def jobs(self) -> list[RunRecord]:
        return [r for r in self.runs if r.role == names.ROLE_JOB]

    @property
    def finished(self) -> list[RunRecord]:
        return [r for r in self.jobs if r.finished]

    @property
    def broken(self) -> list[RunRecord]:
        return [r for r in self.jobs if r.broken]

    @property
    def unfinished(self) -> list[RunRecord]:
        return [r for r in self.jobs if not r.finished and not r.broken]

    @property
    def seeds(self) -> list[int]:
        return sorted({r.seed for r in self.finished if r.seed is not None})

    def first(self) -> RunRecord | None:
        return (self.finished or self.jobs or self.runs or [None])[0]

    def samples(self, metric: str) -> "Samples":
        """Finite final values of `metric` over finished job runs, with their seed and repeat (a run whose
        value is NaN or inf is left out here; `finite.nonfinite_runs` names it)."""
        rows = [
            (r.seed if r.seed is not None else -1 - i, r.repeat, r.metrics[metric])
            for i, r in enumerate(self.finished)
            if metric in r.metrics and np.isfinite(r.metrics[metric])
        ]
        seeds, repeats, values = zip(*rows) if rows else ((), (), ())
        return Samples(np.array(seeds, int), np.array(repeats, int), np.array(values, float))


def shared_seeds(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seeds, index in a, index in b) of the seeds both sorted id arrays hold. Negative ids stand for
    runs without a seed tag: they are never shared, whatever their position."""
    shared, ia, ib = np.intersect1d(a, b, return_indices=True)
    keep = shared >= 0
    return shared[keep], ia[keep], ib[keep]


@dataclass(frozen=True)
class Samples:
    """Per-run values of one metric in one arm; a run without a seed tag gets a unique negative id,
    which `shared_seeds` never pairs (seeds themselves are >= 0: the config refuses negative ones)."""

    seeds: np.ndarray
    repeats: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def per_seed(self, transform=np.log) -> tuple[np.ndarray, np.ndarray]:
        """(sorted unique seeds, mean of transform(value) over each seed's repeats)."""
        seeds, inverse = np.unique(self.seeds, return_inverse=True)
        sums = np.bincount(inverse, weights=transform(self.values), minlength=len(seeds))
        return seeds, sums / np.bincount(inverse, minlength=len(seeds))


PROBES_ONLY = "probes only"   # the caliber of an arm seen through probe runs alone


def group_arms(records: list[RunRecord]) -> dict[ArmKey, Arm]:
    """Job runs grouped by task, caliber, trainer and mode. A probe run judges the wrapper in its mode at the
    probe's own caliber: it joins every arm of that trainer and mode (a probe run on a team's task, only the arms of
    that task: `_judges`); where the store holds no job of them, the probe runs of that trainer, mode and task form
    one arm together (caliber `PROBES_ONLY`), one row whatever the probes' calibers."""
    arms: dict[ArmKey, Arm] = {}
    probes = [r for r in records if r.role == names.ROLE_PROBE]
    for record in records:
        if record.role != names.ROLE_PROBE:
            key = ArmKey(record.task, record.caliber, record.trainer, record.mode)
            arms.setdefault(key, Arm(key)).runs.append(record)
    for probe in probes:
        joined = [arm for key, arm in arms.items() if (key.trainer, key.mode) == (probe.trainer, probe.mode)
                  and any(r.role == names.ROLE_JOB for r in arm.runs) and _judges(probe, key)]
        if not joined:
            own = ArmKey(probe.task, PROBES_ONLY, probe.trainer, probe.mode)
            joined = [arms.setdefault(own, Arm(own))]
        for arm in joined:
            arm.runs.append(probe)
    return dict(sorted(arms.items()))


def _judges(probe: RunRecord, key: ArmKey) -> bool:
    """A probe run at its own caliber judges the wrapper whatever task its arms train; one that trained a team's
    task (`names.YOUR_TASK`, probes.your_task) judges that task's arms only."""
    return probe.tag(names.YOUR_TASK) != "true" or probe.task == key.task


def baseline_for(key: ArmKey, arms: dict[ArmKey, Arm]) -> Arm | None:
    """The baseline arm of the same task and caliber: same mode first, then `aligned`, then any."""
    candidates = [a for k, a in arms.items()
                  if k.is_baseline and (k.task, k.caliber) == (key.task, key.caliber) and a.finished]
    for preferred in (key.mode, "aligned"):
        for arm in candidates:
            if arm.key.mode == preferred:
                return arm
    return candidates[0] if candidates else None


def wrapper_arms(arms: dict[ArmKey, Arm]) -> list[Arm]:
    return [a for k, a in arms.items() if not k.is_baseline]
