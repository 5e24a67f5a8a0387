"""A team's tracking server for the tests (scripts/team_server.py: `mlflow server` with basic auth over PostgreSQL),
the secrets every command of those tests carries, and what a run logged, read back whole."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from helpers import PLANTED

# ------------------------------------------------------------------ a team's tracking server
ADMIN_PASSWORD = "Adm1n-Team-pw-4f9Qz"
# Token-, password- and key-like values, in the environment of every command and in the config of every job.
SECRET_ENV = {"EVALKIT_TEST_API_TOKEN": "hf_Qm7Vn2Lp9Xr4Tz8Wk3Jd6Hs1Fb5Gc0Ya",
              "DATABASE_PASSWORD": "pgTeam-Pa55word-9931",
              "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTEAMKEY01",
              "OPENAI_API_KEY": "sk-proj-4Hd8Kq2Lm7Np3Rt6Vx9Zb1Cf5Gj0Sw"}
CONFIG_SECRETS = {"note": "ghp_Tm9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcB", "mirror_password": "mirror-Pa55-7731"}
# A job whose config holds them: the baseline as tests/planted/noted_loop.py's NotedAdapter, which takes these
# free-text options (a bundled adapter refuses a key it does not read); run with NOTED_ENV.
NOTED = ["trainer._target_=noted_loop.NotedAdapter", "trainer.name=noted",
         *(f"+trainer.options.{key}={value}" for key, value in CONFIG_SECRETS.items())]
NOTED_ENV = {"PYTHONPATH": os.pathsep.join(p for p in (str(PLANTED), os.environ.get("PYTHONPATH")) if p)}


class Team:
    """A team's server (scripts/team_server.py: `mlflow server` with MLflow's basic auth over PostgreSQL): its
    address, the environment a team member's commands run with."""

    def __init__(self, folder: Path):
        self.pg, self.server = start_team_server(folder, admin_password=ADMIN_PASSWORD)
        self.url = self.server.url
        self.env = {**SECRET_ENV, "MLFLOW_TRACKING_URI": self.url, "MLFLOW_TRACKING_USERNAME": "admin",
                    "MLFLOW_TRACKING_PASSWORD": ADMIN_PASSWORD}

    def client(self):
        from mlflow.tracking import MlflowClient

        os.environ.update(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=ADMIN_PASSWORD)
        return MlflowClient(self.url)

    def close(self) -> None:
        self.server.stop()
        self.pg.cleanup()


def everything_logged(client, run, folder: Path) -> str:
    """Every param, tag and metric key of a run, and the text of every artifact it has (downloaded)."""
    parts = [f"{k}={v}" for k, v in {**run.data.params, **run.data.tags}.items()] + list(run.data.metrics)
    target = folder / run.info.run_id
    target.mkdir()
    if client.list_artifacts(run.info.run_id):
        client.download_artifacts(run.info.run_id, "", str(target))
    for path in target.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


# A real `mlflow server` (and PostgreSQL from a wheel) started by a test: scripts/team_server.py, which also starts
# one for a person to try a team's set-up by hand.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from team_server import MlflowServer, postgres_database, start_team_server  # noqa: E402,F401
