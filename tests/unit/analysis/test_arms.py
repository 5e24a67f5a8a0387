"""Arms, noise over seeds vs repeats, and arm-level comparisons (pure: in-memory records)."""
import numpy as np
import pytest

from evalkit.analysis import compare
from evalkit.analysis.arms import Arm, ArmKey, Samples, baseline_for, group_arms, wrapper_arms
from evalkit.analysis.noise import spread
from evalkit.analysis.records import RunRecord, parse_csv
from evalkit.analysis.synthetic import ArmPlan, records

SPEC = compare.MetricSpec("val/mse", higher_is_better=False, margin=0.01)
THROUGHPUT = compare.Budget("perf/samples_per_s", "throughput", 0.9, True)
MEMORY = compare.Budget("perf/peak_mem_bytes", "peak memory", 1.1, False)


def arms_of(*plans):
    return group_arms(records(list(plans)))


def one(arms, trainer, mode="aligned"):
    return next(a for k, a in arms.items() if (k.trainer, k.mode) == (trainer, mode))


def test_runs_group_into_arms_by_task_caliber_trainer_and_mode():
    arms = arms_of(ArmPlan("baseline"), ArmPlan("lightning"), ArmPlan("lightning", mode="defaults"),
                   ArmPlan("lightning", caliber="hw=cpu|bs=64"), ArmPlan("baseline", task="tiny_lm"),
                   ArmPlan("ignite", task="tiny_lm", repeats=2, failed_seeds=(3,)))
    assert len(arms) == 6
    ignite = one(arms, "ignite")
    assert len(ignite.jobs) == 10 and len(ignite.broken) == 2 and ignite.seeds == [0, 1, 2, 4]
    assert baseline_for(ignite.key, arms).key.task == "tiny_lm"
    assert baseline_for(one(arms, "lightning", "defaults").key, arms).key.mode == "aligned"
    other_caliber = next(k for k in arms if k.caliber == "hw=cpu|bs=64")
    assert baseline_for(other_caliber, arms) is None
    assert {a.key.trainer for a in wrapper_arms(arms)} == {"lightning", "ignite"}


def test_seed_noise_and_repeat_noise_are_estimated_separately():
    rng = np.random.default_rng(0)
    seeds = np.repeat(np.arange(200), 3)
    values = np.exp(np.repeat(rng.normal(0, 0.02, 200), 3) + rng.normal(0, 0.005, 600))
    noise = spread(Samples(seeds, np.tile(np.arange(3), 200), values))
    assert noise.n_seeds == 200 and noise.max_repeats == 3
    # per-seed means carry a little repeat noise too: sqrt(0.02² + 0.005²/3) ≈ 0.0202
    assert noise.seed_sd == pytest.approx(0.0202, rel=0.15)
    assert noise.repeat_sd == pytest.approx(0.005, rel=0.1)
    single = spread(Samples(np.arange(4), np.zeros(4, int), np.array([1.0, 1.1, 0.9, 1.0])))
    assert np.isnan(single.repeat_sd) and single.seed_sd > 0


def test_equivalent_wrapper_passes_and_shifted_wrapper_deviates_after_holm():
    arms = arms_of(ArmPlan("baseline"), ArmPlan("good"), ArmPlan("shifted", metric_shift=0.05))
    base = one(arms, "baseline")
    good = compare.compare_metric(one(arms, "good"), base, SPEC, 0.05)
    bad = compare.compare_metric(one(arms, "shifted"), base, SPEC, 0.05)
    compare.adjust([good, bad], 0.05)
    assert good.paired and good.n == 5 and good.outcome == compare.EQUIVALENT
    assert bad.outcome == compare.DEVIATION and bad.delta == pytest.approx(0.05, abs=0.005)
    assert bad.ratio_low < bad.ratio < bad.ratio_high
    assert bad.p_bad_adj >= bad.p_bad and good.seeds_needed is None


def test_disjoint_seeds_are_compared_unpaired_and_may_stay_inconclusive():
    arms = arms_of(ArmPlan("baseline", seed_sd=0.01),
                   ArmPlan("w", seeds=(10, 11, 12), seed_sd=0.01, metric_shift=0.004))
    c = compare.compare_metric(one(arms, "w"), one(arms, "baseline"), SPEC, 0.05)
    compare.adjust([c], 0.05)
    assert not c.paired and c.n == 3
    assert c.outcome == compare.INCONCLUSIVE and c.seeds_needed is not None and c.seeds_needed > 5


def test_repeats_are_averaged_within_a_seed_before_pairing():
    arms = arms_of(ArmPlan("baseline", repeats=3), ArmPlan("w", repeats=2))
    c = compare.compare_metric(one(arms, "w"), one(arms, "baseline"), SPEC, 0.05)
    assert c.paired and c.n == 5
    assert c.noise_baseline.max_repeats == 3 and np.isfinite(c.noise_baseline.repeat_sd)


@pytest.mark.parametrize("throughput, memory, expect", [
    (980.0, 2.0e8, ("within", "within")),
    (600.0, 2.0e8, ("outside", "within")),
    (1000.0, 3.0e8, ("within", "outside")),
])
def test_performance_budgets(throughput, memory, expect):
    arms = arms_of(ArmPlan("baseline"), ArmPlan("w", throughput=throughput, memory=memory))
    comps = [compare.compare_budget(one(arms, "w"), one(arms, "baseline"), b, 0.05) for b in (THROUGHPUT, MEMORY)]
    compare.adjust(comps, 0.05)
    assert tuple(c.outcome for c in comps) == expect
    assert comps[1].ratio == pytest.approx(memory / 2.0e8)


def test_noisy_throughput_near_the_budget_is_inconclusive():
    arms = arms_of(ArmPlan("baseline", throughput_sd=0.1), ArmPlan("w", throughput=900.0, throughput_sd=0.1))
    c = compare.compare_budget(one(arms, "w"), one(arms, "baseline"), THROUGHPUT, 0.05)
    compare.adjust([c], 0.05)
    assert c.outcome == compare.INCONCLUSIVE


def test_metrics_that_can_be_zero_declare_an_absolute_scale():
    def arm(trainer, values):
        runs = [RunRecord(f"{trainer}{i}", "FINISHED", {"evalkit.role": "job", "evalkit.seed": str(i)},
                          {"val/score": v}) for i, v in enumerate(values)]
        return Arm(ArmKey("t", "c", trainer, "aligned"), runs)

    w, b = arm("w", [0.0, 0.5, 1.0, 0.5]), arm("baseline", [0.0, 0.5, 1.0, 0.5])
    c = compare.compare_metric(w, b, compare.MetricSpec("val/score", True, 0.01, scale="absolute"), 0.05)
    compare.adjust([c], 0.05)
    assert c.delta == 0 and c.outcome == compare.EQUIVALENT and c.scale == "absolute"
    with pytest.raises(ValueError, match="val/score has values <= 0: a relative margin needs positive values"):
        compare.compare_metric(w, b, compare.MetricSpec("val/score", True, 0.01), 0.05)


def test_records_csv_with_blank_and_text_columns_as_the_training_core_writes_them():
    text = "step,loss,lr,loss_scale,validated_before\n1,0.5,0.001,,False\n2,0.25,0.002,,True\n"
    fast = parse_csv(text, ("step", "loss", "lr", "absent"))
    assert set(fast) == {"step", "loss", "lr"} and fast["loss"].tolist() == [0.5, 0.25]
    everything = parse_csv(text)
    assert everything["lr"].tolist() == [0.001, 0.002]
    assert np.isnan(everything["loss_scale"]).all() and np.isnan(everything["validated_before"]).all()
    assert parse_csv("step,loss\n")["loss"].size == 0 and parse_csv("") == {}


def test_a_wrapper_in_its_own_environment_is_an_arm_of_its_own_named_after_it():
    """Two versions of one wrapper in one sweep (`trainer.env`, issue 33): two arms, each judged against the
    baseline, and the command that runs one again names its environment."""
    from evalkit import names
    from evalkit.analysis.records import trainer_overrides

    runs = records([ArmPlan("baseline"), ArmPlan("hf_trainer", seeds=(0, 1)), ArmPlan("hf_trainer", seeds=(2, 3))])
    for run in runs:
        if run.tag(names.TRAINER) == "hf_trainer" and run.seed in (2, 3):
            run.tags[names.TRAINER_ENV] = "transformers-4.45.2"
    arms = group_arms(runs)
    assert sorted(k.trainer for k in arms) == ["baseline", "hf_trainer", "hf_trainer@transformers-4.45.2"]
    assert one(arms, "hf_trainer@transformers-4.45.2").seeds == [2, 3] and one(arms, "hf_trainer").seeds == [0, 1]
    wrappers = wrapper_arms(arms)
    assert len(wrappers) == 2 and all(baseline_for(a.key, arms).key.trainer == "baseline" for a in wrappers)
    assert trainer_overrides("hf_trainer@transformers-4.45.2") == "trainer=hf_trainer trainer.env=transformers-4.45.2"
    assert trainer_overrides("baseline") == "trainer=baseline"


def probe_run(task, probe="semantics", trainer="lightning"):
    return RunRecord(f"{probe}-{task}", "FINISHED", {"evalkit.role": "probe", "evalkit.probe": probe,
                                                     "evalkit.trainer": trainer, "evalkit.mode": "aligned",
                                                     "evalkit.task": task,
                                                     **({"evalkit.your_task": "true"} if task != "mlp_regression"
                                                        else {})}, {})


def test_a_probe_on_a_teams_task_judges_that_tasks_arms_and_a_caliber_probe_every_arm():
    runs = records([ArmPlan("lightning"), ArmPlan("lightning", task="resnet18")])
    arms = group_arms(runs + [probe_run("resnet18"), probe_run("mlp_regression", "stability")])
    by_task = {k.task: {r.run_id for r in a.runs if r.role == "probe"} for k, a in arms.items()}
    assert by_task == {"mlp_regression": {"stability-mlp_regression"},
                       "resnet18": {"semantics-resnet18", "stability-mlp_regression"}}


def test_probe_runs_alone_form_one_arm_per_task():
    arms = group_arms([probe_run("resnet18"), probe_run("hf_causal_lm"), probe_run("resnet18", "stability")])
    assert sorted((k.task, k.caliber) for k in arms) == [("hf_causal_lm", "probes only"), ("resnet18", "probes only")]
    assert len(next(a for k, a in arms.items() if k.task == "resnet18").runs) == 2
