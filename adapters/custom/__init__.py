"""The same two customizations written for each wrapper the way its documentation says (probe=customization):
`<trainer>_loss.py` trains on the task loss plus `l1_weight` times the mean absolute output, `<trainer>_callback.py`
reports the parameters' L2 norm after every optimizer step (`TrainJob.log_value`) and ends training after
`stop_at_step` steps. Each is a small addition beside the wrapper's plain adapter; the probe counts its lines."""
