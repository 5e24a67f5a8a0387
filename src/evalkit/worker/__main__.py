"""`python -m evalkit.worker <run dir>`: one rank, started by the controller's launcher."""
import os
import sys

if __name__ == "__main__":
    from evalkit.worker import working_directory_last

    working_directory_last()
    # A timed job's worker runs on the CPUs the controller chose, from before torch creates its threads.
    if os.environ.get("EVALKIT_CPUS") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in os.environ["EVALKIT_CPUS"].split(",")})

    from evalkit.worker.run import die_with_controller, run

    die_with_controller()
    code = run(sys.argv[1])
    # Everything the job records is written and closed by now (run's spool, the process group): skip the
    # interpreter's teardown of torch and the wrapper, 0.6 s (torch) to 1.7 s (Lightning) here, which the
    # controller would wait for before it ends the run. A worker forked from a warm server ends the same way.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
