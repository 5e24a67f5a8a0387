"""What changed between versions of one wrapper: arms of one trainer, mode and task that differ only by
the environment they ran in (`trainer.env`: the arm `name@env`), each set against a reference version,
dimension by dimension: the cell before and after and, where a probe names its findings by code (the semantic
probe), the codes that appear and those that are gone.

The reference of a trainer is the arm `--reference` names (`hf_trainer@transformers-4.45.2`, or `hf_trainer` for the
version installed beside evalkit); without one, the installed version's arm, else the first environment's by name.
Each version is still judged against the baseline in its own row: this only lines the versions up."""
from __future__ import annotations

from dataclasses import dataclass, field

from evalkit import names
from evalkit.analysis.arms import Arm, ArmKey
from evalkit.probes.catalog import dimension, dimension_names
from evalkit.verdict.build import Verdict
from evalkit.verdict.dimensions import INCONCLUSIVE, NOT_RUN


@dataclass(frozen=True)
class Change:
    """One dimension of one version against its reference: the cells, and the finding codes that came and went."""
    dimension: str
    before: str
    after: str
    appeared: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()      # the reference's codes an inconclusive cell did not judge: not gone


@dataclass
class VersionPair:
    reference: ArmKey
    other: ArmKey
    changes: list[Change] = field(default_factory=list)
    same: list[str] = field(default_factory=list)         # dimensions judged alike in both
    one_sided: list[str] = field(default_factory=list)    # judged in one version only: not compared

    @property
    def title(self) -> str:
        where = self.other.caliber if self.other.caliber == self.reference.caliber else \
            f"{self.reference.caliber} / {self.other.caliber}"
        return f"{self.other.trainer} against {self.reference.trainer} ({self.other.mode}, {self.other.task}, {where})"


def base_name(trainer: str) -> str:
    return trainer.partition(names.ENV_SEPARATOR)[0]


def check_references(references: list[str], arms: dict[ArmKey, Arm]) -> list[str]:
    """Each `--reference` that names no arm read, with the arms it could have named."""
    seen = sorted({k.trainer for k in arms})
    return [f"--reference {r}: no arm of that name among the runs read ({', '.join(seen) or 'none'})"
            for r in references if r not in seen]


def version_pairs(verdict: Verdict) -> list[VersionPair]:
    """Every version of a trainer set against its reference (`VerdictOptions.references`), in the verdict's row
    order."""
    references = verdict.options.references
    rows = {row.key: row for row in verdict.rows}
    groups: dict[tuple, list[ArmKey]] = {}
    for key in rows:
        groups.setdefault((base_name(key.trainer), key.mode, key.task), []).append(key)
    pairs = []
    for keys in groups.values():
        if len(keys) < 2:
            continue
        named = [k for k in keys if k.trainer in references]
        installed = [k for k in keys if names.ENV_SEPARATOR not in k.trainer]
        reference = (named or installed or sorted(keys, key=lambda k: k.trainer))[0]
        for other in keys:
            if other != reference:
                pairs.append(_pair(reference, other, rows, verdict.arms))
    return pairs


def _pair(reference: ArmKey, other: ArmKey, rows, arms: dict[ArmKey, Arm]) -> VersionPair:
    pair = VersionPair(reference, other)
    for dim in dimension_names():
        before, after = rows[reference].dimensions[dim], rows[other].dimensions[dim]
        if NOT_RUN in (before.status, after.status):
            if before.status != after.status:
                pair.one_sided.append(dim)
            continue
        gone, appeared, unjudged = (), (), ()
        if dimension(dim).differences:    # its findings carry a code (`probe/<dim>.json` findings[].code)
            old, new = finding_codes(arms.get(reference), dim), finding_codes(arms.get(other), dim)
            appeared, gone = tuple(sorted(new - old)), tuple(sorted(old - new))
            if after.status == INCONCLUSIVE:     # a cell that could not decide fixed nothing
                gone, unjudged = (), gone
        if before.status != after.status or appeared or gone or unjudged:
            pair.changes.append(Change(dim, before.cell(), after.cell(), appeared, gone, unjudged))
        else:
            pair.same.append(dim)
    return pair


def finding_codes(arm: Arm | None, dim: str) -> set[str]:
    """The codes of the findings the arm's probe runs of `dim` recorded."""
    if arm is None:
        return set()
    return {f.get("code", "") for run in arm.runs for f in (run.probe_results.get(dim) or {}).get("findings", [])
            if f.get("code")}


def pair_lines(pair: VersionPair) -> list[str]:
    """One line per changed dimension, then the dimensions judged alike."""
    lines = []
    for c in pair.changes:
        codes = "; ".join(part for part in (
            f"new: {', '.join(c.appeared)}" if c.appeared else "", f"gone: {', '.join(c.gone)}" if c.gone else "",
            f"not judged in the inconclusive cell: {', '.join(c.unjudged)}" if c.unjudged else "") if part)
        lines.append(f"{c.dimension}: {c.before} -> {c.after}" + (f" [{codes}]" if codes else ""))
    if pair.same:
        lines.append(f"unchanged: {', '.join(pair.same)}")
    if pair.one_sided:
        lines.append(f"judged in one version only: {', '.join(pair.one_sided)}")
    return lines or ["nothing judged in both"]


def versions_text(pairs: list[VersionPair]) -> str:
    if not pairs:
        return ""
    return "What changed between versions:\n" + "\n".join(
        f"  {p.title}\n" + "\n".join(f"    {line}" for line in pair_lines(p)) for p in pairs)
