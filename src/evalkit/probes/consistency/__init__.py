"""The consistency probe: the wrapper's training against the baseline's, stage by stage.

plan.py: the caliber and the jobs; steps.py: stage 1, step by step; finals.py: stages 2 and 3, the final
validation metric through the analyzer's equivalence tests; judge.py: the verdict; probe.py: what the runner sees.
"""
