"""Start one node's worker ranks as processes: fresh interpreters, or forked from a warm server."""
