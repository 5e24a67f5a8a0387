"""The caliber tag is formatted in one place (evalkit.caliber): its format, and a job's caliber built with it."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from evalkit.caliber import caliber_tag
from evalkit.controller.job.run import caliber


def test_the_tag_is_the_kind_then_key_value_parts_in_the_order_given():
    assert caliber_tag("truth", hw="cpu", bs=8, ws=[1, 2], opt=("sgd", "adamw"), budget=0.05, l1=1e-05) == \
        "truth|hw=cpu|bs=8|ws=1,2|opt=sgd,adamw|budget=0.05|l1=1e-05"
    assert caliber_tag(hw="cuda", ws=1) == "hw=cuda|ws=1"           # no kind: the parts alone


def test_a_switch_is_its_key_alone_and_an_absent_part_is_left_out():
    assert caliber_tag("truth", ws=OmegaConf.create([1, 2]), short_epoch=True, resume=None, clip=False) == \
        "truth|ws=1,2|short_epoch"


def test_a_part_that_would_split_the_tag_is_refused():
    with pytest.raises(ValueError, match="may not hold '\\|'"):
        caliber_tag("turns", index="a|b")


def test_a_jobs_caliber_names_its_hardware_threads_batch_accumulation_precision_world_size_and_warm_up():
    cfg = OmegaConf.create({"hardware": {"name": "cpu", "threads": 2}, "train": {"batch_size": 32, "grad_accum": 4},
                            "precision": {"name": "bf16_mixed"}, "distributed": {"world_size": 2},
                            "observe": {"warmup_steps": 5}})
    assert caliber(cfg) == "hw=cpu|thr=2|bs=32|accum=4|prec=bf16_mixed|ws=2|warmup=5"
