"""The performance probe: the wrapper's per-step cost over the hand-written baseline, timed side by side."""
