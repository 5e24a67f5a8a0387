"""Observation from the outside: torch hooks on the model, the loss, the optimizer and the scheduler record
every micro-batch and optimizer step (samples, LR, loss, gradient norm, timing, memory) to the spool.
Observers never ship, never import an adapter and never talk to a tracking store.
"""
