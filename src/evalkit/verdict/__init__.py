"""The verdict: a table of one dimension per probe per wrapper arm, a scenario ranking beside it, and a report
(markdown, self-contained HTML, JSON) logged as an `evalkit.role=verdict` MLflow run.

`build_verdict(records, options)` is a pure function over run records (see `evalkit.analysis`);
`evalkit.verdict.cli.main` reads the records from MLflow and publishes the result.
"""
from evalkit.probes.catalog import dimension_names
from evalkit.verdict.build import Row, Verdict, VerdictOptions, build_verdict
from evalkit.verdict.dimensions import FAIL, INCONCLUSIVE, NOT_RUN, PASS, DimensionResult
from evalkit.verdict.scenarios import default_scenarios, load_scenarios, rank

__all__ = ["default_scenarios", "dimension_names", "DimensionResult", "FAIL", "INCONCLUSIVE", "NOT_RUN", "PASS",
           "Row", "Verdict", "VerdictOptions", "build_verdict", "load_scenarios", "rank"]
