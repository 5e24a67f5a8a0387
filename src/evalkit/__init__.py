"""evalkit: evaluate high-level PyTorch training wrappers against a hand-written loop, with evidence."""
__version__ = "0.1.0"
