"""What pip said, read into one line: why a requirement cannot install beside evalkit's torch (its dry run's
conflict), or what its report would do that an environment must not (install torch or evalkit again)."""
from __future__ import annotations

import re
from typing import Any

from evalkit.envs.naming import canonical

REUSED = ("torch", "evalkit")       # an environment reuses evalkit's own, never installs its own
LONGEST = 400                       # characters of a refusal: pip's version lists run to pages


def conflict_lines(output: str) -> list[str]:
    """The lines under pip's 'The conflict is caused by:' but the user's own request and constraints."""
    lines, inside = [], False
    for line in output.splitlines():
        if line.strip() == "The conflict is caused by:":
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            if not line.strip().startswith("The user requested"):
                lines.append(line.strip())
    return list(dict.fromkeys(lines))


def refusal(requirements: list[str], output: str, torch: str) -> str:
    """One line: the conflict pip found (with torch named when it is torch), else pip's first error."""
    asked = " ".join(requirements)
    conflicts = conflict_lines(output)
    on_torch = [line for line in conflicts if re.search(r"\bdepends on torch\b", line)]
    if on_torch:
        return _cap(f"{asked} cannot install beside torch {torch} (evalkit's workers reuse it): {'; '.join(on_torch)}")
    if conflicts:
        return _cap(f"{asked} cannot install: conflicting dependencies: {'; '.join(conflicts)}")
    errors = [line[len("ERROR:"):].strip() for line in output.splitlines() if line.startswith("ERROR:")]
    return _cap(f"{asked} cannot install: {errors[0] if errors else 'pip failed (see the log in the environment)'}")


def report_problem(report: dict[str, Any], torch: str) -> str | None:
    """Why the dry run's plan cannot make an environment for evalkit's workers, or None."""
    for item in report.get("install", []):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if canonical(name) in REUSED:
            return (f"pip would install {name} {version} into the environment, where evalkit's workers reuse "
                    f"evalkit's own ({'torch ' + torch if canonical(name) == 'torch' else name})")
    return None


def _cap(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= LONGEST else line[:LONGEST - 1] + "…"
