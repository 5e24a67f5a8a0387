"""The consistency probe's judge (issue 12) on synthetic job records: stage 1 step by step, stage 2 paired finals,
stage 3 one switch at a time; and its plan. No process starts: the judge is a pure function of the records."""
from __future__ import annotations

import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from evalkit import names
from evalkit.analysis.stats import margin_bounds, p_equivalence, welch_test
from evalkit.probes.catalog import load_probe
from evalkit.probes.consistency.plan import CALIBER, job_name, parse_job_name
from evalkit.probes.consistency.steps import TOLERANCE, relative_gap
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import ProbeResult

PROBE = load_probe("consistency")

STEPS = 40
TAGS = {names.VAL_METRIC: "mse", names.VAL_METRIC_HIGHER_IS_BETTER: "false", names.VAL_METRIC_SCALE: "relative",
        names.VAL_METRIC_MARGIN: "0.01"}
# a large spread across seeds: each seed draws its own data, so its final metric differs a lot
FINALS = {0: 0.08, 1: 0.03, 2: 0.15, 3: 0.05, 4: 0.11}


def curve(seed: int) -> dict[str, np.ndarray]:
    steps = np.arange(1, STEPS + 1)
    return {"loss": (1.0 + seed / 10) * np.exp(-steps / 15) + 0.05, "lr": 0.05 * np.minimum(1, steps / 5),
            "grad_norm": 0.5 * np.exp(-steps / 30) + 0.1 * (1 + seed)}


REFUSED = "UnsupportedCombination: the wrapper turns fp16_mixed into bf16 on CPU [refusal: silent-substitution]"
DOCUMENTED_REFUSAL = ("UnsupportedCombination: the wrapper has no fp16 on CPU [refusal: documented-unsupported, see "
                      "https://example.org/fp16]")


def job(switch: str, seed: int, arm: str, *, scale=None, final=None, status="FINISHED", steps=STEPS,
        params: bool = False, reason: str = "RuntimeError: boom") -> JobEvidence:
    """A job's records; `scale(column, step_array) -> factors` changes the wrapper's series; a job not FINISHED
    ended with `reason` (a crash unless it is a refusal) after recording `steps` steps."""
    series = curve(seed)
    if scale is not None:
        series = {k: v * scale(k, np.arange(1, STEPS + 1)) for k, v in series.items()}
    rows = [{"step": s, **{k: float(v[s - 1]) for k, v in series.items()}} for s in range(1, steps + 1)]
    value = FINALS[seed] if final is None else final
    config = {"seed": seed, "trainer": {"name": "wrapper", "docs": ["example.org"]}}   # its refusals cite example.org
    evidence = JobEvidence(job_name_of(switch, seed, arm), f"run-{switch}-{seed}-{arm}", status,
                           config, dict(TAGS) if status == "FINISHED" else {names.FAILURE_REASON: reason})
    if status == "FINISHED":
        evidence.steps, evidence.val = rows, [{"step": steps, "loss": value, "mse": value}]
    else:
        evidence.steps = rows
    if params:
        evidence.params = {s: np.linspace(-1, 1, 12) * (1 + 1e-3 * s) for s in range(1, steps + 1)}
    return evidence


def job_name_of(switch: str, seed: int, arm: str) -> str:
    return f"{switch}-s{seed}-{arm}"


def pairs(switch="fp32", seeds=(0, 1, 2), wrapper_final=None, **wrapper) -> list[JobEvidence]:
    """Wrapper and baseline jobs of each seed; `wrapper_final(seed, baseline_final)` sets the wrapper's final."""
    out = []
    for seed in seeds:
        final = wrapper_final(seed, FINALS[seed]) if wrapper_final else None
        out += [job(switch, seed, "wrapper", final=final, **wrapper), job(switch, seed, "baseline")]
    return out


def judge(jobs) -> ProbeResult:
    result = PROBE.judge(jobs)
    ProbeResult.from_json(result.to_json())          # the stored form round-trips
    assert result.to_markdown("t").count("###") == len(result.sections)
    return result


# ------------------------------------------------------------------ stage 1
def test_identical_curves_are_identical_and_equal_finals_pass():
    result = judge(pairs())
    assert result.passed and not result.inconclusive and result.findings == []
    assert result.headline.startswith(f"identical {STEPS} steps; Δ+0.00%") and result.headline.endswith("equivalent")
    assert result.figures["identical"] == 1 and "first_diverging_step" not in result.figures
    assert result.figures["steps_compared"] == STEPS and result.figures["equivalent"] == 1


def test_a_jitter_of_1e_8_is_within_1e_6():
    result = judge(pairs(scale=lambda col, s: 1 + 1e-8 * np.cos(s)))
    assert result.headline.startswith(f"within 1e-6 {STEPS} steps")
    assert result.figures["identical"] == 0 and 0 < result.figures["max_rel_gap"] < TOLERANCE
    assert result.passed


def test_a_divergence_planted_at_step_7_is_found_there_with_its_growth():
    grows = lambda col, s: np.where(s >= 7, 1 + 1e-5 * 1.3 ** (s - 7), 1.0) if col == "loss" else np.ones_like(s, float)  # noqa: E731
    result = judge(pairs(scale=grows))
    assert result.figures["first_diverging_step"] == 7
    assert result.headline.startswith("diverges from step 7")
    stage1 = result.sections[0]
    loss_row = next(line for line in stage1.splitlines() if line.startswith("| loss |"))
    cells = [c.strip() for c in loss_row.split("|")[1:-1]]
    assert cells[2] == "7" and cells[4] == "1.0e-05"            # first step, gap there
    assert float(cells[5]) == pytest.approx(1e-5 * 1.3 ** 10, rel=0.05)   # 10 steps later
    assert cells[6] == "-" and cells[8].startswith("x10 every 9 steps")   # no step 100 later; 1/log10(1.3) = 8.8
    lr_row = next(line for line in stage1.splitlines() if line.startswith("| lr |"))
    assert "| - |" in lr_row                                     # the LR never diverged
    assert result.passed, "a step-level divergence alone is no failure"


def test_parameters_show_an_update_that_differs_from_step_1():
    jobs = pairs(seeds=(0, 1))
    jobs[0].params = {s: np.linspace(-1, 1, 12) * 0.999 for s in range(1, STEPS + 1)}
    jobs[1].params = {s: np.linspace(-1, 1, 12) for s in range(1, STEPS + 1)}
    result = judge(jobs)
    assert result.figures["first_diverging_step"] == 1 and "params" in result.headline + result.sections[0]
    assert "diverges from step 1 (params" in result.sections[0]


def test_a_wrapper_running_one_step_more_diverges_at_that_step():
    jobs = pairs()
    jobs[0] = job("fp32", 0, "wrapper", steps=STEPS)
    jobs[1] = job("fp32", 0, "baseline", steps=STEPS - 1)
    result = judge(jobs)
    assert result.figures["first_diverging_step"] == STEPS
    assert "step counts differ" in result.sections[0]


def test_relative_gap_treats_equal_values_and_nan_pairs_as_equal():
    gap = relative_gap(np.array([1.0, 0.0, np.nan, np.nan, 2.0]), np.array([1.0, 0.0, np.nan, 1.0, 1.0]))
    assert gap.tolist() == [0.0, 0.0, 0.0, np.inf, 0.5]


# ------------------------------------------------------------------ stage 2
def test_a_shifted_final_metric_across_seeds_is_a_systematic_deviation():
    jitter = {0: 1e-3, 1: -1e-3, 2: 0.0}
    result = judge(pairs(wrapper_final=lambda seed, b: b * (1.05 + jitter[seed])))
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.final_metric" and finding.job == "fp32"
    assert "Δ+5.00%" in finding.size and "beyond ±1%" in finding.size and "paired, 3 seeds" in finding.size
    assert result.figures["deviation"] == 1 and result.figures["final_delta"] == pytest.approx(0.05, abs=1e-3)


def test_paired_noise_a_large_spread_across_seeds_with_a_tiny_paired_difference_is_equivalent():
    """The point of pairing: the seed's own effect (its data) is shared by both arms and cancels."""
    seeds = tuple(FINALS)
    tiny = {0: 2e-4, 1: -1e-4, 2: 3e-4, 3: -2e-4, 4: 1e-4}
    result = judge(pairs(seeds=seeds, wrapper_final=lambda seed, b: b * (1 + tiny[seed])))
    assert result.passed and result.headline.endswith("equivalent")
    assert result.figures["raw_sd"] > 0.4 and result.figures["paired_sd"] < 1e-3
    assert not any("spreads" in note for note in result.notes)        # no noise warning: the pairs agree
    # the same values, unpaired: the raw spread across seeds leaves the margin undecidable
    w = np.log([FINALS[s] * (1 + tiny[s]) for s in seeds])
    b = np.log([FINALS[s] for s in seeds])
    assert p_equivalence(welch_test(w, b), *margin_bounds(0.01)) > 0.05


def test_the_noise_warning_reads_the_paired_difference():
    noisy = {0: 0.75, 1: 1.3, 2: 1.0}
    result = judge(pairs(wrapper_final=lambda seed, b: b * noisy[seed]))
    assert result.inconclusive and not result.passed
    assert result.figures["paired_sd"] > 0.1
    assert any("paired difference" in n and "spreads" in n for n in result.notes)
    assert result.notes[0].startswith("stage 2 inconclusive")


def test_one_seed_cannot_decide():
    result = judge(pairs(seeds=(0,)))
    assert result.inconclusive and result.headline.startswith(f"identical {STEPS} steps")


def test_a_wrapper_going_non_finite_fails():
    jobs = pairs(wrapper_final=lambda seed, b: float("nan"))
    result = judge(jobs)
    assert not result.passed and not result.inconclusive
    assert result.findings[0].code == "consistency.nonfinite"


def test_crashed_wrapper_jobs_at_stage_2_fail_with_the_crashs_reason():
    """Issue 28 (b): a wrapper that crashes where it should train fails; more seeds would not decide anything."""
    jobs = [job("fp32", s, "wrapper", status="FAILED", steps=7) for s in (0, 1)]
    result = judge(jobs + [job("fp32", s, "baseline") for s in (0, 1)])
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.crashed" and finding.first_step == 8
    assert finding.title == "the wrapper's training crashed (seed(s) 0, 1)"
    assert finding.size == "2 of 2 run(s): RuntimeError: boom"
    assert any("did not finish (RuntimeError: boom)" in n for n in result.notes)


def test_refused_wrapper_jobs_at_stage_2_leave_it_undecided():
    jobs = [job("fp32", s, "wrapper", status="FAILED", reason=DOCUMENTED_REFUSAL) for s in (0, 1)]
    result = judge(jobs + [job("fp32", s, "baseline") for s in (0, 1)])
    assert result.inconclusive and result.findings == [] and "not compared" in result.headline


# ------------------------------------------------------------------ stage 3
def test_each_switch_is_a_row_and_a_shift_under_one_is_attributed_to_it():
    shifted = pairs("bf16_mixed", wrapper_final=lambda seed, b: b * (1.08 + 1e-3 * seed))
    blocked = [job("fp16_mixed", s, "wrapper", status="FAILED", reason=DOCUMENTED_REFUSAL) for s in (0, 1, 2)]
    blocked += [job("fp16_mixed", s, "baseline") for s in (0, 1, 2)]
    result = judge(pairs() + shifted + pairs("ws2") + blocked)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.final_metric.bf16_mixed" and "under bf16_mixed" in finding.title
    assert result.headline.endswith("bf16_mixed: deviation; ws2: equivalent; "
                                    "fp16_mixed: not run (documented-unsupported: https://example.org/fp16)")
    table = result.sections[2].splitlines()
    rows = {line.split("|")[1].strip(): line for line in table if line.startswith("| ") and "switch" not in line}
    assert set(rows) == {"bf16_mixed", "ws2", "fp16_mixed"}
    assert "| not run | the wrapper refuses it: UnsupportedCombination: the wrapper has no fp16" in rows["fp16_mixed"]
    assert "equivalent" in rows["ws2"]
    assert result.figures["bf16_mixed_deviation"] == 1 and result.figures["ws2_equivalent"] == 1
    assert result.figures["equivalent"] == 1                      # fp32 itself stays equivalent


def test_a_switch_the_wrapper_refuses_as_documented_unsupported_is_not_run_and_does_not_fail_the_probe():
    blocked = [job("fp16_mixed", 0, "wrapper", status="FAILED", reason=DOCUMENTED_REFUSAL),
               job("fp16_mixed", 0, "baseline")]
    result = judge(pairs() + blocked)
    assert result.passed and "fp16_mixed: not run" in result.headline
    assert [k for k in result.figures if k.startswith("fp16_mixed_")] == ["fp16_mixed_not_judged"]   # none measured
    assert any(n.startswith("job(s) fp16_mixed-s0-wrapper did not finish (UnsupportedCombination: ")
               for n in result.notes)


def test_a_switch_under_which_the_wrapper_crashes_fails_the_probe_with_the_crashs_reason():
    """Issue 28 (b): only an UnsupportedCombination makes a "not run" row; a plain crash under a switch fails."""
    crashed = [job("fp16_mixed", 0, "wrapper", status="FAILED", steps=3,
                   reason="RuntimeError: expected scalar type Half but found Float"), job("fp16_mixed", 0, "baseline")]
    result = judge(pairs() + crashed)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.crashed.fp16_mixed" and finding.first_step == 4
    assert finding.title == "the wrapper's training crashed under fp16_mixed (seed(s) 0)"
    assert finding.size == "1 of 1 run(s): RuntimeError: expected scalar type Half but found Float"
    assert result.headline.endswith("fp16_mixed: crashed") and "not run" not in result.headline
    row = next(line for line in result.sections[2].splitlines() if line.startswith("| fp16_mixed "))
    assert "| crashed | the wrapper crashed: RuntimeError: expected scalar type Half" in row
    assert result.status == "fail" and result.reason.startswith("1 finding(s); first:")


def test_a_switch_under_which_the_baseline_crashes_leaves_the_probe_undecided():
    crashed = [job("ws2", 0, "wrapper"), job("ws2", 0, "baseline", status="FAILED", reason="RuntimeError: gloo")]
    result = judge(pairs() + crashed)
    assert result.inconclusive and result.findings == [] and result.headline.endswith("ws2: baseline crashed")
    assert result.notes[0].startswith("ws2: the baseline's job(s) ws2-s0-baseline crashed (RuntimeError: gloo)")
    assert result.reason == result.notes[0]


def test_no_evidence_at_all_is_inconclusive():
    result = judge([])
    assert result.inconclusive and result.notes[0].startswith("stage 2 could not compare")


# ------------------------------------------------------------------ plan
def probe_cfg(**probe) -> OmegaConf:
    return OmegaConf.create({"seed": 3, "hardware": {"name": "cpu"},
                             "probe": {"name": "consistency", "seeds": 2, "switches": [], **probe}})


def test_the_plan_pairs_every_wrapper_seed_with_the_baselines_same_seed_per_switch():
    cfg = probe_cfg(switches=["fp16_mixed", "ws2"])
    jobs, notes = PROBE.plan(cfg, {})
    assert notes == [] and len(jobs) == 2 * 2 * 3
    by_name = {j.name: j.overrides for j in jobs}
    assert [j.name for j in jobs][:4] == ["fp32-s3-wrapper", "fp32-s3-baseline", "fp32-s4-wrapper", "fp32-s4-baseline"]
    assert by_name["fp32-s3-baseline"]["trainer"] == "baseline" and "trainer" not in by_name["fp32-s3-wrapper"]
    assert by_name["fp32-s3-wrapper"]["observe.params"] and not by_name["fp32-s4-wrapper"]["observe.params"]
    assert by_name["fp32-s4-wrapper"]["precision.name"] == "fp32" and by_name["fp32-s4-wrapper"]["seed"] == 4
    fp16 = by_name["fp16_mixed-s3-baseline"]
    assert (fp16["precision.autocast_dtype"], fp16["precision.grad_scaler"], fp16["distributed.world_size"]) == \
        ("float16", True, 1)
    ws2 = by_name["ws2-s4-wrapper"]
    assert (ws2["distributed.name"], ws2["distributed.world_size"], ws2["precision.name"]) == ("ddp", 2, "fp32")
    assert all(o["train.max_steps"] == CALIBER["train.max_steps"] for o in by_name.values())
    done = {name: None for name in by_name}
    assert PROBE.plan(cfg, done) == ([], [])
    assert all(parse_job_name(name) is not None and job_name(parse_job_name(name)) == name for name in by_name)
    assert PROBE.caliber(cfg).startswith("consistency|hw=cpu|") and "switches=fp16_mixed,ws2" in PROBE.caliber(cfg)


def test_evidence_of_other_jobs_is_left_out_with_a_note():
    stranger = job("fp32", 0, "wrapper")
    stranger.name = "ws1-noclip"
    result = judge(pairs() + [stranger])
    assert result.passed and any("ws1-noclip" in n for n in result.notes)
    json.loads(result.to_json())


def test_each_threshold_says_how_it_is_calibrated():
    """Issue 28 (f): the decision's thresholds are the test's level and the task's own margin, said in one line."""
    note = next(n for n in judge(pairs()).notes if n.startswith("thresholds: "))
    assert note.startswith("thresholds: alpha 0.05 is the false-positive rate of each paired equivalence test")
    assert "the margin ±1% is the task's own" in note and "never decide" in note



def test_a_switch_refused_as_a_silent_substitution_fails_and_only_a_documented_refusal_is_not_run():
    """Issue 44: any refusal gave a "not run" row and a pass, a silent substitution too (the wrapper would run
    something else than asked: what a consistency probe exists to catch). Only a documented-unsupported refusal,
    citing where, is exempt, and its row says so."""
    substituted = [job("fp16_mixed", 0, "wrapper", status="FAILED", reason=REFUSED), job("fp16_mixed", 0, "baseline")]
    result = judge(pairs() + substituted)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.substituted.fp16_mixed"
    assert finding.title == "the wrapper would run something else than fp16_mixed asks (refused: silent-substitution)"
    assert result.headline.endswith("fp16_mixed: refused (silent-substitution)")
    documented = [job("ws2", 0, "wrapper", status="FAILED", reason=DOCUMENTED_REFUSAL), job("ws2", 0, "baseline")]
    result = judge(pairs() + documented)
    assert result.passed and result.headline.endswith("ws2: not run (documented-unsupported: https://example.org/fp16)")


# ------------------------------------------------------------------ a refusal recorded, and its citation (issue 44)
POUTYNE_PAGE = "https://poutyne.org/model.html#poutyne.Model.to"


def poutyne_refused(seed: int, where: str = POUTYNE_PAGE) -> JobEvidence:
    """The ws2 switch's wrapper job refused as Poutyne refused world size 2 in a recorded probe run (its failure reason
    and trainer config, tests/fixtures/semantics/wrappers/poutyne.defaults.json.gz), citing `where`."""
    from helpers import FIXTURES
    from semantics_runs import recorded_evidence

    recorded = next(j for j in recorded_evidence(FIXTURES / "semantics" / "wrappers" / "poutyne.defaults.json.gz")
                    if j.name == "ws2-noclip")
    refused = job("ws2", seed, "wrapper", status="FAILED", steps=0,
                  reason=recorded.failure_reason.replace(POUTYNE_PAGE, where))
    refused.config["trainer"] = recorded.config["trainer"]
    return refused


def test_a_switch_refused_as_documented_names_its_page_in_the_cell_and_is_counted():
    """Issue 44: the headline read "ws2: not run (documented-unsupported)", naming no page; it names the page the
    refusal cites, counted in the figures (switches_not_judged, ws2_not_judged), and the cell shows it."""
    from probe_runs import verdict_cell

    refused = [poutyne_refused(s) for s in (0, 1, 2)] + [job("ws2", s, "baseline") for s in (0, 1, 2)]
    result = judge(pairs() + refused)
    assert result.passed and result.headline.endswith(f"ws2: not run (documented-unsupported: {POUTYNE_PAGE})")
    assert result.figures["switches_not_judged"] == 1 and result.figures["ws2_not_judged"] == 1
    cell = verdict_cell("consistency", json.loads(result.to_json()), "poutyne")
    assert cell.cell() == f"pass ({result.headline})"


def test_a_switch_refused_citing_no_page_of_the_wrappers_docs_is_the_wrappers_finding():
    refused = [poutyne_refused(s, "see the README") for s in (0, 1, 2)] + [job("ws2", s, "baseline") for s in (0, 1, 2)]
    result = judge(pairs() + refused)
    assert not result.passed and not result.inconclusive
    (finding,) = result.findings
    assert finding.code == "consistency.refused.ws2"
    assert finding.title == ("the wrapper refuses ws2 without citing its documentation (citation not a page of "
                             "poutyne's docs: see the README)")
    assert result.headline.endswith("ws2: refused (citation not a page of poutyne's docs: see the README)")
    assert result.figures["switches_not_judged"] == 0
