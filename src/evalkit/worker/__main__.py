"""`python -m evalkit.worker <run dir>`: one rank, started by the controller's launcher."""
import os
import sys

if __name__ == "__main__":
    # A timed job's worker runs on the CPUs the controller chose, from before torch creates its threads.
    if os.environ.get("EVALKIT_CPUS") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in os.environ["EVALKIT_CPUS"].split(",")})

    from evalkit.worker.run import die_with_controller, run

    die_with_controller()
    sys.exit(run(sys.argv[1]))
