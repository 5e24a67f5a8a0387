"""MLflow plumbing: where the store is, whether it answers, and batched writes within MLflow's limits."""
from __future__ import annotations

import base64
import contextlib
import fcntl
import getpass
import http.client
import json
import logging
import os
import re
import sqlite3
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from evalkit.controller.ui import mark_experiment
from evalkit.controller.writable import write_problem
from evalkit.secrets import mask_url_passwords, redact, redact_override, redact_text

DEFAULT_URI_ENV = "EVALKIT_DEFAULT_TRACKING_URI"
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 5000
MLFLOW_API_PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"
OVERRIDE_LIKE = re.compile(r"\S+")   # a word of a logged command line: an override or a plain word
STORE_FIX = "fix tracking.uri / MLFLOW_TRACKING_URI, or unset both to use the local store ./mlflow.db"


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached (the message names the URI and the fix)."""


def fix_default_uri(launch_dir: str | None = None) -> str:
    """Pin the embedded default store to an absolute path once, at start, for every job of a sweep."""
    if DEFAULT_URI_ENV not in os.environ:
        path = os.path.abspath(os.path.join(launch_dir or os.getcwd(), "mlflow.db"))
        os.environ[DEFAULT_URI_ENV] = f"sqlite:///{path}"
    return os.environ[DEFAULT_URI_ENV]


def resolve_uri(configured: str | None) -> str:
    """The store a job records into: tracking.uri when set (an explicit choice, also on the command line),
    then MLFLOW_TRACKING_URI, then the local SQLite store in the launch directory."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or fix_default_uri()


def display_uri(text: str) -> str:
    """`text` (a URI, or a message quoting one) with the password of every `scheme://user:password@host` masked
    as `user:***@host`: the only form of a URI evalkit prints or records."""
    return mask_url_passwords(str(text), "***")


def source_tags(uri: str, command: str) -> dict[str, str]:
    """Who recorded a run and with what, as MLflow's UI reads them (MlflowClient.create_run sets none, so a run's
    user read "unknown"): `mlflow.user`, on a tracking server the account evalkit signs in with
    (MLFLOW_TRACKING_USERNAME, or the URI's user@), else the OS user; `mlflow.source.name`, the evalkit command;
    `mlflow.source.type`, LOCAL."""
    parts = urlsplit(uri)
    user = (os.environ.get("MLFLOW_TRACKING_USERNAME") or (unquote(parts.username) if parts.username else None)) \
        if is_server(uri) else None
    if not user:
        with contextlib.suppress(Exception):   # no login name (a container without a passwd entry)
            user = getpass.getuser()
    return {"mlflow.user": user or "unknown", "mlflow.source.name": command, "mlflow.source.type": "LOCAL"}


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Refuse, before anything is recorded, a store this job could not record into: raises TrackingUnavailable
    with one line naming the URI (password masked) and the fix. Checked: a server that is down, is not MLflow
    or rejects the credentials; a SQLite file or folder that takes no writes; a scheme MLflow does not know
    and a plain path (MLflow's retired file store). Other database URIs are left to MLflow."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme in ("http", "https"):
        _check_server(uri, timeout_s)
    elif scheme == "sqlite":
        _check_sqlite_writable(uri)
        _check_sqlite_local(uri)
        _check_sqlite_store(uri)
    elif not scheme.startswith(("postgresql", "mysql", "mssql")):   # building those stores connects: MLflow's job
        _check_store_opens(uri, scheme)


def is_server(uri: str) -> bool:
    """Whether `uri` is an MLflow tracking server (http or https), not a database or a folder."""
    return urlsplit(uri).scheme.lower() in ("http", "https")


def _check_server(uri: str, timeout_s: float) -> None:
    """`/health` answers 200 and an MLflow API call a JSON object, with the credentials MLflow would send."""
    base, headers = _without_credentials(uri)
    for path in ("/health", MLFLOW_API_PROBE):
        try:
            status, body = _patient_get(base + path, headers, timeout_s)
        except urllib.error.HTTPError as exc:
            status, body = exc.code, b""
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            raise TrackingUnavailable(
                f"MLflow tracking server {display_uri(uri)} is unreachable "
                f"({display_uri(getattr(exc, 'reason', exc))}): start it (mlflow server ...), {STORE_FIX}") from None
        if status in (401, 403):
            raise TrackingUnavailable(
                f"MLflow tracking server {display_uri(uri)} refused the credentials (GET {path}: HTTP {status}): set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or user:password@ in the URI) to an "
                "account of that server")
        if status != 200 or (path == MLFLOW_API_PROBE and not _is_json_object(body)):
            answer = f"HTTP {status}" if status != 200 else "not an MLflow answer"
            raise TrackingUnavailable(
                f"{display_uri(uri)} answers but is not an MLflow tracking server (GET {path.split('?')[0]}: "
                f"{answer}): point tracking.uri / MLFLOW_TRACKING_URI at the address `mlflow server` listens on")


def _without_credentials(uri: str) -> tuple[str, dict[str, str]]:
    """The URI without `user:password@` (urllib would take it for part of the host name), and the
    Authorization header MLflow would send: MLFLOW_TRACKING_USERNAME/PASSWORD, else the URI's user and
    password, else MLFLOW_TRACKING_TOKEN."""
    parts = urlsplit(uri)
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if not (user and password) and parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
    headers = {}
    if user and password:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", "")), headers


SLOW_SERVER_TRIES = 3     # a server that times out is asked again, each time waiting twice as long (5, 10, 20 s)


def _patient_get(url: str, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    """`_http_get`, asked again with twice the timeout when the server is slow to answer (a loaded machine, a
    server's first request): only a refused connection or SLOW_SERVER_TRIES timeouts in a row mean unreachable
    (measured: an auth-enabled server on PostgreSQL started beside a 2-core test run once took over 5 s)."""
    for attempt in range(SLOW_SERVER_TRIES):
        try:
            return _http_get(url, headers, timeout_s * 2 ** attempt)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if not isinstance(reason, TimeoutError) or attempt == SLOW_SERVER_TRIES - 1:
                raise
    raise AssertionError("unreachable")   # the loop returns or raises


def _http_get(url: str, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    """GET with the TLS settings MLflow honours (MLFLOW_TRACKING_SERVER_CERT_PATH, MLFLOW_TRACKING_INSECURE_TLS)."""
    context = ssl.create_default_context(cafile=os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or None)
    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
        return response.status, response.read(1 << 16)


def _is_json_object(body: bytes) -> bool:
    try:
        return isinstance(json.loads(body), dict)
    except ValueError:
        return False


def _check_sqlite_writable(uri: str) -> None:
    """SQLite writes the database file and, beside it, its journal: both the file and its folder must take
    writes (a folder that does not exist yet is created in the nearest existing one)."""
    path = sqlite_path(uri)
    if path is None:
        return
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    problem = write_problem(folder)
    if problem is None and os.path.isfile(path):
        try:
            open(path, "r+b").close()
        except OSError as exc:
            problem = f"{path}: {exc.strerror or exc}"
    if problem:
        raise TrackingUnavailable(
            f"the tracking store {display_uri(uri)} takes no writes ({problem}; SQLite writes the file and its "
            f"journal beside it): make {folder} and the file writable, or {STORE_FIX}")


MOUNTS = "/proc/mounts"
NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "lustre", "gpfs", "beegfs", "ceph",
                       "fuse.ceph", "glusterfs", "fuse.glusterfs", "afs", "9p", "panfs", "wekafs", "fuse.s3fs",
                       "fuse.gcsfuse", "fuse.juicefs"}
SQLITE_ON_NETWORK_ENV = "EVALKIT_ALLOW_SQLITE_ON_NETWORK_FS"   # "1": this host alone writes the file, on purpose


def filesystem_of(path: str, mounts: str | None = None) -> tuple[str, str] | None:
    """(filesystem type, mount point) of the mount holding `path` (or its nearest existing folder), from the
    mount table; None where there is none to read (not Linux)."""
    try:
        with open(mounts or MOUNTS) as fh:
            table = [line.split() for line in fh]
    except OSError:
        return None
    where = os.path.realpath(path)
    best: tuple[str, str] | None = None
    for fields in table:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best[1])):
            best = (fields[2], point)
    return best


def _check_sqlite_local(uri: str) -> None:
    """A SQLite store on a network filesystem is refused: its locks do not hold there, and writers on several hosts
    (a sweep's jobs on several nodes) corrupt the file (sqlite.org/faq.html#q5). The team's server is the way;
    SQLITE_ON_NETWORK_ENV=1 when only this host writes it."""
    path = sqlite_path(uri)
    if path is None or os.environ.get(SQLITE_ON_NETWORK_ENV) == "1":
        return
    found = filesystem_of(os.path.dirname(os.path.abspath(path)))
    if found and found[0] in NETWORK_FILESYSTEMS:
        raise TrackingUnavailable(
            f"the tracking store {display_uri(uri)} is on a network filesystem ({found[0]} mounted at {found[1]}): "
            "SQLite's locks do not hold there, and jobs writing it from several hosts corrupt it: record into a "
            "team's tracking server (tracking=server tracking.uri=http://...; docs/running.md#a-teams-tracking-"
            f"server), point tracking.uri at a local disk, or set {SQLITE_ON_NETWORK_ENV}=1 if only this host "
            "writes it")


SQLITE_HEADER = b"SQLite format 3\x00"
MLFLOW_TABLES = {"experiments", "runs", "metrics", "params", "tags"}   # a store MLflow created holds these


def _check_sqlite_store(uri: str) -> None:
    """The file is MLflow's SQLite store, or empty, or absent (then created): not a folder, not another kind of
    file, not a damaged database, not another program's database (MLflow would add its tables to it)."""
    path = os.path.abspath(sqlite_path(uri) or "")
    if not path or not os.path.exists(path):
        return
    restore = ("restore it from a backup, or point tracking.uri at another file (the runs it held are not "
               "readable by evalkit or MLflow)")
    if os.path.isdir(path):
        raise TrackingUnavailable(
            f"the tracking store {display_uri(uri)} is a folder, not a database file: point tracking.uri at a file "
            f"in it, e.g. tracking.uri=sqlite:///{os.path.join(path, 'mlflow.db')}")
    with open(path, "rb") as fh:
        header = fh.read(100)
    if not header:
        return
    if not header.startswith(SQLITE_HEADER):
        raise TrackingUnavailable(f"the tracking store {display_uri(uri)} is not an SQLite database (damaged, or "
                                  f"another kind of file): {restore}")
    missing = truncated_bytes(header, os.path.getsize(path))
    if missing:
        raise TrackingUnavailable(f"the tracking store {display_uri(uri)} is a truncated SQLite database ({missing} "
                                  f"bytes short of the size its header gives): {restore}")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise TrackingUnavailable(f"the tracking store {display_uri(uri)} is a damaged SQLite database ({exc}): "
                                  f"{restore}") from None
    if tables and not MLFLOW_TABLES <= tables:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise TrackingUnavailable(
            f"the tracking store {display_uri(uri)} is another program's SQLite database (its tables: {shown}), not "
            "MLflow's: evalkit would add MLflow's tables to it; point tracking.uri at another file, e.g. "
            f"sqlite:///{os.path.join(os.path.dirname(path), 'mlflow.db')} in a folder of its own")


def truncated_bytes(header: bytes, size: int) -> int:
    """How many bytes an SQLite file lacks of the database size its header records (0: none, or not recorded).
    The header's page count holds when its version-valid-for number equals its change counter (sqlite.org
    fileformat2, 1.3.7)."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if len(header) < 100 or header[24:28] != header[92:96] or not pages:
        return 0
    return max(0, pages * page_size - size)


def _check_store_opens(uri: str, scheme: str) -> None:
    """Build MLflow's store for the URI (no connection for these schemes): an unknown scheme, or a plain path
    (MLflow's file store, refused by MLflow 3 unless MLFLOW_ALLOW_FILE_STORE=true), fails here."""
    from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException

    try:
        MlflowClient(uri)
    except UnsupportedModelRegistryStoreURIException:
        raise TrackingUnavailable(
            f"tracking URI {display_uri(uri)}: MLflow knows no store of scheme '{scheme}': use "
            f"sqlite:///<folder>/mlflow.db or http(s)://<host>:<port> of an MLflow server, or unset tracking.uri / "
            f"MLFLOW_TRACKING_URI to use the local store ./mlflow.db") from None
    except Exception as exc:  # noqa: BLE001 - MLflow raises many types for a store it cannot build
        if scheme in ("", "file"):
            path = os.path.abspath(urlsplit(uri).path if scheme == "file" else uri)
            database = path if path.endswith((".db", ".sqlite")) else os.path.join(path, "mlflow.db")
            detail = f" ({describe_failure(exc)})" if os.environ.get("MLFLOW_ALLOW_FILE_STORE") else ""
            raise TrackingUnavailable(
                f"tracking URI {display_uri(uri)} is a plain path, which MLflow takes for its retired file store "
                f"and refuses{detail}: use a SQLite store there, tracking.uri=sqlite:///{database}") from None
        raise TrackingUnavailable(
            f"cannot open the tracking store {display_uri(uri)} ({describe_failure(exc)}): {STORE_FIX}") from None


def describe_failure(exc: BaseException) -> str:
    """One line for a failed store call, from its root cause (`OperationalError: attempt to write a readonly
    database`, `ConnectionRefusedError: [Errno 111] Connection refused`), passwords masked."""
    root, seen = exc, {id(exc)}
    while True:
        nxt = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if nxt is None or id(nxt) in seen:
            break
        root = nxt
        seen.add(id(root))
    lines = [line.strip() for line in str(root).splitlines() if line.strip()]
    return display_uri(f"{type(root).__name__}: {lines[0] if lines else ''}")[:300]


class SecretMask(logging.Filter):
    """Mask secrets in the records of a logger: URI passwords (`display_uri`), also where Hydra prints an
    override with its `:` escaped (`tracking.uri=http\\://bob\\:pw@host`), and every override's value as a run's
    params have it (`redact_override`: under a credential-like key, or credential-shaped)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        masked = OVERRIDE_LIKE.sub(lambda m: _mask_word(m.group(0)), text.replace("\\:", ":"))
        if masked != text.replace("\\:", ":"):
            record.msg, record.args = masked, None
        return True


def _mask_word(word: str) -> str:
    if "://" in word:
        return display_uri(word)
    return redact_override(word) if "=" in word else redact_text(word)


def mask_secrets_in_log(*loggers: str) -> None:
    """Install `SecretMask` on these loggers (Hydra's launchers log every job's overrides, the tracking URI and
    any value given on the command line included)."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretMask) for f in logger.filters):
            logger.addFilter(SecretMask())


@contextlib.contextmanager
def quiet_store_logs() -> Iterator[None]:
    """Silence MLflow's and urllib3's own logging for the calls inside: a failing write would log a full
    SQLAlchemy traceback (or a retry warning) each time the shipper retries, hundreds of lines, while
    evalkit reports each kind of failure once, in one line."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "urllib3")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def experiment_id(client: MlflowClient, name: str) -> str:
    """The experiment `name` (created, or restored when deleted), marked for MLflow's training layout."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        exp = found.experiment_id
    else:
        try:
            exp = client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri, name))
        except Exception:  # noqa: BLE001 - a parallel job created it first
            exp = client.get_experiment_by_name(name).experiment_id
    mark_experiment(client, exp)
    return exp


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new experiment of a SQLite store keeps its artifacts: beside the database, in
    `<store folder>/mlruns/<experiment>`. MLflow's default is ./mlruns of whatever directory the first job was
    launched from (so a store set elsewhere still wrote into a read-only launch directory). None for other
    stores: their own default."""
    path = sqlite_path(uri)
    if path is None:
        return None
    return Path(os.path.abspath(path)).parent.joinpath("mlruns", quote(experiment, safe="")).as_uri()


def flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    """Dotted keys for nested dicts; values rendered as strings, secrets redacted (`evalkit.secrets.redact`:
    credential-like keys, and credential-shaped values also inside lists)."""
    if isinstance(tree, dict):
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    key = prefix[:-1]
    return {key[:250]: str(redact(tree, key))[:MAX_PARAM_VALUE]}


def log_params(client: MlflowClient, run_id: str, params: dict[str, str]) -> None:
    items = [Param(k, v) for k, v in params.items()]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])


def set_tags(client: MlflowClient, run_id: str, tags: dict[str, Any]) -> None:
    items = [RunTag(k, str(v)[:MAX_TAG_VALUE]) for k, v in tags.items() if v is not None]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, tags=items[i:i + MAX_PARAMS_PER_BATCH])


def metric(key: str, value: float, step: int, wall: float | None = None) -> Metric:
    return Metric(key, float(value), int((wall or time.time()) * 1000), int(step))


def log_metrics(client: MlflowClient, run_id: str, metrics: Iterable[Metric],
                batch_size: int = MAX_METRICS_PER_BATCH) -> int:
    """Send metrics in log_batch calls of at most `batch_size` points; returns the number sent."""
    items = list(metrics)
    batch_size = min(batch_size, MAX_METRICS_PER_BATCH)
    for i in range(0, len(items), batch_size):
        client.log_batch(run_id, metrics=items[i:i + batch_size])
    return len(items)


def open_client(uri: str, attempts: int = 5) -> MlflowClient:
    """A client whose store exists. A new SQLite store is created (MlflowClient runs its schema migrations)
    under an exclusive lock on the database file, so jobs started together in a fresh directory do not
    migrate it twice. A store that could not be recorded into is refused first (`check_reachable`)."""
    check_reachable(uri)
    path = sqlite_path(uri)
    if path is None:
        return MlflowClient(uri)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    # flock is independent of the POSIX record locks SQLite itself takes on the same file.
    with open(path, "ab") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            for attempt in range(attempts):
                try:
                    return MlflowClient(uri)
                except Exception:  # noqa: BLE001 - a store another process left half-created: retry
                    if attempt == attempts - 1:
                        raise
                    time.sleep(0.5 * (attempt + 1))
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    raise AssertionError("attempts must be at least 1")


def sqlite_path(uri: str) -> str | None:
    """The database file of a `sqlite:///...` URI, or None for any other store."""
    if not uri.startswith("sqlite:///"):
        return None
    return uri[len("sqlite:///"):].split("?", 1)[0] or None
