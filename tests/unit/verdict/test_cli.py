"""End to end on a small real MLflow store: table, report, verdict run, and CI exit codes."""
import json
import os
import re

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from evalkit.analysis.synthetic import ArmPlan, build_store  # noqa: E402
from evalkit.probes.catalog import dimension_names
from evalkit.verdict.cli import main  # noqa: E402

PROBES_NOT_BUILT = ("semantics", "stability", "customization", "maintenance")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    plans = [ArmPlan("baseline"), ArmPlan("lightning"),
             ArmPlan("accelerate", seeds=(0, 1, 2, 3, 4, 5), failed_seeds=(5,), metric_shift=0.05,
                     failure_reason="RuntimeError: CUDA out of memory (planted)")]
    uri, parent = build_store(folder, plans, n_steps=60)
    return uri, parent, folder


def table_rows(stdout: str) -> dict[str, dict[str, str]]:
    """wrapper -> {dimension: cell} from the printed table (columns are separated by 2+ spaces)."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("wrapper "))
    names = re.split(r"\s{2,}", lines[header].strip())
    rows = {}
    for line in lines[header + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(names, cells))
    return rows


@pytest.fixture(scope="module")
def full_run(sweep, tmp_path_factory):
    uri, parent, _ = sweep
    out = tmp_path_factory.mktemp("report")
    import contextlib
    import io

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["--tracking-uri", uri, "--experiment", "evalkit", "--parent-run-id", parent,
                     "--out", str(out), "--fail-on", "consistency", "--wrappers", "accelerate"])
    return code, stdout.getvalue(), stderr.getvalue(), out


def test_table_says_pass_and_fail_where_planted(full_run):
    code, stdout, stderr, _ = full_run
    print(stdout)
    rows = table_rows(stdout)
    assert set(rows) == {"lightning", "accelerate"}, stdout
    assert rows["lightning"]["consistency"].startswith("pass (Δ"), stdout
    assert rows["lightning"]["functional"].startswith("pass"), stdout
    assert rows["lightning"]["performance"].startswith("pass"), stdout
    assert re.match(r"fail \(Δ\+[45]\.\d+% \[.*\] \d+(\.\d+)?% CI; sweep, no probe\)",
                    rows["accelerate"]["consistency"]), stdout
    assert rows["accelerate"]["functional"] == "fail (1/6 runs failed)", stdout
    for row in rows.values():
        assert all(row[d] == "not run" for d in PROBES_NOT_BUILT), stdout
    assert "Reasons for every fail:" in stdout and "CUDA out of memory (planted)" in stdout
    assert "val/mse systematically worse" in stdout
    assert "Overall ranking" in stdout
    assert code == 3, stderr


def test_report_files_are_self_contained(full_run):
    _, _, _, out = full_run
    html = (out / "verdict.html").read_text()
    assert html.count('src="data:image/png;base64,') >= 3
    assert not re.search(r'src="(?!data:)', html), "the HTML must not load anything from outside"
    markdown = (out / "verdict.md").read_text()
    assert "| accelerate |" in markdown and "![" in markdown
    for name in re.findall(r"\]\((plots/[^)]+)\)", markdown):
        assert (out / name).is_file()
    data = json.loads((out / "verdict.json").read_text())
    statuses = {r["arm"]["trainer"]: {d: v["status"] for d, v in r["dimensions"].items()} for r in data["rows"]}
    assert statuses["accelerate"]["consistency"] == "fail" and statuses["lightning"]["consistency"] == "pass"
    assert set(statuses["lightning"]) == set(dimension_names())


def test_verdict_run_is_logged_with_its_json(sweep, full_run, tmp_path):
    from mlflow.tracking import MlflowClient

    uri, parent, _ = sweep
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalkit")
    runs = client.search_runs([exp.experiment_id], "tags.\"evalkit.role\" = 'verdict'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.tags["evalkit.parent_run_id"] == parent
    assert runs[0].data.metrics["verdict/fails/consistency"] == 1
    path = client.download_artifacts(runs[0].info.run_id, "verdict/verdict.json", str(tmp_path))
    data = json.loads(open(path).read())
    assert data["schema"] == "evalkit.verdict/2" and len(data["rows"]) == 2
    names = {f.path for f in client.list_artifacts(runs[0].info.run_id, "verdict")}
    assert {"verdict/verdict.html", "verdict/verdict.md"} <= names


@pytest.mark.parametrize("wrappers, expected", [("lightning", 0), ("accelerate", 3), ("", 3),
                                                ("lightning/aligned", 0)])
def test_exit_code_gates_on_chosen_wrappers(sweep, wrappers, expected, capsys):
    uri = sweep[0]
    args = ["--tracking-uri", uri, "--fail-on", "consistency", "--no-log"]
    assert main(args + (["--wrappers", wrappers] if wrappers else [])) == expected
    assert main(["--tracking-uri", uri, "--no-log", "--fail-on", "semantics,performance"]) == 0


@pytest.mark.parametrize("fail_on, expected", [
    ("semantics", 0), ("semantics,inconclusive", 0),            # not run: the gate lets it through unless asked
    ("semantics,not-run", 3), ("not-run", 3),                    # words alone gate all seven
    ("consistency,functional,inconclusive,not-run", 0),           # judged and passed: nothing to fail on
])
def test_fail_on_can_also_refuse_inconclusive_and_not_run_cells(sweep, fail_on, expected, capsys):
    assert main(["--tracking-uri", sweep[0], "--no-log", "--wrappers", "lightning", "--fail-on", fail_on]) == expected
    err = capsys.readouterr().err
    if expected:
        assert "semantics (not run)" in err.split("CI gate failed")[1], err
    elif fail_on.startswith("semantics"):
        assert "add inconclusive,not-run to --fail-on" in err, err


@pytest.mark.parametrize("args, message", [
    (["--experiment", "nope"], "unknown experiment 'nope'"),
    (["--sweep-id", "absent"], "no evalkit job or probe runs"),
    (["--fail-on", "speed"], "unknown dimension"),
    (["--fail-on", ""], "--fail-on: empty"),            # issue 48: an empty gate is not 'no gate'
    (["--fail-on", " , "], "--fail-on: empty"),
    (["--wrappers", "composer", "--fail-on", "functional"], "no arm for ['composer']"),
    (["--scenario", "startup"], "--scenario 'startup' unknown"),
    (["--margin", "mse"], "expected [TASK:]METRIC=REL"),
])
def test_bad_input_exits_2_with_one_message(sweep, args, message, capsys):
    assert main(["--tracking-uri", sweep[0], "--no-log"] + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit-verdict: error:") and message in err[0], err


def test_missing_store_exits_2_without_creating_it(tmp_path, capsys):
    assert main(["--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"]) == 2
    assert "no MLflow store" in capsys.readouterr().err and not (tmp_path / "none.db").exists()
