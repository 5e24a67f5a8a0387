"""Observation from the outside: torch hooks on the model, the loss, the optimizer and the scheduler record
every micro-batch and optimizer step (samples, LR, loss, gradient norm, timing, memory) to the spool.
`observer.Observer` attaches the hooks (`hooks.py`) and feeds them to one small collector per kind of
observation (samples, dtypes, steps, validation, timing, memory, params); a new observation is a new
collector fed by the same hooks. Observers never ship, never import an adapter and never talk to a tracking
store.
"""
