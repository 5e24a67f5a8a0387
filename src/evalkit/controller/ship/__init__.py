"""`evalkit-ship DIR`: what a job or a sweep left on disk, recorded once the store answers (a job's: job/ship.py)."""
