"""`python -m evalkit.worker <run dir>`: one rank, started by the controller's launcher."""
import sys

from evalkit.worker.run import die_with_controller, run

if __name__ == "__main__":
    die_with_controller()
    sys.exit(run(sys.argv[1]))
