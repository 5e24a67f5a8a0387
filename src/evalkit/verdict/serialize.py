"""The verdict as JSON-ready data (the `verdict.json` artifact)."""
from __future__ import annotations

from dataclasses import asdict

from evalkit.analysis.compare import Comparison
from evalkit.strict_json import finite_only
from evalkit.verdict import ranking
from evalkit.verdict.build import Row, Verdict, row_label
from evalkit.verdict.table import fail_reasons

SCHEMA = "evalkit.verdict/2"   # 2: comparisons carry scale, bounds, design, level, delta_low/high, nonfinite


SKIPPED = ("wrapper", "baseline", "noise_wrapper", "noise_baseline", "designs", "nonfinite")


def comparison_dict(c: Comparison) -> dict:
    data = {k: v for k, v in c.__dict__.items() if k not in SKIPPED}
    data.update(delta=c.delta, delta_low=c.delta_low, delta_high=c.delta_high, design_text=c.design_text(),
                candidates=c.candidates, noise_wrapper=c.noise_wrapper.as_dict(),
                noise_baseline=c.noise_baseline.as_dict(),
                nonfinite=[{"run_id": f.run.run_id, "seed": f.run.seed, "repeat": f.run.repeat, "step": f.step,
                            "where": f.where} for f in c.nonfinite])
    if c.scale == "relative":
        data.update(ratio=c.ratio, ratio_low=c.ratio_low, ratio_high=c.ratio_high)
    return data


def row_dict(row: Row) -> dict:
    return {
        "label": row_label(row.key),
        "arm": row.key._asdict(),
        "baseline": row.baseline._asdict() if row.baseline else None,
        "runs": {"jobs": row.n_jobs, "finished": row.n_finished},
        "dimensions": {d: r.as_dict() for d, r in row.dimensions.items()},
        "first_divergence_step": row.divergence_step,
        "comparisons": [comparison_dict(c) for c in row.comparisons],
    }


def verdict_dict(verdict: Verdict, inputs: dict | None = None) -> dict:
    options = asdict(verdict.options)
    return finite_only({
        "schema": SCHEMA,
        "inputs": inputs or {},
        "options": options,
        "rows": [row_dict(r) for r in verdict.rows],
        "ranking": {"scenario": verdict.options.scenario,
                    "standings": [s.as_dict() for s in verdict.standings],
                    "groups": [{"judged": list(g.judged), "ranked": [s.label for s in g.standings],
                                "beside": {label: [row_label(r.key) for r in rows]
                                           for label, rows in g.beside.items() if rows}}
                               for g in ranking.groups(verdict)]},
        "fail_reasons": fail_reasons(verdict),
        "warnings": list(verdict.warnings),
        "arms": [{"arm": k._asdict(), "runs": len(a.jobs), "finished": len(a.finished),
                  "seeds": a.seeds} for k, a in verdict.arms.items()],
    })
