"""What a probe's judge returns: findings with their evidence, and the pass/fail of its dimension.

A judge is a pure function from its jobs' stored records (`probes.evidence.JobEvidence`) to a `ProbeResult`.
The probe runner logs the result on the probe run: `probe/<dim>/pass`, each figure as `probe/<dim>/<name>`,
the reason tag, `probe/<dim>.json` (this module's `to_json`) and `probe/<dim>.md` (`to_markdown`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from evalkit.strict_json import finite_only

UNEXPLAINED = "unexplained"


@dataclass
class Finding:
    """One way the wrapper's training differed from the oracle's, first seen at `first_step`.

    `code` names the difference for machines (e.g. `lr.per_micro_batch`), `title` for people. `explained_by`
    lists every alternative semantics that reproduces the observation (named in plain words); empty means
    nothing explains it: the finding stays, marked unexplained. `knob` is the wrapper setting that aligns it,
    where one exists. `evidence` holds the series behind it (per step), for the report's plots."""

    code: str
    title: str
    job: str                              # the plan's name of the job it was seen in (e.g. "ws2-clip")
    first_step: int | None
    expected: Any = None
    observed: Any = None
    size: str = ""                        # how large, in words and numbers ("update 3.00x expected")
    explained_by: list[str] = field(default_factory=list)
    knob: str = ""
    declared: str = ""                    # what the adapter's own report says about it ("" when silent)
    evidence: dict[str, Any] = field(default_factory=dict)
    explainable: bool = True              # a difference alternative semantics may explain (semantics, consistency);
    #                                       False: a failed item (functional, stability), never "unexplained"

    @property
    def unexplained(self) -> bool:
        return not self.explained_by

    def line(self) -> str:
        """The finding in one line: what, where it first shows, how large, why, the knob."""
        where = f" from step {self.first_step}" if self.first_step is not None else ""
        parts = [f"{self.title}{where} [{self.job}]"]
        if self.size:
            parts.append(self.size)
        if self.explained_by:
            parts.append("explained by: " + "; ".join(self.explained_by))
        elif self.explainable:
            parts.append(UNEXPLAINED)
        if self.knob:
            parts.append(f"align with: {self.knob}")
        return " - ".join(parts)


@dataclass
class ProbeResult:
    """A judge's answer for one wrapper and mode."""

    dimension: str                        # semantics, functional, stability, ...
    passed: bool
    findings: list[Finding] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)   # logged as probe/<dim>/<name>
    notes: list[str] = field(default_factory=list)            # what was checked, what could not be
    series: dict[str, dict[str, list]] = field(default_factory=dict)   # job -> column -> values (plots)
    headline: str = ""                    # the verdict cell's figure ("" : the findings' count)
    inconclusive: bool = False            # the evidence could not decide (unstable timings, too few seeds)
    sections: list[str] = field(default_factory=list)          # markdown blocks for the report (tables)

    @property
    def status(self) -> str:
        """pass | fail | inconclusive."""
        return "inconclusive" if self.inconclusive else "pass" if self.passed else "fail"

    @property
    def reason(self) -> str:
        """One line for the verdict: the number of findings and the first one (empty when it passes; why it
        could not decide when inconclusive)."""
        if self.inconclusive:
            return self.notes[0] if self.notes else "inconclusive"
        if self.passed:
            return ""
        if not self.findings:
            return self.notes[0] if self.notes else "failed"
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return f"{len(self.findings)} finding(s); first: {self.findings[0].line()}{more}"

    def to_json(self) -> str:
        return json.dumps(finite_only(asdict(self)), indent=1, default=str)

    @classmethod
    def from_json(cls, text: str) -> "ProbeResult":
        data = json.loads(text)
        data["findings"] = [Finding(**f) for f in data.get("findings", [])]
        return cls(**data)

    def to_markdown(self, title: str) -> str:
        summary = self.headline or f"{len(self.findings)} finding(s)"
        lines = [f"# {title}", "", f"**{self.dimension}: {self.status}** ({summary})", ""]
        if self.findings:
            lines += ["| # | finding | first step | job | size | explained by | align with |",
                      "|---|---|---|---|---|---|---|"]
            for i, f in enumerate(self.findings, 1):
                why = markdown_cell('; '.join(f.explained_by) or UNEXPLAINED)
                lines.append(f"| {i} | {markdown_cell(f.title)} | {'' if f.first_step is None else f.first_step} | "
                             f"{f.job} | {markdown_cell(f.size)} | {why} | {markdown_cell(f.knob)} |")
            lines.append("")
        for section in self.sections:
            lines += [section.rstrip(), ""]
        if self.figures:
            lines += ["Figures: " + ", ".join(f"{k}={v:g}" for k, v in sorted(self.figures.items())), ""]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"


def markdown_cell(text: str) -> str:
    """`text` safe inside a markdown table cell (pipes escaped, one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ")
