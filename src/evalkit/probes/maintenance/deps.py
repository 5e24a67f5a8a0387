"""Dependencies of an installed distribution, read from its package metadata (no network, no imports).

`dependency_closure` walks `Requires-Dist` transitively. Markers are evaluated for this interpreter with `extra`
unset, so requirements that only an extra pulls in are skipped. Names are compared normalised (PEP 503). Upper
bounds on the packages a wrapper must share with the rest of the stack (torch, numpy) are listed with the
installed version's verdict: a bound the installed version breaks is a conflict waiting to happen.
"""
from __future__ import annotations

import importlib.metadata as md
from dataclasses import asdict, dataclass, field

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

WATCHED = ("torch", "numpy")
UPPER_BOUND_OPERATORS = ("<", "<=", "==", "~=", "===")   # `==1.*` bounds from above too; `!=` does not


@dataclass
class Package:
    name: str                       # normalised (PEP 503)
    version: str
    size_bytes: int | None          # None: the distribution has no RECORD to sum


@dataclass
class MissingRequirement:
    requirement: str                # as declared, e.g. "fakedep>=1"
    required_by: str


@dataclass
class Constraint:
    """A requirement with an upper bound on a watched package, and whether the installed version meets it."""
    package: str
    declared_by: str
    specifier: str
    installed_version: str | None   # None: the package is not installed
    satisfied: bool | None          # None: not installed, or its version cannot be compared

    def describe(self) -> str:
        where = f"installed {self.installed_version}" if self.installed_version else "not installed"
        return f"{self.declared_by} requires {self.package}{self.specifier}, {where}"


@dataclass
class DependencyReport:
    root: str
    root_version: str
    root_size_bytes: int | None
    count: int                      # the closure, not counting the root
    packages: list[Package]         # sorted by name
    total_size_bytes: int           # the closure's packages, not the root (packages without RECORD count 0)
    missing: list[MissingRequirement] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    unsized: list[str] = field(default_factory=list)   # packages whose size is unknown (no RECORD)

    def as_dict(self) -> dict:
        return asdict(self)


class DistributionNotInstalled(LookupError):
    pass


def dependency_closure(dist_name: str, path: list[str] | None = None, watched: tuple[str, ...] = WATCHED
                       ) -> DependencyReport:
    """The transitive `Requires-Dist` closure of the installed distribution `dist_name`.

    `path` (default `sys.path`) is where distributions are looked up, e.g. a directory of `*.dist-info` folders.
    Missing requirements are listed, not raised; a missing root raises DistributionNotInstalled.
    """
    installed = _installed(path)
    root_key = canonicalize_name(dist_name)
    if root_key not in installed:
        where = "sys.path" if path is None else f"{path}"
        raise DistributionNotInstalled(
            f"distribution {dist_name!r} is not installed in {where}: install it (e.g. pip install {dist_name}) "
            f"or pass the path that holds its .dist-info")
    seen: dict[str, md.Distribution] = {}
    missing: list[MissingRequirement] = []
    bounded: list[tuple[str, Requirement]] = []
    queue = [root_key]
    visited = {root_key}
    while queue:
        key = queue.pop(0)
        dist = installed[key]
        for req in active_requirements(dist.requires or []):
            dep = canonicalize_name(req.name)
            if dep in watched and has_upper_bound(req.specifier):
                bounded.append((key, req))
            if dep not in installed:
                if not any(m.requirement == str(req) and m.required_by == key for m in missing):
                    missing.append(MissingRequirement(str(req), key))
                continue
            if dep not in visited:
                visited.add(dep)
                seen[dep] = installed[dep]
                queue.append(dep)
    packages = sorted((Package(k, d.version, installed_size(d)) for k, d in seen.items()), key=lambda p: p.name)
    constraints = [_constraint(req, by, installed) for by, req in bounded]
    return DependencyReport(
        root=root_key, root_version=installed[root_key].version, root_size_bytes=installed_size(installed[root_key]),
        count=len(packages), packages=packages, total_size_bytes=sum(p.size_bytes or 0 for p in packages),
        missing=missing, constraints=constraints, unsized=[p.name for p in packages if p.size_bytes is None])


def requirement_conflicts(requires_dist: list[str], installed: dict[str, str], declared_by: str = "the candidate"
                          ) -> list[Constraint]:
    """The requirements among `requires_dist` (e.g. a not-installed wrapper's, from the package index) that the
    installed versions in `installed` (name -> version) do not satisfy. Extras are skipped, markers evaluated for
    this interpreter; requirements on packages absent from `installed` and unparsable strings are ignored."""
    versions = {canonicalize_name(k): v for k, v in installed.items()}
    conflicts = []
    for req in active_requirements(requires_dist):
        name = canonicalize_name(req.name)
        if name in versions and satisfies(versions[name], req.specifier) is False:
            conflicts.append(Constraint(name, declared_by, str(req.specifier), versions[name], False))
    return conflicts


def installed_versions(names: tuple[str, ...] = WATCHED, path: list[str] | None = None) -> dict[str, str]:
    """name -> installed version for those of `names` that are installed (for requirement_conflicts)."""
    installed = _installed(path)
    return {canonicalize_name(n): installed[canonicalize_name(n)].version for n in names
            if canonicalize_name(n) in installed}


def active_requirements(requires: list[str]) -> list[Requirement]:
    """The parsed requirements that apply to this interpreter without extras; unparsable strings are skipped."""
    active = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({"extra": ""}):
                    continue
            except UndefinedEnvironmentName:
                continue
        active.append(req)
    return active


def has_upper_bound(specifier: SpecifierSet) -> bool:
    return any(s.operator in UPPER_BOUND_OPERATORS for s in specifier)


def satisfies(version: str, specifier: SpecifierSet) -> bool | None:
    """Whether `version` meets `specifier` (pre-releases allowed; a local part like `+cpu` is ignored as PEP 440
    says); None when the version is not PEP 440."""
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return None


def installed_size(dist: md.Distribution) -> int | None:
    """Bytes on disk of the files the distribution's RECORD lists and that exist; None without a RECORD."""
    files = dist.files
    if files is None:
        return None
    total = 0
    for f in files:
        try:
            located = dist.locate_file(f)
            if located.is_file():
                total += located.stat().st_size
        except OSError:
            continue
    return total


def _constraint(req: Requirement, declared_by: str, installed: dict[str, md.Distribution]) -> Constraint:
    name = canonicalize_name(req.name)
    version = installed[name].version if name in installed else None
    ok = satisfies(version, req.specifier) if version is not None else None
    return Constraint(name, declared_by, str(req.specifier), version, ok)


def _installed(path: list[str] | None) -> dict[str, md.Distribution]:
    """Normalised name -> distribution; the first on the path wins, as for imports."""
    found: dict[str, md.Distribution] = {}
    dists = md.distributions() if path is None else md.distributions(path=list(path))
    for dist in dists:
        name = dist.metadata["Name"] if dist.metadata is not None else None
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found
