"""One job's controller: its run directory, its MLflow run, its ranks over one node or several, its spool shipped."""
