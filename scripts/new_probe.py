#!/usr/bin/env python
"""A new probe from the template (docs/probes/template/): its package and its YAML, nothing else to edit. The
verdict's table, first screen, report, findings documents, scenarios and ranking read it from the probe catalog
(evalkit.probes.catalog); docs/probes/adding.md says what to fill in.

    python scripts/new_probe.py compile --says "Under torch.compile"
    # writes src/evalkit/probes/compile/{__init__,settings,probe}.py and src/evalkit/conf/probe/compile.yaml
"""
from __future__ import annotations

import argparse
import keyword
import string
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "docs" / "probes" / "template"
MODULES = ("__init__.py", "settings.py", "probe.py")


def write_probe(name: str, package_dir: Path, conf_dir: Path, package: str, says: str,
                question: str = "what does it ask of a wrapper?") -> list[Path]:
    """The template filled in for probe `name`: its modules in `package_dir` (importable as `package`) and its YAML
    in `conf_dir`; the paths written. Refuses a name that is no identifier, or files that exist."""
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ValueError(f"{name!r}: a probe's name is a lower-case Python identifier (it names its package)")
    values = {"name": name, "Name": "".join(p.capitalize() for p in name.split("_")), "package": package,
              "Says": says, "Question": question}
    targets = {package_dir / m: TEMPLATE / f"{m}.tmpl" for m in MODULES}
    targets[conf_dir / f"{name}.yaml"] = TEMPLATE / "probe.yaml.tmpl"
    existing = [str(p) for p in targets if p.exists()]
    if existing:
        raise FileExistsError(f"already there, left as they are: {', '.join(existing)}")
    for path, template in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(string.Template(template.read_text()).substitute(values))
    return list(targets)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the probe's name: probe=<name>, its package, its verdict column")
    parser.add_argument("--says", default="", help="the first screen's words for it (default: the name)")
    parser.add_argument("--question", default="what does it ask of a wrapper?", help="its line in the docs' index")
    args = parser.parse_args(argv)
    try:
        written = write_probe(args.name, REPO / "src" / "evalkit" / "probes" / args.name,
                              REPO / "src" / "evalkit" / "conf" / "probe", f"evalkit.probes.{args.name}",
                              args.says or args.name.replace("_", " ").capitalize(), args.question)
    except (ValueError, FileExistsError) as exc:
        print(f"new_probe: {exc}", file=sys.stderr)
        return 2
    print("\n".join(f"wrote {p.relative_to(REPO)}" for p in written))
    print("next: its judge and plan in probe.py, its YAML's settings, docs/probes/<name>.md (docs/probes/adding.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
