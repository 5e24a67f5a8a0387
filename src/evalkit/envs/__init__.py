"""A wrapper at another version: its own virtual environment, whose interpreter runs that arm's workers.

`evalkit-env create transformers==4.45.2` builds one (`create.py`) under the environments' folder (`store.py`),
named after its requirements (`naming.py`); `trainer.env=<name>` makes the controller start the job's workers with
its interpreter (`select.py`). The environment installs only the pinned wrapper and what it needs that evalkit's own
environment does not have at the right version; torch, evalkit and everything else are evalkit's own, reached
through a `.pth` file placed after the environment's site-packages (what the environment installs shadows them).
Nothing here imports torch: the controller's process reads it.
"""
