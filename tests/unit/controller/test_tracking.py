"""Which store a job records into, and one line (never a traceback, never a password) when that store is
unusable: at start, mid-run, for `evalkit-ship`, and for a launch or report folder that takes no files.

Read-only folders are made with chmod; root ignores permission bits, so as root the command runs under
`unshare --user` (a user namespace without privileges, where the bits bind as for anyone else).
"""
from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evalkit.controller import tracking
from evalkit.controller.launch.workers import free_port
from evalkit.secrets import REDACTED

# --- item 8 -------------------------------------------------------------------------------------------------


def test_resolve_uri_order(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////env.db")
    assert tracking.resolve_uri("sqlite:////cfg.db") == "sqlite:////cfg.db"
    assert tracking.resolve_uri(None) == "sqlite:////env.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setenv(tracking.DEFAULT_URI_ENV, "sqlite:////launch/mlflow.db")
    assert tracking.resolve_uri(None) == "sqlite:////launch/mlflow.db"


# --- item 9 -------------------------------------------------------------------------------------------------


# --- item 11 ------------------------------------------------------------------------------------------------


def test_plain_path_and_unreachable_server_messages(tmp_path):
    with pytest.raises(tracking.TrackingUnavailable, match="is a plain path") as err:
        tracking.check_reachable(str(tmp_path / "mlruns"))
    assert str(err.value).endswith(f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db")
    with pytest.raises(tracking.TrackingUnavailable, match=r"http://bob:\*\*\*@127.0.0.1:\d+ is unreachable") as err:
        tracking.check_reachable(f"http://bob:s3cret@127.0.0.1:{free_port()}")
    assert "s3cret" not in str(err.value)


class _FakeMlflow(BaseHTTPRequestHandler):
    """/health for anyone; the API only with bob's password; `html` answers every path 200 with a page."""
    html = False

    def do_GET(self):  # noqa: N802 - the http.server API
        authorized = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"bob:s3cret").decode()
        if self.html:
            status, body = 200, b"<html>a proxy's login page</html>"
        elif self.path == "/health":
            status, body = 200, b"OK"
        elif self.path.startswith("/api/2.0/mlflow/") and authorized:
            status, body = 200, b'{"experiments": []}'
        else:
            status, body = (401, b"") if self.path.startswith("/api/") else (404, b"")
        self.send_response(status)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_mlflow():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMlflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    _FakeMlflow.html = False
    server.shutdown()


def test_check_sends_the_uri_or_environment_credentials_and_never_shows_the_password(fake_mlflow, monkeypatch):
    port = fake_mlflow.server_address[1]
    tracking.check_reachable(f"http://bob:s3cret@127.0.0.1:{port}")    # urllib alone took bob:s3cret for a host
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "bob")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    tracking.check_reachable(f"http://127.0.0.1:{port}/")
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
    with pytest.raises(tracking.TrackingUnavailable, match=r"bob:\*\*\*@.*refused the credentials") as err:
        tracking.check_reachable(f"http://bob:wrong@127.0.0.1:{port}")
    assert "wrong" not in str(err.value)
    _FakeMlflow.html = True
    with pytest.raises(tracking.TrackingUnavailable, match="not an MLflow tracking server .*not an MLflow answer"):
        tracking.check_reachable(f"http://127.0.0.1:{port}")


class _SlowFirst(_FakeMlflow):
    """Answers its first request only after 0.5 s (a server warming up under load), the others at once."""

    asked = 0

    def do_GET(self):  # noqa: N802 - the http.server API
        type(self).asked += 1
        if type(self).asked == 1:
            time.sleep(0.5)
        super().do_GET()


def test_a_slow_server_is_asked_again_with_a_longer_wait_and_a_silent_one_is_unreachable():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFirst)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()                 # accepts connections, never answers
    try:
        tracking.check_reachable(f"http://bob:s3cret@127.0.0.1:{server.server_address[1]}", timeout_s=0.2)
        assert _SlowFirst.asked == 3   # /health timed out at 0.2 s, answered at 0.4 s; then the API call
        started = time.monotonic()
        with pytest.raises(tracking.TrackingUnavailable, match="is unreachable .*timed out"):
            tracking.check_reachable(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.1)
        assert time.monotonic() - started >= 0.1 + 0.2 + 0.4      # asked three times, each wait twice the last
    finally:
        server.shutdown()
        silent.close()


def test_hydra_launcher_log_masks_the_password_and_secret_values(caplog):
    """`evalkit -m` prints every job's overrides through Hydra's launcher logger, `:` escaped."""
    name = "hydra._internal.core_plugins.basic_launcher"
    tracking.mask_secrets_in_log(name)
    with caplog.at_level("INFO", logger=name):
        logging.getLogger(name).info("\t#%d : %s", 0, "tracking.uri=http\\://bob\\:s3cret@h\\:5000 seed=0 "
                                     "+trainer.options.db_password=plain7 "
                                     "+trainer.options.note=ghp_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa")
    assert caplog.messages == [f"\t#0 : tracking.uri=http://bob:***@h:5000 seed=0 +trainer.options.db_password="
                               f"{REDACTED} +trainer.options.note={REDACTED}"]


# --- item 12 ------------------------------------------------------------------------------------------------


# --- item 13 ------------------------------------------------------------------------------------------------


def test_a_run_is_recorded_as_the_account_that_logs_it_with_its_source(monkeypatch):
    """MlflowClient.create_run sets no user: every run read "unknown" on a team's server (issue 45)."""
    import getpass

    from evalkit.controller.tracking import source_tags

    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    assert source_tags("sqlite:////tmp/x/mlflow.db", "evalkit") == {
        "mlflow.user": getpass.getuser(), "mlflow.source.name": "evalkit", "mlflow.source.type": "LOCAL"}
    assert source_tags("http://carol:pw@mlflow.example.com", "evalkit -m")["mlflow.user"] == "carol"
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "dana")
    assert source_tags("https://mlflow.example.com", "evalkit-verdict")["mlflow.user"] == "dana"
    assert source_tags("sqlite:///mlflow.db", "evalkit")["mlflow.user"] == getpass.getuser()   # no server account
