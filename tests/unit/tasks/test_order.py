"""Fast unit tests of the pieces every adapter relies on: data order, fingerprints, schedule, redaction."""
from __future__ import annotations

import math
import time

import pytest
import torch
from helpers import bundled_task_arguments
from omegaconf import OmegaConf

from evalkit.config import TrainConfig
from evalkit.contract import same_device
from evalkit.controller.tracking import flatten
from evalkit.observe.memory import NvmlPeak, PeakSampler
from evalkit.secrets import REDACTED, redact
from evalkit.tasks.catalog import IGNORE_INDEX, PAD_TOKEN, cnn_classification, mlp_regression, tiny_lm
from evalkit.tasks.order import OrderedSampler, SampleIndex, ValSampler
from evalkit.worker.optim import WarmupSchedule, make_optimizer, make_scheduler


def test_ranks_partition_each_global_batch_and_epochs_differ():
    ranks = [OrderedSampler(100, 8, seed=3, rank=r, world_size=2) for r in range(2)]
    assert all(len(s) == 6 * 8 for s in ranks)           # 100 // 16 = 6 global batches
    e0 = [s.rank_indices(0).view(6, 8) for s in ranks]
    together = torch.cat([e0[0], e0[1]], dim=1).reshape(-1)
    assert torch.equal(together, ranks[0].epoch_order(0)[:96])   # rank r = r-th slice of each global batch
    assert not torch.equal(ranks[0].rank_indices(0), ranks[0].rank_indices(1))


def test_sampler_advances_epochs_by_itself_and_honours_set_epoch_and_start_batch():
    s = OrderedSampler(64, 8, seed=1)
    first, second = list(s), list(s)
    assert first == s.rank_indices(0).tolist() and second == s.rank_indices(1).tolist()
    s.set_epoch(0)
    assert list(s) == first
    resumed = OrderedSampler(64, 8, seed=1, start_batch=3)
    assert len(resumed) == 5 * 8 and list(resumed) == first[24:]
    assert list(resumed) == s.rank_indices(1).tolist()        # the skip applies to the first epoch only


def test_sampler_refuses_a_batch_larger_than_the_data():
    with pytest.raises(ValueError, match="lower train.batch_size"):
        OrderedSampler(10, 8, seed=0, world_size=2)


def test_val_sampler_shards_cover_the_split_once():
    shards = [list(ValSampler(10, r, 3)) for r in range(3)]
    assert sorted(sum(shards, [])) == list(range(10))


@pytest.mark.parametrize("builder,name", [(mlp_regression, "mlp_regression"),
                                          (cnn_classification, "cnn_classification"), (tiny_lm, "tiny_lm")])
def test_tasks_are_functions_of_the_seed_and_fingerprints_recover_indices(builder, name):
    arguments = bundled_task_arguments(name)
    a, b, c = builder(5, **arguments), builder(5, **arguments), builder(6, **arguments)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert not all(torch.equal(pa, pc) for pa, pc in zip(a.model.parameters(), c.model.parameters()))
    assert torch.equal(a.train_set.tensors[0], b.train_set.tensors[0])
    index = SampleIndex(a.train_set.tensors[0], a.val_set.tensors[0])
    picks = [7, 0, 31, 5]
    assert index.lookup(a.train_set.tensors[0][picks], "train") == picks
    assert index.lookup(a.val_set.tensors[0][picks], "val") == picks
    assert index.lookup(torch.zeros_like(a.train_set.tensors[0][:2]), "train") == [-1, -1]
    if a.train_set.tensors[0].is_floating_point():   # a wrapper that casts inputs (Fabric's mixed precision)
        for dtype in (torch.bfloat16, torch.float16):
            assert index.lookup(a.train_set.tensors[0][picks].to(dtype), "train") == picks


def test_rows_that_a_cast_makes_equal_are_not_guessed():
    base = torch.randn(4, 20)
    twin = base[1].clone()
    twin[0] += 1e-6                      # differs in fp32, equal after a cast to bf16
    inputs = torch.cat([base, twin[None]])
    index = SampleIndex(inputs, inputs[:1])
    assert index.lookup(inputs[[1, 4]], "train") == [1, 4]
    assert index.lookup(inputs[[1, 4, 2]].to(torch.bfloat16), "train") == [-1, -1, 2]


def test_tiny_lm_pads_and_ignores_pad_targets():
    arguments = bundled_task_arguments("tiny_lm")
    task = tiny_lm(0, **arguments)
    x, y = task.train_set.tensors
    assert (x == PAD_TOKEN).any() and (y == IGNORE_INDEX).any()
    lengths = (x != PAD_TOKEN).sum(1)
    assert lengths.min() < lengths.max()                              # variable length
    logits = torch.randn(4, x.shape[1], arguments["vocab_size"])
    manual = torch.nn.functional.cross_entropy(logits[y[:4] != IGNORE_INDEX], y[:4][y[:4] != IGNORE_INDEX])
    assert torch.allclose(task.loss_fn(logits, y[:4]), manual)


def test_schedule_counts_optimizer_steps():
    sched = WarmupSchedule("cosine", warmup_steps=4, total_steps=14)
    assert [sched(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert sched(9) == pytest.approx(0.5) and sched(14) == pytest.approx(0.0)
    linear = WarmupSchedule("linear", 0, 10, min_lr_ratio=0.1)
    assert linear(5) == pytest.approx(0.55)
    train = OmegaConf.structured(TrainConfig(lr=0.1, warmup_steps=2, max_steps=10, schedule="constant"))
    opt = make_optimizer([torch.nn.Parameter(torch.zeros(1))], train)
    sch = make_scheduler(opt, train)
    seen = []
    for _ in range(4):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    assert seen == pytest.approx([0.05, 0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="^train.schedule='cosin' is not one of constant, linear, cosine$"):
        make_scheduler(opt, OmegaConf.structured(TrainConfig(schedule="cosin")))


def test_credentials_never_reach_params():
    tree = {"trainer": {"options": {"hub_token": "hf_abc", "api_key": "k", "lr": 0.1, "password": None}}}
    flat = flatten(tree)
    assert flat["trainer.options.hub_token"] == REDACTED and flat["trainer.options.api_key"] == REDACTED
    assert flat["trainer.options.lr"] == "0.1" and flat["trainer.options.password"] == "None"
    assert redact({"a": [{"secret": "x"}]}) == {"a": [{"secret": REDACTED}]}
    assert math.isfinite(float(flat["trainer.options.lr"]))


def test_peak_sampler_keeps_the_largest_reading_and_reports_a_failing_reader():
    values = iter([3, 9, 4, 7])

    def read() -> int:
        value = next(values, None)
        if value is None:
            raise RuntimeError("device gone")
        return value

    sampler = PeakSampler(read, interval_s=0.001)
    deadline = time.monotonic() + 10
    while sampler.error is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sampler.stop() == 9 and sampler.samples == 4
    assert sampler.error == "RuntimeError: device gone"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the reading on a machine without a GPU driver")
def test_nvml_without_a_driver_is_a_reading_not_an_error():
    assert set(NvmlPeak(torch.device("cuda", 0)).finish()) == {"nvml_error"}


def test_same_device_ignores_a_cpu_index_only():
    assert same_device(torch.device("cpu"), torch.device("cpu", 0))
    assert same_device(torch.device("cuda", 1), torch.device("cuda:1"))
    assert not same_device(torch.device("cuda", 0), torch.device("cuda", 1))
    assert not same_device(torch.device("cpu"), torch.device("cuda", 0))


def test_timed_workers_are_pinned_to_the_last_cores_leaving_the_first_to_the_controller(monkeypatch):
    from evalkit import cpus

    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert cpus.pinned_cpus(1, 1) == [[3]]
    assert cpus.pinned_cpus(2, 1) == [[2], [3]]
    assert cpus.pinned_cpus(2, 2) == [[0, 1], [2, 3]]
    assert cpus.pinned_cpus(1, 4) is None          # one rank on every core: nothing to pin
    assert cpus.pinned_cpus(3, 2) is None          # more threads than cores: not pinned


def test_default_threads_share_the_usable_cpus_between_ranks_and_jobs_side_by_side(monkeypatch):
    """hardware.threads=0 gave every job of a joblib sweep all the machine's cores (n_jobs x cores threads), and
    a SLURM job the whole node's: now the CPUs this process may use, over its ranks and the sweep's jobs at once."""
    from evalkit import cpus, names

    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(8)))     # e.g. a SLURM job's share
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 64)
    monkeypatch.delenv(names.SIDE_BY_SIDE_ENV, raising=False)
    assert [cpus.default_threads(n) for n in (1, 2, 3, 16)] == [8, 4, 2, 1]
    monkeypatch.setenv(names.SIDE_BY_SIDE_ENV, "2")
    assert [cpus.default_threads(n) for n in (1, 2, 8)] == [4, 2, 1]


def test_workers_get_their_threads_and_openmp_threads_that_sleep_while_waiting(monkeypatch, tmp_path):
    """GNU OpenMP spins while it waits: beside one busy process a 300-step job took 105 s with two spinning
    threads, 18 s with OMP_WAIT_POLICY=PASSIVE (16 s on one thread). A caller's own policy is kept."""
    from evalkit.controller.launch import workers

    started = []
    monkeypatch.setattr(workers.subprocess, "Popen", lambda cmd, env, **kw: started.append(env))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    workers.WorkerGroup(str(tmp_path), str(tmp_path), workers.Placement(2, threads=1))
    assert [(e["OMP_NUM_THREADS"], e["MKL_NUM_THREADS"], e["OMP_WAIT_POLICY"]) for e in started] == \
        [("1", "1", "PASSIVE")] * 2
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    started.clear()
    workers.WorkerGroup(str(tmp_path), str(tmp_path), workers.Placement(1, threads=2))
    assert [(e["OMP_NUM_THREADS"], e["OMP_WAIT_POLICY"]) for e in started] == [("2", "ACTIVE")]
