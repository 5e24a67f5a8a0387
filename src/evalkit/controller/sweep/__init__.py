"""A sweep (a Hydra multirun): its MLflow parent run, its ledger of jobs, its file for evalkit-ship, its summary."""
