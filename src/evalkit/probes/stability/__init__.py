"""The stability probe: kill and resume, damaged checkpoints, out of memory, a long run."""
