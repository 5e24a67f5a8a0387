"""The semantic probe: what the wrapper's training loop did, step by step, against what a careful loop must do.

plan.py: the truth caliber and its jobs; oracle.py and update_rule.py: the careful loop in float64; checks.py and
explain_*.py: the records against it, and the alternative semantics that fit a difference; judge.py: the findings;
probe.py: what the runner sees.
"""
