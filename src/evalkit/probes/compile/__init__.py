"""The compile probe: its settings and what the verdict shows of it (settings.py), its plan and judge (probe.py)."""
