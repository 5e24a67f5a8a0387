"""The maintenance probe's judge: the standard run's deprecation warnings and the measured environment, each
figure against its documented threshold (`probe.maintenance.*`, stored with the measurements).

- deprecations: distinct deprecation/future warnings raised by the wrapper's own code (its distribution or one of
  its dependencies, torch and numpy excepted), or raised elsewhere on a line of it (it calls an API torch
  deprecated), during the standard run;
- imports: median seconds and resident MiB of importing it in a fresh process (torch already imported);
- dependencies: the packages it adds beside what every arm installs (torch with its own dependencies, numpy),
  their size on disk with its own; a requirement on torch/numpy the installed version does not satisfy, or an
  upper bound that would block the next minor release of either (a `<4` on torch 2.x blocks nothing);
- releases: breaking releases over the last year (major; minor for 0.x), and the installed version's age when it
  is no longer the latest. Unavailable release figures (offline, no cache) are said, never guessed, never failed.

A pass needs every figure that applies: the standard run's deprecations always; for a wrapper (a trainer naming a
distribution) its import cost, dependencies and release history too. Where one is missing and nothing failed, the
result is inconclusive, its first note naming each missing figure and how to get it; a finding fails
whatever is missing. Plain torch (the baseline) names no distribution: only its standard run applies.

Thresholds (`probe.maintenance.*`, CALIBRATION below): team budgets, absolute by nature (the baseline adds no
import, dependency or release to compare with), each with its one line in the result's notes. The import figures
are the only noisy ones: a limit within the repeats' range is no decision (inconclusive: more repeats).
"""
from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding, ProbeResult
from evalkit.probes.maintenance.plan import STANDARD_RUN

MIB = 2**20
# How each threshold is calibrated, one line each (shown in the result's notes).
CALIBRATION = {
    "max_deprecations": "a team budget on a count, exact (no noise): distinct warnings from the wrapper's own code in "
                        "one standard run",
    "max_import_s": "a team budget; the figure is added on top of torch imported first (the baseline's own import, "
                    "measured in the same process); noise: decided only when every repeat falls on one side of it",
    "max_import_mib": "a team budget; added on top of torch imported first; decided only when every repeat falls on "
                      "one side of it",
    "max_dependencies": "a team budget on a count read from installed metadata, exact; torch's own closure excluded "
                        "(what the baseline installs too)",
    "max_install_mib": "a team budget on bytes on disk, exact; torch's own closure excluded",
    "max_breaking_per_year": "a team budget on a count from the package index, exact as of its date",
    "max_release_age_days": "a team budget in days from the package index, exact as of its date",
}


def judge(jobs: list[JobEvidence], measured: dict[str, Any]) -> ProbeResult:
    limits = measured.get("limits", {})
    figures: dict[str, float] = {}
    findings: list[Finding] = []
    notes = list(measured.get("notes", []))
    sections: list[str] = []
    standard = next((j for j in jobs if j.name == STANDARD_RUN), None)
    parts: list[str] = []

    own = _own_distributions(measured)
    missing: list[str] = []
    undecided: list[str] = []
    if standard is None or standard.status != "FINISHED":
        why = "not run" if standard is None else f"ended {standard.status}: {' '.join(standard.failure_reason.split())}"
        notes.append(f"deprecation warnings not counted: the standard run {why}")
        missing.append(f"deprecations (the standard run {why}: fix its cause and run the probe again)")
    else:
        raised = standard.summary.get("deprecations", [])
        mine = [w for w in raised if is_own(w, own)]
        figures["deprecations"] = float(len(mine))
        figures["deprecation_occurrences"] = float(sum(int(w.get("count", 0)) for w in mine))
        parts.append(f"{len(mine)} deprecations")
        if len(mine) > int(limits.get("max_deprecations", 3)):
            findings.append(_over("deprecations", f"{len(mine)} distinct deprecation warnings from the wrapper",
                                  f"limit {limits.get('max_deprecations')} (probe.maintenance.max_deprecations)"))
        if raised:
            sections.append(warnings_table(raised, own))

    imports = measured.get("imports")
    if imports:
        if imports.get("error"):
            notes.append(f"import cost not measured: {imports['error']}")
            missing.append(f"import cost ({imports['error']})")
        else:
            seconds, mib = float(imports["median_seconds"]), float(imports["median_mib_added"])
            figures.update({"import_s": seconds, "import_mib": mib})
            parts.append(f"import {seconds:.1f} s/+{mib:.0f} MiB")
            for code, value, repeats, limit, text in (
                    ("import_s", seconds, imports.get("seconds") or [seconds], float(limits.get("max_import_s", 6.0)),
                     f"importing it takes {seconds:.2f} s (median)"),
                    ("import_mib", mib, imports.get("mib_added") or [mib], float(limits.get("max_import_mib", 400.0)),
                     f"importing it adds {mib:.0f} MiB resident")):
                unit = "s" if code == "import_s" else "MiB"
                if min(repeats) <= limit < max(repeats):
                    undecided.append(f"{code}: its {len(repeats)} repeats ({min(repeats):.3g}-{max(repeats):.3g} "
                                     f"{unit}) straddle the limit {limit:g} {unit}: raise "
                                     "probe.maintenance.import_repeats or measure on a quieter machine")
                elif value > limit:
                    findings.append(_over(code, text, f"limit {limits.get('max_' + code)} {unit} "
                                                      f"(probe.maintenance.max_{code})"))
    elif measured.get("distribution") and measured.get("version"):
        missing.append("import cost (the trainer names no module to import: set trainer.modules)")

    deps = measured.get("dependencies")
    if deps:
        findings += _dependency_findings(deps, measured.get("core", []), limits, figures, parts, sections)

    releases = measured.get("releases")
    if releases:
        findings += _release_findings(releases, limits, figures, parts, notes)
        if releases.get("source") == "unavailable":
            missing.append(f"release history ({releases.get('reason')}: run the probe with network access to the "
                           f"package index ({limits.get('index_url', 'probe.maintenance.index_url')}), or offline "
                           "with the cache such a run wrote (probe.maintenance.cache_dir)")
    dist = measured.get("distribution")
    if dist and not measured.get("version"):
        said = next((n for n in measured.get("notes", []) if n.startswith(f"{dist} is not installed")), "")
        missing.append(f"import cost, dependencies and release history ({said or f'{dist} is not installed'})")
    elif dist and not deps:
        missing.append(f"dependencies ({dist}'s metadata could not be read: see the notes)")
    elif dist and not releases:
        missing.append("release history (not measured)")

    for cand in measured.get("candidates", []):
        if not cand.get("installed"):
            notes.append(candidate_line(cand))
    title = f"{dist} {measured.get('version', '')}".strip()
    if sections or parts:
        sections.insert(0, f"**{title or 'plain torch'}**: " + ("; ".join(parts) or "no figures"))
    notes += [f"threshold {k} = {limits[k]}: {line}" for k, line in CALIBRATION.items() if k in limits]
    inconclusive = not findings and bool(missing or undecided)
    if inconclusive:
        notes.insert(0, "; ".join(
            ([f"a pass needs every figure; not measured: {'; '.join(missing)}"] if missing else []) + undecided))
    return ProbeResult("maintenance", passed=not findings and not inconclusive, findings=findings, figures=figures,
                       notes=notes, headline=", ".join(parts) if parts else "nothing measured", sections=sections,
                       inconclusive=inconclusive)


def _norm(name: str | None) -> str:
    return canonicalize_name(name) if name else ""


def is_own(warning: dict, own: set[str]) -> bool:
    """Raised by the wrapper's code, or raised elsewhere (a deprecation decorator, torch) on a line of its code."""
    return _norm(warning.get("distribution")) in own or _norm(warning.get("attributed_distribution")) in own


def _own_distributions(measured: dict[str, Any]) -> set[str]:
    """The wrapper's distribution and its dependencies, torch/numpy and their dependencies excepted."""
    dist = measured.get("distribution")
    if not dist:
        return set()
    core = {_norm(n) for n in measured.get("core", [])}
    deps = {_norm(p["name"]) for p in (measured.get("dependencies") or {}).get("packages", [])}
    return ({_norm(dist)} | deps) - core


def _over(code: str, title: str, size: str) -> Finding:
    return Finding(f"maintenance.{code}", title, STANDARD_RUN if code == "deprecations" else "environment", None,
                   size=size, explainable=False)


def _dependency_findings(deps: dict, core: list[str], limits: dict, figures: dict, parts: list,
                         sections: list) -> list[Finding]:
    core_names = {_norm(n) for n in core}
    added = [p for p in deps.get("packages", []) if _norm(p["name"]) not in core_names]
    size = (deps.get("root_size_bytes") or 0) + sum(p.get("size_bytes") or 0 for p in added)
    figures.update({"dependencies": float(len(added)), "dependencies_all": float(deps.get("count", 0)),
                    "install_mib": size / MIB})
    parts.append(f"{len(added)} deps ({size / MIB:.0f} MiB)")
    out = []
    if len(added) > int(limits.get("max_dependencies", 40)):
        out.append(_over("dependencies", f"it adds {len(added)} packages beside torch",
                         f"limit {limits.get('max_dependencies')} (probe.maintenance.max_dependencies)"))
    if size / MIB > float(limits.get("max_install_mib", 600.0)):
        out.append(_over("install_mib", f"it installs {size / MIB:.0f} MiB beside torch",
                         f"limit {limits.get('max_install_mib')} MiB (probe.maintenance.max_install_mib)"))
    for c in deps.get("constraints", []):
        line = f"{c['declared_by']} requires {c['package']}{c['specifier']} (installed {c['installed_version']})"
        if c.get("satisfied") is False:
            out.append(_over("core_conflict", f"{line}: not satisfied", "a requirement the installed core breaks"))
        elif blocks_next_minor(c["specifier"], c.get("installed_version")) \
                and not limits.get("allow_core_upper_bounds", False):
            out.append(_over("core_upper_bound", f"{line}: blocks the next minor release",
                             "probe.maintenance.allow_core_upper_bounds=false"))
    names = ", ".join(f"{p['name']} {p['version']}" for p in added) or "none"
    sections.append(f"Dependencies it adds beside torch ({len(added)}; {deps.get('count', 0)} in its whole "
                    f"closure): {names}" + (f"\n\nMissing from this environment: "
                                            f"{', '.join(m['requirement'] for m in deps.get('missing', []))}"
                                            if deps.get("missing") else ""))
    return out


def blocks_next_minor(specifier: str, installed: str | None) -> bool:
    """Whether `specifier` excludes the release after `installed`'s minor (2.13.0 -> 2.14.0)."""
    if not installed:
        return False
    try:
        version = Version(installed)
        following = Version(f"{version.major}.{version.minor + 1}.0")
        return following not in SpecifierSet(specifier)
    except (InvalidVersion, ValueError):
        return False


def _release_findings(rel: dict, limits: dict, figures: dict, parts: list, notes: list) -> list[Finding]:
    if rel.get("source") == "unavailable":
        notes.append(f"release history unavailable ({rel.get('reason')}): its figures are not scored")
        parts.append("releases: unavailable")
        return []
    as_of = (rel.get("as_of") or "")[:10]
    marked = f" (cached, as of {as_of})" if rel.get("source") == "cache" else ""
    if marked:
        notes.append(f"release figures from the cache as of {as_of}" + (f": {rel['reason']}" if rel.get("reason")
                                                                          else ""))
    breaking = rel.get("breaking_per_year")
    out = []
    if breaking is not None:
        figures["breaking_per_year"] = float(breaking)
        figures["releases_per_year"] = float(rel.get("releases") or 0)
        parts.append(f"{breaking} breaking/yr of {rel.get('releases')} releases{marked}")
        if breaking > float(limits.get("max_breaking_per_year", 2.0)):
            out.append(_over("breaking", f"{breaking} breaking releases in the last year ({rel.get('breaking_rule')})",
                             f"limit {limits.get('max_breaking_per_year')} (probe.maintenance.max_breaking_per_year)"))
    age = rel.get("days_since_installed_release")
    if age is not None:
        figures["installed_age_days"] = float(age)
        behind = rel.get("releases_since_installed") or 0
        if behind and age > float(limits.get("max_release_age_days", 365)):
            out.append(_over("stale", f"the installed {rel.get('installed_version')} is {age:.0f} days old, "
                             f"{behind} releases behind {rel.get('latest_version')}",
                             f"limit {limits.get('max_release_age_days')} days "
                             "(probe.maintenance.max_release_age_days)"))
    return out


def warnings_table(raised: list[dict], own: set[str]) -> str:
    lines = ["| count | category | raised by | on a line of | the wrapper's | message |", "|---|---|---|---|---|---|"]
    for w in raised[:30]:
        mine = "yes" if is_own(w, own) else "no"
        where = (w.get("attributed_to") or [""])[0]
        lines.append(f"| {w.get('count')} | {w.get('category')} | {w.get('module')} ({w.get('distribution')}) | "
                     f"{_short(where)} ({w.get('attributed_distribution')}) | {mine} | "
                     f"{str(w.get('message', '')).replace('|', '/').replace(chr(10), ' ')[:160]} |")
    if len(raised) > 30:
        lines.append(f"| … | | | | | {len(raised) - 30} more |")
    return "\n".join(lines)


def _short(where: str) -> str:
    """'…/site-packages/lightning/pytorch/loops/x.py:12' -> 'lightning/pytorch/loops/x.py:12'."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    return where


def candidate_line(cand: dict) -> str:
    name = cand["name"]
    if cand.get("source") == "unavailable":
        return f"candidate {name} (not installed): its requirements are unavailable ({cand.get('reason')})"
    when = f", as of {(cand.get('as_of') or '')[:10]}" if cand.get("source") == "cache" else ""
    if cand.get("conflicts"):
        return (f"candidate {name} {cand.get('latest_version')} (not installed) cannot be installed beside this "
                f"environment{when}: " + "; ".join(cand["conflicts"]))
    return f"candidate {name} {cand.get('latest_version')} (not installed): no conflict with torch/numpy{when}"
