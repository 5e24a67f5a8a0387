"""`python -m evalkit [overrides]`: the `evalkit` command, for an environment without its console script."""
from evalkit.cli import main

if __name__ == "__main__":
    main()
