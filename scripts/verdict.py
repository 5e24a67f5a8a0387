#!/usr/bin/env python
"""Judge every wrapper arm against its baseline arm; see `evalkit.verdict.cli` (same as `evalkit-verdict`)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # works before `pip install -e .`

from evalkit.verdict.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
