"""The functional-completeness probe: does the wrapper do, in evalkit's hands, what a training run must do?

plan.py: the caliber and the jobs (the wrapper, the baseline as the checkpoint-size reference, a resume from a
copy of the wrapper's own checkpoints, each precision, world size 2, a process group evalkit created);
listing.py: the checkpoint listings the observers record; items.py: what an item is and the readings its checks
share; checks.py: the items every run must pass (and `check_all`); claims.py: the combinations the adapter claims;
workarounds.py: items the adapter reaches only through a declared workaround; judge.py: the result (a finding
per failed item, the checkpoint size against the baseline's); probe.py: what the runner sees.
"""
