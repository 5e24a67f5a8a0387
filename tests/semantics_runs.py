"""The semantic probe's planted wrong variants (tests/planted/planted_loop.py), each with the finding it must raise,
and the checks of a live or recorded result against them."""
from __future__ import annotations

from pathlib import Path

from helpers import FIXTURES

# ------------------------------------------------------------------ planted semantics and their recorded evidence
# The semantic probe's planted wrong variants (tests/planted/planted_loop.py), each with the finding it must raise.
# scripts/record_probe_fixtures.py records the evidence of every one (tests/fixtures/semantics/planted/), the unit
# tier judges those recordings (tests/unit/probes/semantics/test_judge_planted.py), and the e2e tier trains one
# variant of each family live and checks that the recording still matches.
# variant -> (finding code, first step); each group's jobs are the probe settings beside it in SETTINGS
SEMANTICS_WS1 = {
    "lr.per_micro_batch": ("lr.per_micro_batch", 2), "lr.per_epoch": ("lr.per_epoch", 2),
    "lr.twice_per_step": ("lr.twice_per_step", 2), "lr.warmup_off_by_one": ("lr.warmup_off_by_one", 1),
    "lr.warmup_unit": ("lr.warmup_unit", 1), "loss.window_summed": ("loss.window_summed", 1),
    "window.short_underscaled": ("window.short_underscaled", 4), "window.short_dropped": ("window.short_dropped", 4),
    "window.short_merged": ("window.short_merged", 4),
    "clip.unasked": ("clip.unasked", None),
    "wd.unasked": ("wd.unasked", 1), "order.shuffled": ("order.shuffled", 1),
    "forward.before_training": ("forward.before_training", 0), "forward.extra_train": ("forward.extra_train", 1),
    "val.train_mode": ("val.train_mode", 4), "val.cadence": ("val.cadence", 1),
    "steps.extra": ("steps.extra", 11), "steps.fewer": ("steps.fewer", 10),
    "precision.mismatch": ("precision.mismatch", 1), "unexplained": ("unexplained.update", 1),
}
SEMANTICS_WS1_BOTH_JOBS = {"clip.per_micro_batch": ("clip.per_micro_batch", None),
                           "clip.before_unscale": ("clip.before_unscale", 1),
                           "order.fixed_seed": ("order.fixed_seed", 1)}
SEMANTICS_WS2 = {"ddp.grad_summed": ("ddp.grad_summed", 1),
                 "order.distributed_interleave": ("order.distributed_interleave", 1),
                 "order.padded": ("order.padded", 1)}
# Planted loops whose evidence falls short of what a pass requires (issue 28): variant -> words of the inconclusive
# reason its judge must give (no finding, never a pass). tests/planted/silent_loop.py: the planted loop's semantics,
# its optimizer steps applied by hand (torch's optimizer hooks never fire); both jobs, the clip job too.
SEMANTICS_INCONCLUSIVE = {"evidence.silent_optimizer": "no optimizer step was observed"}
SILENT_LOOP = "trainer._target_=silent_loop.SilentStepAdapter"
# The optimizer a loop builds itself (issue 29), judged from its recorded param groups: the SGD job and the AdamW job
# (weight decay 0.1) of world size 1.
SEMANTICS_OPTIMIZER = {"optim.other": ("optim.other", 1), "optim.hyper": ("optim.hyper", 1),
                       "optim.unoptimized": ("optim.unoptimized", 1), "wd.skipped": ("wd.skipped", 1),
                       "lr.per_group": ("lr.per_group", 1), "lr.warmup_from_zero": ("lr.warmup_from_zero", 1)}
SGD_ONLY = "probe.optimizers=[sgd]"
# The short-epoch job (epochs shorter than one window) runs with the correct loop's recording (none.json.gz) and the
# carried windows' (shown there on every step); window.short_dropped and window.short_merged never step there (each
# waits for a window of 3 that never comes) and would only run into the job's time limit.
NO_SHORT = "probe.short_epoch=false"
# The token caliber's job runs with the correct loop's recording only: its normalizations are planted and judged in
# tests/unit/probes/semantics/test_normalization_tokens.py, and the other families were recorded without it.
NO_TOKENS = "probe.tokens=false"
SEMANTICS_WINDOWS = {"window.short_carried": ("window.short_carried", 4)}
SEMANTICS_SETTINGS = [(SEMANTICS_WS1, ["probe.world_sizes=[1]", "probe.clip=[false]", SGD_ONLY, NO_SHORT,
                                       NO_TOKENS]),
                      (SEMANTICS_WINDOWS, ["probe.world_sizes=[1]", "probe.clip=[false]", SGD_ONLY, NO_TOKENS]),
                      (SEMANTICS_WS1_BOTH_JOBS, ["probe.world_sizes=[1]", SGD_ONLY, NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_WS2, ["probe.world_sizes=[2]", "probe.clip=[false]", SGD_ONLY, NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_OPTIMIZER, ["probe.world_sizes=[1]", "probe.clip=[false]", NO_SHORT, NO_TOKENS]),
                      (SEMANTICS_INCONCLUSIVE, ["probe.world_sizes=[1]", SILENT_LOOP, SGD_ONLY, NO_SHORT,
                                                NO_TOKENS])]
SEMANTICS_PLANTED = {v: expected for group, _ in SEMANTICS_SETTINGS if group is not SEMANTICS_INCONCLUSIVE
                     for v, expected in group.items()}
RECORDED_SEMANTICS = FIXTURES / "semantics" / "planted"    # <variant>.json.gz, and none.json.gz (the correct loop)


def semantics_live_groups() -> list[tuple[list[str], list[str]]]:
    """(probe settings, variants) per group of SEMANTICS_SETTINGS: the first variant of each family (the part of a
    variant's name before its first dot) not yet taken, the ones the e2e tier trains live."""
    taken, groups = set(), []
    for variants, setting in SEMANTICS_SETTINGS:
        live = [v for v in variants if v.split(".")[0] not in taken and not taken.add(v.split(".")[0])]
        if live:
            groups.append((setting, live))
    return groups


def recorded_evidence(path: Path) -> list:
    """The jobs of a recorded probe fixture (evidence.save_fixture's JSON, gzipped or not)."""
    import gzip
    import json

    from evalkit.probes.evidence import JobEvidence

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [JobEvidence.from_json(json.dumps(item)) for item in json.load(fh)]


def assert_semantic_inconclusive(result, variant: str) -> None:
    """The judged `result` (a ProbeResult's dict) of a variant of SEMANTICS_INCONCLUSIVE: inconclusive (no pass, no
    finding), its reason naming what is missing."""
    assert result["inconclusive"] and not result["passed"] and result["findings"] == [], result["notes"][:3]
    assert SEMANTICS_INCONCLUSIVE[variant] in result["notes"][0], result["notes"][0]
    assert result["headline"].startswith("0 findings on missing evidence: "), result["headline"]


def assert_semantic_finding(result, variant: str) -> None:
    """The judged `result` (a ProbeResult's dict) names the planted variant's finding at its first step, explained
    by an alternative semantics (or, for `unexplained`, by none)."""
    code, first_step = SEMANTICS_PLANTED[variant]
    assert not result["passed"]
    found = {f["code"]: f for f in result["findings"]}
    assert code in found, f"{variant}: found {sorted(found)}"
    if first_step is not None:
        assert found[code]["first_step"] == first_step, found[code]
    if code.startswith("unexplained"):
        assert found[code]["explained_by"] == []
        assert all(f["code"].startswith("unexplained") for f in result["findings"]), result["findings"]
    else:
        assert found[code]["explained_by"], found[code]
