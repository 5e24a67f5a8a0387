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

    def weight_in(self, scenario: str) -> float:
        return float(self.weights.get(scenario, self.weight))
