"""Tasks (model, synthetic data, loss, metric; `catalog`) and the data order every adapter follows (`order`),
built from a seed alone. They know no hooks and sit below everything that uses them.
"""

CALIBER_TASK = "mlp_regression"   # the task the probes' calibers are written for; any other is a team's own
