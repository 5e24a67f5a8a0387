"""The overall ranking (issue 32): only arms judged on the same dimensions are ranked against each other, and a
wrapper's documented quick start (defaults mode) stands beside its aligned row instead of being ranked last as an arm
of its own; on the recorded evaluation of five wrappers in both modes."""
from __future__ import annotations

from evalkit.probes.catalog import dimension_names
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.plain import and_list
from evalkit.verdict.publish import render_report
from evalkit.verdict.ranking import NOTE, groups
from evalkit.verdict.serialize import verdict_dict
from evalkit.verdict.table import ranking_table

ALIGNED = {"accelerate", "fabric", "hf_trainer", "ignite", "lightning"}


def ranked(group) -> list[str]:
    return [group.names[s.label] for s in group.standings]


def title(judged: set[str]) -> str:
    """The group's title for arms judged on `judged`, against every probe in the catalog (one added after the
    evaluation was recorded is not judged in it)."""
    on = [d for d in dimension_names() if d in judged]
    off = [d for d in dimension_names() if d not in judged]
    return f"Judged on {and_list(on)} only (not on {and_list(off)})" if off else f"Judged on all {len(on)} dimensions"


def test_defaults_arms_stand_beside_their_aligned_row_not_last_in_the_ranking(recorded_records, evaluation):
    verdict = build_verdict(recorded_records(), VerdictOptions())
    (everything,) = groups(verdict)                         # the five aligned arms, judged on all it recorded
    assert everything.title == title({p["probe"] for p in evaluation["probes"]})
    assert sorted(ranked(everything)) == sorted(f"{t}/aligned" for t in ALIGNED)
    for standing in everything.standings:
        (beside,) = everything.beside[standing.label]
        assert beside.key.mode == "defaults" and beside.key.trainer == standing.label.split("/")[0]
    text = ranking_table(verdict)
    one = f"{100 / len(dimension_names()):.0f}%"            # a defaults arm's coverage: its semantics alone
    assert "/defaults" not in text and "0.00" not in text and one not in text
    accelerate = next(line for line in text.splitlines() if "accelerate/aligned" in line)
    assert "semantics fail (8 findings: validation forwards in train mode" in accelerate
    page = render_report(verdict, {}, with_plots=False).html
    assert "<th>documented quick start</th>" in page


def test_arms_judged_on_other_dimensions_are_ranked_apart_and_the_report_says_why(recorded_records, evaluation):
    drop = {(probe, trainer, "aligned") for probe in ("stability", "maintenance") for trainer in ("ignite", "fabric")}
    verdict = build_verdict(recorded_records(drop=drop), VerdictOptions())
    full, partial = groups(verdict)
    assert sorted(ranked(full)) == ["accelerate/aligned", "hf_trainer/aligned", "lightning/aligned"]
    assert sorted(ranked(partial)) == ["fabric/aligned", "ignite/aligned"]
    judged = {p["probe"] for p in evaluation["probes"]} - {"stability", "maintenance"}
    assert partial.title == title(judged)
    assert [s.coverage for s in partial.standings] == [5 / len(dimension_names())] * 2
    text = ranking_table(verdict)
    assert NOTE in text and text.index(full.title) < text.index(partial.title)
    assert [line.split()[0] for line in text.splitlines() if "ignite/aligned" in line or "fabric/aligned" in line] \
        == ["1", "2"]                                       # ranked within their own group, from 1
    markdown = render_report(verdict, {}, with_plots=False).markdown
    assert f"### {partial.title}" in markdown and "scores over different dimensions are not comparable" in markdown
    data = verdict_dict(verdict)["ranking"]["groups"]
    assert [len(g["ranked"]) for g in data] == [3, 2] and len(data[1]["judged"]) == 5
    assert all(label.startswith(("fabric/defaults", "ignite/defaults")) for g in data[1:]
               for rows in g["beside"].values() for label in rows)
