"""Release history from a package index: exact counts from a fake PyPI JSON index served in-process (a thread),
the on-disk cache, and what comes back when the index is unreachable or answers garbage."""
from __future__ import annotations

import json
import os
import socket
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalkit.probes.maintenance.releases import release_history

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _file(when: str, yanked: bool = False, iso: bool = True) -> dict:
    entry = {"upload_time": when, "yanked": yanked}
    if iso:
        entry["upload_time_iso_8601"] = when + ".123456Z"
    return entry


FAKEPROJ = {
    "info": {"name": "fakeproj", "version": "2.1.0", "requires_dist": ["torch<2.10", "numpy>=1"]},
    "releases": {
        "0.9.0": [_file("2025-06-01T00:00:00")],                       # before the window
        "1.0.0": [_file("2026-01-10T00:00:00")],                       # major
        "1.0.1": [_file("2026-02-01T00:00:00")],
        "1.1.0rc1": [_file("2026-03-01T00:00:00")],                    # pre-release: ignored
        "1.1.0": [_file("2026-03-15T00:00:00")],                       # minor
        "1.1.1": [_file("2026-04-01T00:00:00", yanked=True), _file("2026-04-01T01:00:00", yanked=True)],
        "1.2.0.dev1": [_file("2026-05-01T00:00:00")],                  # dev release: ignored
        "2.0.0": [_file("2026-06-02T00:00:00"), _file("2026-06-01T10:00:00")],   # major; the earliest file
        "1.1.2": [_file("2026-07-01T00:00:00")],                       # a backport: a patch, not a minor
        "2.1.0": [_file("2026-09-01T00:00:00", iso=False)],            # minor; only the zone-less upload_time
        "2.2.0": [],                                                   # no files: no release date
        "3.0.0rc1": [_file("2026-11-01T00:00:00")],
    },
}
ZEROX = {
    "info": {"version": "0.3.0"},
    "releases": {"0.1.0": [_file("2026-01-01T00:00:00")], "0.2.0": [_file("2026-02-01T00:00:00")],
                 "0.2.1": [_file("2026-03-01T00:00:00")], "0.3.0": [_file("2026-04-01T00:00:00")]},
}


class _Index(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes]] = {}
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.hits.append(self.path)
        status, body = self.routes.get(self.path, (404, b'{"message": "Not Found"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def index():
    """A fake PyPI JSON API on 127.0.0.1, in a thread of this process; yields its base URL."""
    _Index.routes = {"/fakeproj/json": (200, json.dumps(FAKEPROJ).encode()),
                     "/zerox/json": (200, json.dumps(ZEROX).encode()),
                     "/garbage/json": (200, b"<html>not json"),
                     "/wrongshape/json": (200, json.dumps({"releases": [1, 2]}).encode())}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_counts_from_the_index(index, tmp_path):
    h = release_history("FakeProj", "1.1.0+cpu", index_url=index, cache_dir=str(tmp_path), now=NOW)
    assert (h.source, h.reason, h.as_of) == ("index", None, NOW.isoformat())
    assert (h.releases, h.major_releases, h.minor_releases, h.yanked, h.prereleases_ignored) == (7, 2, 2, 1, 3)
    assert (h.breaking_per_year, h.breaking_rule) == (2, "major releases")
    assert (h.latest_version, h.latest_release_date) == ("2.1.0", "2026-09-01T00:00:00+00:00")
    assert h.installed_release_date == "2026-03-15T00:00:00.123456+00:00"
    assert h.days_since_installed_release == pytest.approx(261, abs=0.01)
    assert h.releases_since_installed == 4                        # 1.1.1, 1.1.2, 2.0.0, 2.1.0
    assert h.latest_requires_dist == ["torch<2.10", "numpy>=1"]
    json.dumps(h.as_dict())


def test_the_earliest_file_dates_a_release(index, tmp_path):
    h = release_history("fakeproj", "2.0.0", index_url=index, cache_dir=str(tmp_path), now=NOW)
    assert h.installed_release_date == "2026-06-01T10:00:00.123456+00:00"


def test_minor_bumps_of_a_zero_x_package_are_breaking(index, tmp_path):
    h = release_history("zerox", None, index_url=index, cache_dir=str(tmp_path), now=NOW)
    assert (h.releases, h.major_releases, h.minor_releases, h.breaking_per_year) == (4, 0, 2, 2)
    assert "0.x" in h.breaking_rule
    assert h.installed_release_date is None and h.releases_since_installed is None


def test_a_fresh_cache_spares_the_index_and_a_stale_one_stands_in_for_an_unreachable_index(
        index, tmp_path, closed_port_url):
    first = release_history("fakeproj", "1.1.0", index_url=index, cache_dir=str(tmp_path), now=NOW)
    cache_file = tmp_path / "fakeproj.json"
    assert json.loads(cache_file.read_text())["fetched_at"] == NOW.isoformat()

    hits = len(_Index.hits)
    fresh = release_history("fakeproj", "1.1.0", index_url=index, cache_dir=str(tmp_path),
                            now=NOW + timedelta(hours=12))
    assert len(_Index.hits) == hits                               # no request
    assert (fresh.source, fresh.as_of, fresh.reason) == ("cache", NOW.isoformat(), None)

    later = NOW + timedelta(days=30)
    stale = release_history("fakeproj", "1.1.0", index_url=closed_port_url, cache_dir=str(tmp_path), now=later,
                            timeout_s=2)
    assert stale.source == "cache" and stale.as_of == NOW.isoformat() and "unreachable" in stale.reason
    same = ("releases", "major_releases", "minor_releases", "yanked", "breaking_per_year", "latest_version",
            "days_since_installed_release")
    assert {k: getattr(stale, k) for k in same} == {k: getattr(first, k) for k in same}


def test_an_unreachable_index_without_a_cache_is_unavailable(tmp_path, closed_port_url):
    h = release_history("fakeproj", "1.1.0", index_url=closed_port_url, cache_dir=str(tmp_path / "c"), now=NOW,
                        timeout_s=2)
    assert h.source == "unavailable" and "unreachable" in h.reason
    assert h.releases is None and h.latest_version is None and h.as_of is None
    assert not os.path.exists(tmp_path / "c" / "fakeproj.json")


@pytest.mark.parametrize("name", ["garbage", "wrongshape"])
def test_garbage_from_the_index_is_unavailable_or_the_cache(index, tmp_path, name):
    h = release_history(name, None, index_url=index, cache_dir=str(tmp_path), now=NOW)
    assert h.source == "unavailable" and "not the expected JSON" in h.reason
    cached = json.loads(json.dumps(FAKEPROJ))
    _Index.routes[f"/{name}-cached/json"] = (200, json.dumps(cached).encode())
    release_history(f"{name}-cached", None, index_url=index, cache_dir=str(tmp_path), now=NOW)
    _Index.routes[f"/{name}-cached/json"] = _Index.routes[f"/{name}/json"]
    h = release_history(f"{name}-cached", None, index_url=index, cache_dir=str(tmp_path), now=NOW + timedelta(days=2))
    assert (h.source, h.as_of, h.releases) == ("cache", NOW.isoformat(), 7)
    assert "not the expected JSON" in h.reason


def test_a_project_the_index_does_not_know_and_a_corrupt_cache(index, tmp_path):
    (tmp_path / "nosuch.json").write_text("{broken")
    h = release_history("nosuch", None, index_url=index, cache_dir=str(tmp_path), now=NOW)
    assert h.source == "unavailable" and "HTTP 404" in h.reason and "unreadable" in h.reason


def test_offline_the_index_is_never_asked(index, tmp_path):
    hits = len(_Index.hits)
    none = release_history("fakeproj", None, index_url=index, cache_dir=str(tmp_path), now=NOW, offline=True)
    assert none.source == "unavailable" and "offline" in none.reason and len(_Index.hits) == hits
    release_history("fakeproj", None, index_url=index, cache_dir=str(tmp_path), now=NOW)
    hits = len(_Index.hits)
    old = release_history("fakeproj", None, index_url=index, cache_dir=str(tmp_path), now=NOW + timedelta(days=90),
                          offline=True)
    assert (old.source, old.as_of, old.releases) == ("cache", NOW.isoformat(), 7) and len(_Index.hits) == hits
