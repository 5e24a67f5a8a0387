"""Where the added time and memory go (attribution.py), on two synthetic profiles with a planted difference."""
from __future__ import annotations

import pytest

from evalkit.probes.performance.attribution import added_memory, added_time, module_of, section


def profile(extra_s: float = 0.0, extra_bytes: int = 0) -> dict:
    functions = [{"file": "torch/nn/modules/linear.py", "line": 120, "function": "forward", "calls": 300,
                  "own_s": 0.30, "cumulative_s": 0.4},
                 {"file": "~builtin", "line": 0, "function": "<method 'run_backward'>", "calls": 100,
                  "own_s": 0.50, "cumulative_s": 0.5}]
    memory = [{"file": "torch/nn/modules/linear.py", "bytes": 10 * 2**20, "blocks": 10}]
    if extra_s:
        functions.append({"file": "fakewrap/loops/fit_loop.py", "line": 9, "function": "advance", "calls": 100,
                          "own_s": extra_s, "cumulative_s": extra_s})
    if extra_bytes:
        memory.append({"file": "fakewrap/logger.py", "bytes": extra_bytes, "blocks": 3})
    return {"steps": 100, "functions": functions, "memory": memory}


def test_the_wrappers_own_function_is_named_with_its_cost_per_step():
    time = added_time(profile(), profile(extra_s=0.08))
    assert time["functions"][0] == ("fakewrap.loops.fit_loop:advance", pytest.approx(0.8))
    assert time["packages"] == [("fakewrap", pytest.approx(0.8))] and time["builtins"] == []
    assert dict(time["total"])["wrapper"] == pytest.approx(dict(time["total"])["baseline"] + 0.8)


def test_an_identical_profile_adds_nothing():
    assert added_time(profile(), profile())["functions"] == [] and added_memory(profile(), profile()) == []


def test_memory_held_by_the_wrappers_file_is_named():
    assert added_memory(profile(), profile(extra_bytes=3 * 2**20)) == [("fakewrap/logger.py", pytest.approx(3.0))]


def test_the_section_reads_as_a_table():
    text = section(profile(), profile(extra_s=0.08, extra_bytes=2**20), "d32")
    assert "| `fakewrap.loops.fit_loop:advance` | +0.800 |" in text and "`fakewrap/logger.py` +1.00 MiB" in text


def test_module_names():
    assert module_of("lightning/pytorch/loops/fit_loop.py") == "lightning.pytorch.loops.fit_loop"
    assert module_of("fakewrap/__init__.py") == "fakewrap" and module_of("~builtin") == "~builtin"


def test_a_c_function_is_named_apart_from_the_python_ones():
    slower = profile()
    slower["functions"][1] = {**slower["functions"][1], "own_s": 0.60}     # run_backward 1 ms more per step
    time = added_time(profile(), slower)
    assert time["functions"] == [] and time["builtins"][0][1] == pytest.approx(1.0)
    assert "Built-in and C functions" in section(profile(), slower, "d32")
