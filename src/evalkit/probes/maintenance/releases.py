"""Release history of a distribution from the package index (PyPI's JSON API), cached on disk.

Counted over the 365 days before the reference time, final releases only (pre- and dev releases are counted
apart and otherwise ignored). A release's kind comes from its predecessor in version order among all final
releases (so a backport 1.9.5 published after 2.0.0 is a patch): a major release bumps X, a minor release bumps
Y within the same X. The first release ever has no predecessor and is neither.

Breaking-change frequency is breaking releases per year: every major release, and, for 0.x versions, every minor
release as well, since SemVer (item 4) promises no stability before 1.0.0 and by convention 0.Y bumps carry the
breaking changes that X bumps carry later.

The index is asked at most once per `max_age_days`: the per-version dates, yanked flags and the latest
version's `requires_dist` are written to `<cache_dir>/<name>.json` with the fetch time, and a cache younger than
`max_age_days` is used without a network call. When the index cannot be used (unreachable, timeout, HTTP
error, not the expected JSON) the cached figures come back with `source="cache"` and `as_of` the fetch time
(all window counts are then as of that time), or, without a cache, `source="unavailable"` and the reason.
With `offline` the index is never asked: the cache whatever its age, or "unavailable". `release_history` never
raises for the index's or the cache's sake and never guesses a figure.
"""
from __future__ import annotations

import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

WINDOW_DAYS = 365
MAX_RESPONSE_BYTES = 64 * 2**20
CA_BUNDLE_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
CACHE_FORMAT = 1


@dataclass
class ReleaseHistory:
    name: str
    installed_version: str | None
    source: str                                  # "index", "cache" or "unavailable"
    as_of: str | None = None                     # ISO time the figures hold for (the fetch time)
    reason: str | None = None                    # why the index failed; None for a fresh cache or the index
    installed_release_date: str | None = None
    days_since_installed_release: float | None = None   # from the installed version's release to as_of
    releases_since_installed: int | None = None          # final releases with a higher version
    window_days: int = WINDOW_DAYS
    releases: int | None = None                  # final releases in the window
    major_releases: int | None = None
    minor_releases: int | None = None
    yanked: int | None = None                    # yanked versions (final or not) in the window
    prereleases_ignored: int | None = None       # pre- and dev releases in the window, not counted above
    breaking_per_year: int | None = None
    breaking_rule: str | None = None
    latest_version: str | None = None
    latest_release_date: str | None = None
    latest_requires_dist: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def release_history(dist_name: str, installed_version: str | None, *, index_url: str = "https://pypi.org/pypi",
                    cache_dir: str, timeout_s: float = 10, now: datetime | None = None,
                    max_age_days: float = 1, offline: bool = False) -> ReleaseHistory:
    """`dist_name`'s release figures as of now (or of the cached fetch); see the module docstring. `offline`:
    the index is never asked; the cache whatever its age, or "unavailable"."""
    now = _aware(now or datetime.now(timezone.utc))
    name = canonicalize_name(dist_name)
    cache_path = os.path.join(cache_dir, f"{name}.json")
    cached, cache_problem = _read_cache(cache_path)
    if cached is not None:
        age = now - _parse_time(cached["fetched_at"])
        if timedelta(0) <= age < timedelta(days=max_age_days):
            return _figures(name, installed_version, cached, "cache")
    if offline:
        if cached is not None:
            return _figures(name, installed_version, cached, "cache", reason="offline: the index was not asked")
        reason = "offline, and no cached release history" + (f" ({cache_problem})" if cache_problem else "")
        return ReleaseHistory(name, installed_version, "unavailable", reason=reason)
    try:
        raw = _fetch(f"{index_url.rstrip('/')}/{name}/json", timeout_s)
        data = _digest(raw, now)
    except IndexUnusable as e:
        reason = str(e)
        if cached is not None:
            return _figures(name, installed_version, cached, "cache", reason=reason)
        if cache_problem:
            reason += f"; {cache_problem}"
        return ReleaseHistory(name, installed_version, "unavailable", reason=reason)
    _write_cache(cache_path, data)
    return _figures(name, installed_version, data, "index")


class IndexUnusable(Exception):
    pass


def ssl_context() -> ssl.SSLContext:
    """The CA bundle pip would use (PIP_CERT, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, first set), else the default."""
    for variable in CA_BUNDLE_VARIABLES:
        bundle = os.environ.get(variable)
        if bundle and os.path.isfile(bundle):
            return ssl.create_default_context(cafile=bundle)
    return ssl.create_default_context()


def _fetch(url: str, timeout_s: float) -> bytes:
    """The response body; urllib's default opener honours the *_proxy / no_proxy environment variables."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "evalkit"})
    context = ssl_context() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise IndexUnusable(f"the index answered HTTP {e.code} for {url}") from None
    except urllib.error.URLError as e:
        raise IndexUnusable(f"the index at {url} is unreachable: {e.reason}") from None
    except (TimeoutError, OSError, ValueError) as e:     # ValueError: a malformed index_url
        raise IndexUnusable(f"the index at {url} failed: {type(e).__name__}: {e}") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise IndexUnusable(f"the index's answer for {url} is over {MAX_RESPONSE_BYTES} bytes")
    return body


def _digest(raw: bytes, now: datetime) -> dict:
    """The cacheable part of a PyPI JSON answer: version -> (date, yanked), the latest version's requirements."""
    try:
        doc = json.loads(raw)
        releases = doc["releases"]
        info = doc.get("info") or {}
        if not isinstance(releases, dict):
            raise TypeError("'releases' is not a mapping")
        versions = {}
        for version, files in releases.items():
            if not isinstance(files, list) or not files:
                continue            # a version without files has no release date
            dates = [_file_time(f) for f in files]
            versions[str(version)] = {"date": min(dates).isoformat(), "yanked": all(f.get("yanked") for f in files)}
        requires = info.get("requires_dist") or []
        if not isinstance(requires, list):
            raise TypeError("'info.requires_dist' is not a list")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise IndexUnusable(f"the index's answer is not the expected JSON: {type(e).__name__}: {e}") from None
    return {"format": CACHE_FORMAT, "fetched_at": now.isoformat(), "versions": versions,
            "info_version": info.get("version"), "requires_dist": [str(r) for r in requires]}


def _figures(name: str, installed: str | None, data: dict, source: str, reason: str | None = None
             ) -> ReleaseHistory:
    as_of = _parse_time(data["fetched_at"])
    parsed = []
    for text, entry in data["versions"].items():
        try:
            parsed.append((Version(text), _parse_time(entry["date"]), bool(entry["yanked"])))
        except InvalidVersion:
            continue
    finals = sorted((p for p in parsed if not p[0].is_prerelease), key=lambda p: p[0])
    start = as_of - timedelta(days=WINDOW_DAYS)
    in_window = lambda date: start <= date <= as_of
    counts = {"releases": 0, "major": 0, "minor": 0, "breaking": 0}
    for i, (version, date, _) in enumerate(finals):
        if not in_window(date):
            continue
        counts["releases"] += 1
        if i == 0:
            continue
        kind = _bump(finals[i - 1][0], version)
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "major" or (kind == "minor" and version.major == 0):
            counts["breaking"] += 1
    zero_x = any(v.major == 0 for v, d, _ in finals if in_window(d))
    result = ReleaseHistory(
        name, installed, source, as_of=as_of.isoformat(), reason=reason, releases=counts["releases"],
        major_releases=counts["major"], minor_releases=counts["minor"],
        yanked=sum(1 for _, d, y in parsed if y and in_window(d)),
        prereleases_ignored=sum(1 for v, d, _ in parsed if v.is_prerelease and in_window(d)),
        breaking_per_year=counts["breaking"],
        breaking_rule="major releases, and minor releases of 0.x" if zero_x else "major releases",
        latest_requires_dist=list(data.get("requires_dist") or []))
    latest = [p for p in finals if not p[2]] or finals
    if latest:
        result.latest_version, result.latest_release_date = str(latest[-1][0]), latest[-1][1].isoformat()
    if installed:
        _place_installed(result, installed, parsed, finals, as_of)
    return result


def _place_installed(result: ReleaseHistory, installed: str, parsed: list, finals: list, as_of: datetime) -> None:
    try:
        public = Version(Version(installed).public)      # 2.13.0+cpu is 2.13.0's release
    except InvalidVersion:
        return
    match = [d for v, d, _ in parsed if v == public]
    if match:
        result.installed_release_date = match[0].isoformat()
        result.days_since_installed_release = round((as_of - match[0]).total_seconds() / 86400, 2)
    result.releases_since_installed = sum(1 for v, _, _ in finals if v > public)


def _bump(previous: Version, version: Version) -> str:
    if version.major > previous.major:
        return "major"
    if version.major == previous.major and version.minor > previous.minor:
        return "minor"
    return "patch"


def _file_time(entry: dict) -> datetime:
    text = entry.get("upload_time_iso_8601") or entry.get("upload_time")
    if not isinstance(text, str):
        raise TypeError("a release file has no upload_time")
    return _parse_time(text)


def _parse_time(text: str) -> datetime:
    return _aware(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _aware(moment: datetime) -> datetime:
    """Naive times are UTC (PyPI's `upload_time` has no zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _read_cache(path: str) -> tuple[dict | None, str | None]:
    if not os.path.exists(path):
        return None, None
    try:
        with open(path) as f:
            data = json.load(f)
        if data.get("format") != CACHE_FORMAT or not isinstance(data.get("versions"), dict):
            return None, f"the cache {path} has an unknown format"
        _parse_time(data["fetched_at"])
        return data, None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return None, f"the cache {path} is unreadable ({type(e).__name__}: {e})"


def _write_cache(path: str, data: dict) -> None:
    """Atomic; a cache that cannot be written only costs the next call a fetch."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
