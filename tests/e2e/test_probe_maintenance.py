"""The maintenance probe end to end (issue 14): real `evalkit probe=maintenance` runs of a planted trainer whose
wrapper is a fake distribution built by the test (tests/fakedist.py), with the package index a fake one served by
the test, then the same offline (its cache, marked with its date), then unreachable with no cache ("unavailable",
and the probe still judges everything else)."""
from __future__ import annotations

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fakedist import build_site
from helpers import PLANTED, ok, probe_result, run_evalkit, store_uri

from evalkit import names

INDEX = {"info": {"version": "1.2.0", "requires_dist": []},
         "releases": {"0.9.0": [{"upload_time_iso_8601": "2026-01-05T00:00:00Z", "yanked": False}],
                      "1.0.0": [{"upload_time_iso_8601": "2026-03-01T00:00:00Z", "yanked": False}],
                      "1.1.0": [{"upload_time_iso_8601": "2026-06-01T00:00:00Z", "yanked": False}],
                      "1.2.0": [{"upload_time_iso_8601": "2026-09-01T00:00:00Z", "yanked": False}]}}


class _Index(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.hits.append(self.path)
        body = json.dumps(INDEX).encode() if self.path == "/fakewrap/json" else b"{}"
        self.send_response(200 if self.path == "/fakewrap/json" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(workdir, site: Path, index_url: str, cache: Path, *extra: str):
    return run_evalkit(workdir, "probe=maintenance", "trainer=baseline", "trainer.name=deprecated",
                       "trainer._target_=deprecated_loop.DeprecatedAdapter", "trainer.distribution=fakewrap",
                       "trainer.import_modules=[fakewrap]", f"probe.maintenance.index_url={index_url}",
                       f"probe.maintenance.cache_dir={cache}", "probe.maintenance.import_repeats=1",
                       "probe.maintenance.max_deprecations=0", "probe.maintenance.candidates=[]", *extra,
                       env={"PYTHONPATH": f"{site}:{PLANTED}"})


def result_of(workdir) -> tuple:
    return probe_result(workdir, "maintenance")[1:]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    site = build_site(tmp_path_factory.mktemp("site"))
    cache = tmp_path_factory.mktemp("cache")
    dirs = {name: tmp_path_factory.mktemp(name) for name in ("online", "offline", "unreachable")}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ok(probe(dirs["online"], site, url, cache))
        hits_online = list(_Index.hits)
        with ThreadPoolExecutor(2) as pool:
            later = [pool.submit(probe, dirs["offline"], site, url, cache, "probe.maintenance.offline=true"),
                     pool.submit(probe, dirs["unreachable"], site, f"http://127.0.0.1:{closed_port()}/pypi",
                                 tmp_path_factory.mktemp("empty-cache"))]
            for proc in later:
                ok(proc.result())
        hits_after = list(_Index.hits)
    finally:
        server.shutdown()
        server.server_close()
    by_name = {name: (*result_of(d), store_uri(d)) for name, d in dirs.items()}
    return by_name, hits_online, hits_after, cache


def test_the_wrappers_deprecations_are_counted_with_the_module_that_raised_them(results):
    (by_name, *_) = results
    run, result, _ = by_name["online"]
    assert result["figures"]["deprecations"] == 1 and result["figures"]["deprecation_occurrences"] == 12
    table = next(s for s in result["sections"] if s.startswith("| count"))
    assert "| 12 | DeprecationWarning | fakewrap (fakewrap) |" in table and "deprecated_loop.py" in table
    assert "maintenance.deprecations" in [f["code"] for f in result["findings"]]


def test_dependencies_and_a_bound_the_installed_torch_breaks_are_read_from_metadata(results):
    (by_name, *_) = results
    run, result, _ = by_name["online"]
    assert result["figures"]["dependencies"] == 2           # fakedep and fake-leaf; torch and numpy are the core
    conflict = next(f for f in result["findings"] if f["code"] == "maintenance.core_conflict")
    assert conflict["title"].startswith("fakewrap requires torch<2.10 (installed 2.13")
    assert run.data.metrics[names.probe_pass("maintenance")] == 0.0
    assert result["figures"]["import_s"] > 0 and result["figures"]["import_mib"] > 3   # it writes 4 MiB


def test_release_history_comes_from_the_index_then_the_cache_marked_with_its_date(results):
    by_name, hits_online, hits_after, cache = results
    _, online, _ = by_name["online"]
    assert hits_online == ["/fakewrap/json"] and (cache / "fakewrap.json").is_file()
    assert online["figures"]["releases_per_year"] == 4 and online["figures"]["breaking_per_year"] == 1
    _, offline, _ = by_name["offline"]
    assert hits_after == hits_online                         # offline: the index was never asked
    assert "(cached, as of 20" in offline["headline"]
    assert offline["figures"]["releases_per_year"] == 4


def test_an_unreachable_index_without_a_cache_says_unavailable_and_judges_the_rest(results):
    (by_name, *_) = results
    run, result, _ = by_name["unreachable"]
    assert run.info.status == "FINISHED" and "releases: unavailable" in result["headline"]
    assert "releases_per_year" not in result["figures"] and result["figures"]["dependencies"] == 2
    assert any(n.startswith("release history unavailable (") for n in result["notes"])


def test_the_verdicts_maintenance_column_shows_the_figures_beside_the_fail(results):
    from evalkit.analysis import store
    from evalkit.verdict import VerdictOptions, build_verdict

    (by_name, *_) = results
    run, _, uri = by_name["online"]
    _, _, records = store.read_runs(uri, "evalkit")
    (row,) = build_verdict(records, VerdictOptions()).rows
    cell = row.dimensions["maintenance"]
    assert row.key.trainer == "deprecated" and cell.status == "fail"
    assert cell.figure == run.data.tags[names.probe_headline("maintenance")]
    assert cell.figure.startswith("1 deprecations, import ") and "2 deps" in cell.figure
