"""What the verdict needs of a probe's dimension, declared by the probe (`DIMENSION` in its settings module, beside
its `PRESETS`) and read through the catalog by every part of the verdict: the table's columns, the first screen, the
report's sections, the findings documents, the scenario weights and the ranking. A probe is then one package and
one YAML: nothing in the verdict names it (docs/probes/adding.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Dimension:
    question: str                # what it asks of a wrapper, in a line (docs/probes/README.md's index)
    column: int                  # its place in the verdict's table, left to right (and in every listing of them)
    asks: int                    # its place in the first screen's paragraph: the order a team with its own loop asks
    says: str                    # the first screen's words for it ("Under torch.compile"): "<says>: <headline>."
    cap: int = 120               # characters its sentence on the first screen may take
    report_title: str = ""       # its section of the report, one per probe run ("": the verdict writes its own)
    weight: float = 1.0          # its weight in a scenario that does not name it
    weights: Mapping[str, float] = field(default_factory=dict)     # scenario -> its weight there
    name: str = ""               # the probe's name (its YAML's), set by the catalog
    # The verdict's own phrasing of it on the first screen (a key of verdict/plain.py's WORDS); "": its `says`
    # and headline (`declared`), which is what a probe added by the recipe gets.
    words: str = ""
    # Which of the training sweep's own judgments fills its column when no probe of it ran (said "sweep, no probe"):
    # "runs" (every job ran to its end with a finite loss), "equivalence" (final metrics within the margin),
    # "budgets" (throughput and peak memory within their budgets); "": none (not run).
    sweep: str = ""
    # Its findings are differences from your loop, each with a code and the setting that aligns it: the first screen
    # lists them, versions are compared code by code, the findings document has a table of them per mode and the
    # report plots their per-step series.
    differences: bool = False

    def weight_in(self, scenario: str) -> float:
        return float(self.weights.get(scenario, self.weight))
