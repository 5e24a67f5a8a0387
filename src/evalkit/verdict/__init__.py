"""The verdict: a seven-dimension table per wrapper arm, a scenario ranking beside it, and a report
(markdown, self-contained HTML, JSON) logged as an `evalkit.role=verdict` MLflow run.

`build_verdict(records, options)` is a pure function over run records (see `evalkit.analysis`);
`evalkit.verdict.cli.main` reads the records from MLflow and publishes the result.
"""
from evalkit.verdict.build import Row, Verdict, VerdictOptions, build_verdict
from evalkit.verdict.dimensions import DIMENSIONS, FAIL, INCONCLUSIVE, NOT_RUN, PASS, DimensionResult
from evalkit.verdict.scenarios import DEFAULT_SCENARIOS, load_scenarios, rank

__all__ = ["DEFAULT_SCENARIOS", "DIMENSIONS", "DimensionResult", "FAIL", "INCONCLUSIVE", "NOT_RUN", "PASS",
           "Row", "Verdict", "VerdictOptions", "build_verdict", "load_scenarios", "rank"]
