"""The compile probe's e2e runs (probe_runs.PROBE_RUNS["compile"]): the baseline (one loop compiled by hand, eager
and compiled, timed for a few rounds), and tests/planted/compile_loop.py dropping the compile request (`ignores`) or
halving every compiled update (`halves`), untimed."""
COMPILE_LOOP = ["trainer=baseline", "trainer._target_=compile_loop.CompileLoopAdapter", "trainer.name=compile_loop",
                "probe.rounds=0"]
RUNS = {"baseline": ["trainer=baseline", "probe.rounds=16"],
        "ignores": COMPILE_LOOP + ["+trainer.options.plant=ignores"],
        "halves": COMPILE_LOOP + ["+trainer.options.plant=halves"]}
OUTCOMES = {"baseline": "pass", "ignores": "fail", "halves": "fail"}
UNPLANTED = ("baseline",)
