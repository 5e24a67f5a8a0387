"""'What changed between versions' (issue 33) on the recorded evaluation: a second version of the Trainer
(`trainer.env`), planted from another wrapper's recorded semantics, is set against the installed one, or the other
way round with `--reference`; the finding codes that came and went are named, a dimension judged in one version
only is not called a change, and a reference that names no arm is refused."""
from __future__ import annotations

import dataclasses

from evalkit import names
from evalkit.verdict import VerdictOptions, build_verdict
from evalkit.verdict.report import blocks
from evalkit.verdict.versions import check_references, pair_lines, version_pairs

OLD = "hf_trainer@transformers-4.45.2"


def _with_old_version(recorded_records, evaluation):
    """The evaluation's records, plus Lightning's aligned semantics probe run relabelled as the Trainer at another
    version: a semantics cell with other findings, and no other probe."""
    runs = recorded_records()
    lightning = next(r for r in runs if r.probe == "semantics" and r.trainer == "lightning" and r.mode == "aligned")
    old = dataclasses.replace(lightning, run_id="old-version", tags={**lightning.tags, names.TRAINER: "hf_trainer",
                                                                     names.TRAINER_ENV: "transformers-4.45.2"})
    return runs + [old], {f["code"] for f in lightning.probe_results["semantics"]["findings"]}


def test_the_other_version_is_set_against_the_installed_one_with_the_findings_that_came(recorded_records,
                                                                                       evaluation):
    runs, codes = _with_old_version(recorded_records, evaluation)
    verdict = build_verdict(runs, VerdictOptions())
    (pair,) = version_pairs(verdict)
    assert (pair.reference.trainer, pair.other.trainer) == ("hf_trainer", OLD)
    (change,) = pair.changes
    assert change.dimension == "semantics" and change.before.startswith("pass") and change.after.startswith("fail")
    assert set(change.appeared) == codes and change.gone == ()
    assert "semantics" not in pair.one_sided and "performance" in pair.one_sided and "performance" not in pair.same
    assert pair_lines(pair)[0].startswith("semantics: pass")
    titles = [b.text for b in blocks(verdict, [], {}) if b.kind == "h2"]
    assert "What changed between versions" in titles


def test_a_reference_turns_the_comparison_round_and_one_that_names_no_arm_is_refused(recorded_records, evaluation):
    runs, codes = _with_old_version(recorded_records, evaluation)
    verdict = build_verdict(runs, VerdictOptions(references=[OLD]))
    (pair,) = version_pairs(verdict)
    assert (pair.reference.trainer, pair.other.trainer) == (OLD, "hf_trainer")
    assert set(pair.changes[0].gone) == codes and pair.changes[0].appeared == ()
    assert check_references([OLD], verdict.arms) == []
    assert "no arm of that name" in check_references(["hf_trainer@4.45"], verdict.arms)[0]


def test_a_sweep_of_one_version_per_wrapper_has_no_such_section(recorded_records):
    verdict = build_verdict(recorded_records(), VerdictOptions())
    assert version_pairs(verdict) == []
    assert "What changed between versions" not in [b.text for b in blocks(verdict, [], {}) if b.kind == "h2"]


def test_codes_missing_from_an_inconclusive_newer_cell_are_not_called_gone(recorded_records, evaluation):
    """Issue 44: set against a version with findings, a newer version whose semantics probe could not decide listed
    the old codes as 'gone', which reads like a fix; an inconclusive cell did not judge them."""
    runs, codes = _with_old_version(recorded_records, evaluation)
    current = next(r for r in runs if r.probe == "semantics" and r.trainer == "hf_trainer" and r.mode == "aligned"
                   and r.run_id != "old-version")
    undecided = dataclasses.replace(
        current, tags={**current.tags, names.probe_status("semantics"): "inconclusive"},
        metrics={k: v for k, v in current.metrics.items() if k != names.probe_pass("semantics")})
    runs = [undecided if r is current else r for r in runs]
    (pair,) = version_pairs(build_verdict(runs, VerdictOptions(references=[OLD])))
    (change,) = pair.changes
    assert change.after.startswith("inconclusive") and change.gone == () and set(change.unjudged) == codes
    line = pair_lines(pair)[0]
    assert "gone" not in line and f"not judged in the inconclusive cell: {', '.join(sorted(codes))}" in line
    verdict = build_verdict(runs, VerdictOptions(references=[OLD]))
    (table,) = [b for b in blocks(verdict, [], {}) if b.kind == "table" and "findings gone" in (b.headers or [])]
    assert table.rows[0][4] == f"none (not judged: {', '.join(sorted(codes))})"
