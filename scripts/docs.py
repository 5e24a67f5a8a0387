"""The documents generated from their sources, and the checks that keep every document true.

    python scripts/docs.py write      # every generated document (or part of one) from its source
    python scripts/docs.py check      # exit 1, naming each problem: a stale document, a broken link, a README too long
    python scripts/docs.py snapshot --tracking-uri sqlite:///mlflow.db   # after `evalkit-eval`: its results, then write

Generated, each from one source (`generated`):
- docs/records.md from src/evalkit/names.py (its comments are the descriptions: records_doc.py);
- docs/results/<versions>.md from the snapshot beside it, `<versions>.json` (evalkit/verdict/findings_doc.py);
- README.md's verdict excerpt (between `<!-- verdict-excerpt -->` markers) from the newest snapshot;
- docs/architecture.md's import rules (between `<!-- import-rules -->` markers) from pyproject.toml's contracts;
- docs/probes/README.md's index of the probes (between `<!-- probe-index -->` markers) from the probe catalog (each
  probe's `Dimension.question`, in the verdict's column order).
Checked besides: README.md has at most 150 lines and its test command is .ci/run's; every name in names.py has a
comment; every relative link in README.md and docs/ points at a file and heading that exist (doc_links.py);
docs/architecture.md's package map names every module and package of src/evalkit/, and those of its MAPPED packages
all the way down, and nothing else.
docs/probes/performance.md's table is regenerated from a store by scripts/performance_table.py, not here.

Exit codes: 0 done (or nothing to report), 1 a problem (check), 2 bad input (one message).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_links import broken_links  # noqa: E402
from records_doc import render as render_records  # noqa: E402
from records_doc import undescribed  # noqa: E402

from evalkit.probes.catalog import dimensions  # noqa: E402
from evalkit.verdict.findings_doc import render as render_results  # noqa: E402
from evalkit.verdict.findings_doc import results_name, take_snapshot, verdict_excerpt  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NAMES = Path("src/evalkit/names.py")
RESULTS = Path("docs/results")
README_MAX_LINES = 150
ARCHITECTURE = Path("docs/architecture.md")
MAPPED = ("contract", "controller")   # packages whose every module and package the package map lists as well
# Files a document shows before they exist, each with who makes it (a link to one is not broken until then).
PENDING: dict[str, str] = {}   # documents a link may name before they exist: path -> who makes them


def block(text: str, name: str, body: str) -> str:
    """`text` with the part between `<!-- name -->` and `<!-- /name -->` replaced by `body`."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} markers: add them where the generated part goes")
    head, rest = text.split(start, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{rest.split(end, 1)[1]}"


def import_rules(pyproject: str) -> str:
    """The import-linter contracts of pyproject.toml, one bullet each: what may not import what."""
    out = []
    for c in tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]:
        if c["type"] == "forbidden":
            rule = f"{_modules(c['source_modules'])} never import {_modules(c['forbidden_modules'])}"
        elif c["type"] == "layers":
            inside = f"within {_modules(c['containers'])}, " if c.get("containers") else ""
            rule = f"{inside}each layer imports only those below it: {' > '.join(map(str, c['layers']))}"
        else:
            rule = "; ".join(f"{k}: {_modules(v) if isinstance(v, list) else v}" for k, v in c.items()
                             if k not in ("name", "type"))
        out.append(f"- {c['name']} ({c['type']}): {rule}.")
    return "\n".join(out)


def probe_index() -> str:
    """docs/probes/README.md's table: each probe, its page and the question it asks, from the probe catalog."""
    rows = [f"| [{d.name}]({d.name}.md) | {d.question} |" for d in dimensions()]
    return "\n".join(["| probe | the question |", "|---|---|", *rows])


def _modules(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def snapshots(repo: Path) -> list[tuple[Path, dict]]:
    """(path, snapshot) of every stored evaluation, oldest first (by the date taken, then name)."""
    found = [(p, json.loads(p.read_text())) for p in sorted((repo / RESULTS).glob("*.json"))]
    return sorted(found, key=lambda ps: (ps[1].get("taken") or "", ps[0].name))


def names_module(repo: Path) -> ModuleType:
    """The checkout's names.py, loaded from its file (its values, as the document shows them)."""
    spec = importlib.util.spec_from_file_location("evalkit_names_for_docs", repo / NAMES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated(repo: Path = REPO) -> dict[Path, str]:
    """path -> the text it must hold, for every generated document (a document with a generated part: whole)."""
    out = {repo / "docs/records.md": render_records((repo / NAMES).read_text(), names_module(repo), NAMES.as_posix())}
    found = snapshots(repo)
    for path, snap in found:
        out[path.with_suffix(".md")] = render_results(snap)
    if found:
        newest = found[-1][0].with_suffix(".md").relative_to(repo).as_posix()
        out[repo / "README.md"] = block((repo / "README.md").read_text(), "verdict-excerpt",
                                        verdict_excerpt(found[-1][1], newest))
    out[repo / "docs/architecture.md"] = block((repo / "docs/architecture.md").read_text(), "import-rules",
                                               import_rules((repo / "pyproject.toml").read_text()))
    out[repo / "docs/probes/README.md"] = block((repo / "docs/probes/README.md").read_text(), "probe-index",
                                                probe_index())
    return out


def readme_problems(readme: str, ci: str) -> list[str]:
    """The README's own rules: short, and its test command the one CI runs."""
    lines = readme.splitlines()
    problems = [f"README.md has {len(lines)} lines: at most {README_MAX_LINES} (the rest belongs in docs/)"] \
        if len(lines) > README_MAX_LINES else []
    command = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")][-1]
    commands = [line for line in lines[:16] if line.startswith("python3.11 -m venv")]
    if len(commands) != 2 or commands[1] != command:
        problems.append("README.md's first lines must hold the two set-up commands, the second exactly .ci/run's "
                        f"last line: {command}")
    return problems


def package_map(text: str) -> set[str]:
    """The paths under src/evalkit/ that the package map of docs/architecture.md names (`cli.py`, `controller/job`,
    `controller/job/run.py`): an entry line is its name, or names joined by ", ", two spaces deeper per level, then
    its description; a line indented further continues the description above."""
    body = text.split("## The packages\n```\n", 1)[1].split("```", 1)[0]
    found: set[str] = set()
    parents: list[str] = []
    for line in body.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        entry = re.match(r"([\w.]+/?(?:, [\w.]+/?)*)(?: {2,}|$)", line.lstrip(" "))
        if not entry or indent < 2 or indent % 2 or indent > 2 * (len(parents) + 1):
            continue
        parents = parents[:indent // 2 - 1]
        names = entry.group(1).split(", ")
        found.update("/".join([*parents, name.rstrip("/")]) for name in names)
        if len(names) == 1 and names[0].endswith("/"):
            parents.append(names[0].rstrip("/"))
    return found


def package_entries(src: Path) -> set[str]:
    """What the package map must name: every module and package of `src` (src/evalkit/), and inside MAPPED every
    module and package all the way down."""
    def children(folder: Path) -> list[Path]:
        return [p for p in folder.iterdir() if (p.suffix == ".py" and p.name != "__init__.py")
                or (p.is_dir() and not p.name.startswith(("_", ".")))]

    found, todo = {p.name for p in children(src)}, [p for p in children(src) if p.name in MAPPED]
    while todo:
        folder = todo.pop()
        for p in children(folder):
            found.add(p.relative_to(src).as_posix())
            if p.is_dir():
                todo.append(p)
    return found


def package_map_problems(repo: Path) -> list[str]:
    """A module or package the map leaves out, and an entry that names none."""
    listed, there = package_map((repo / ARCHITECTURE).read_text()), package_entries(repo / "src" / "evalkit")
    return ([f"{ARCHITECTURE}: its package map does not list src/evalkit/{p}" for p in sorted(there - listed)]
            + [f"{ARCHITECTURE}: its package map lists src/evalkit/{p}, which does not exist" for p in
               sorted(listed - there)])


def problems(repo: Path = REPO) -> list[str]:
    """Everything `check` reports, one line each."""
    found = [f"{p.relative_to(repo)} is stale: run `python scripts/docs.py write`"
             for p, text in generated(repo).items() if not p.exists() or p.read_text() != text]
    found += [f"{p.relative_to(repo)}: its name is not its versions' ({results_name(s)}.json): rename it"
              for p, s in snapshots(repo) if p.stem != results_name(s)]
    found += [f"{NAMES}: {n} has no comment (its description in docs/records.md)"
              for n in undescribed((repo / NAMES).read_text(), names_module(repo))]
    found += readme_problems((repo / "README.md").read_text(), (repo / ".ci/run").read_text())
    found += package_map_problems(repo)
    for doc in [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]:
        found += broken_links(doc, repo, PENDING)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("write", "check", "snapshot"))
    parser.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"))
    parser.add_argument("--experiment", default="evalkit")
    args = parser.parse_args(argv)
    try:
        if args.action == "check":
            found = problems()
            for line in found:
                print(f"docs: {line}", file=sys.stderr)
            return 1 if found else 0
        if args.action == "snapshot":
            from mlflow.tracking import MlflowClient

            os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
            snap = take_snapshot(MlflowClient(args.tracking_uri), args.experiment, datetime.date.today().isoformat())
            path = REPO / RESULTS / f"{results_name(snap)}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
            print(f"{len(snap['probes'])} probe runs and {len(snap['verdict'])} verdict rows -> {path}")
        for path, text in generated().items():
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(f"-> {path.relative_to(REPO)}")
    except (OSError, ValueError, KeyError) as exc:
        print(f"docs: {args.action}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
