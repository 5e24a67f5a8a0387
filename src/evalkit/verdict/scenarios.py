"""Scenario weights and the overall ranking they give, shown beside the per-dimension table.

Weights come from config: the built-in defaults below, then `evalkit/conf/verdict/scenarios.yaml`
when the package ships one, then a user file (`--scenarios-file`, YAML or JSON) mapping
scenario name -> {dimension: weight}. A dimension that is not run is left out of the score; the
coverage says which share of the scenario's weight was actually measured.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evalkit.probes.catalog import dimension_names, dimensions
from evalkit.verdict.dimensions import FAIL, INCONCLUSIVE, NOT_RUN, PASS

# Research prototypes change training logic all the time: customisation cost weighs most. Long-running platforms
# live with the wrapper for years: maintenance and stability weigh most. Each probe declares its weight in each
# (`Dimension.weights`; `balanced` gives every dimension its `weight`, 1).
SCENARIO_NAMES = ("balanced", "research", "platform")


def default_scenarios() -> dict[str, dict[str, float]]:
    """scenario -> {dimension: weight}, as the probes declare them."""
    return {name: {d.name: d.weight_in(name) for d in dimensions()} for name in SCENARIO_NAMES}


STATUS_SCORE = {PASS: 1.0, INCONCLUSIVE: 0.5, FAIL: 0.0}
PACKAGE_FILE = Path(__file__).resolve().parent.parent / "conf" / "verdict" / "scenarios.yaml"


class ScenarioError(ValueError):
    pass


def load_scenarios(path: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Defaults, overridden by the packaged config file and then by `path` (scenario by scenario)."""
    scenarios = default_scenarios()
    for source in (PACKAGE_FILE if PACKAGE_FILE.is_file() else None, path):
        if source is not None:
            scenarios.update(_read(Path(source)))
    return scenarios


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"cannot read scenarios file {path}: {exc}") from exc
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping scenario -> {{dimension: weight}}")
    return {str(name): _weights(name, weights, path) for name, weights in data.items()}


def _weights(name, weights, path) -> dict[str, float]:
    if not isinstance(weights, dict):
        raise ScenarioError(f"{path}: scenario {name!r} must map dimensions to weights")
    unknown = set(weights) - set(dimension_names())
    if unknown:
        raise ScenarioError(f"{path}: scenario {name!r} names unknown dimensions {sorted(unknown)}")
    out = {d: float(weights.get(d, 0.0)) for d in dimension_names()}
    if any(w < 0 for w in out.values()) or not any(out.values()):
        raise ScenarioError(f"{path}: scenario {name!r} needs non-negative weights, not all zero")
    return out


@dataclass(frozen=True)
class Standing:
    label: str
    score: float       # weighted mean of pass=1, inconclusive=0.5, fail=0 over dimensions run
    coverage: float    # share of the scenario's weight carried by dimensions that were run
    fails: tuple[str, ...]
    judged: tuple[str, ...] = ()   # the weighted dimensions the score is over (only arms alike are ranked together)

    def as_dict(self) -> dict:
        return {"label": self.label, "score": self.score, "coverage": self.coverage, "fails": list(self.fails),
                "judged": list(self.judged)}


def standing(label: str, statuses: dict[str, str], weights: dict[str, float]) -> Standing:
    run = {d: s for d, s in statuses.items() if s != NOT_RUN and weights.get(d, 0) > 0}
    total = sum(weights.values())
    measured = sum(weights[d] for d in run)
    score = sum(weights[d] * STATUS_SCORE.get(s, 0.5) for d, s in run.items()) / measured if measured else 0.0
    fails = tuple(d for d, s in statuses.items() if s == FAIL)
    return Standing(label, score, measured / total if total else 0.0, fails,
                    tuple(d for d in dimension_names() if d in run))


def rank(entries: dict[str, dict[str, str]], weights: dict[str, float]) -> list[Standing]:
    """Standings of `label -> {dimension: status}`, best first (score, then coverage)."""
    standings = [standing(label, statuses, weights) for label, statuses in entries.items()]
    return sorted(standings, key=lambda s: (-s.score, -s.coverage, s.label))
