"""The results documents (docs/results/<versions>.md): what each wrapper did, as one stored evaluation measured it.

The one source of each is a snapshot of an evaluation's store (`docs/results/<versions>.json`, beside it): the
verdict's cells and, per probe, trainer and mode, the newest probe run's status, headline, figures and findings, with
the versions they ran at; `<versions>` is made of those versions (`results_name`), so an evaluation of other
versions gets a document of its own. The document is rendered from the snapshot alone, so a table can only say what
that evaluation measured, and a test checks that each committed document is the rendering of its committed snapshot:
a claim cannot go stale silently, it goes stale with its date and versions printed above it. The README's excerpt
of the newest one (`verdict_excerpt`) is rendered from it the same way.

    python scripts/docs.py snapshot --tracking-uri sqlite:///mlflow.db   # after `evalkit-eval`: snapshot + documents
    python scripts/docs.py write                                         # every generated document, from its source
"""
from __future__ import annotations

import json
import tempfile

from evalkit import names
from evalkit.probes.catalog import dimension, dimension_names
from evalkit.probes.findings import Finding, ProbeResult

SCHEMA = "evalkit.findings/1"
FINDING_FIELDS = ("code", "title", "job", "first_step", "size", "explained_by", "knob")


def probe_entry(tags: dict, result: ProbeResult, run_id: str) -> dict:
    """One probe run as the snapshot keeps it: no series, no evidence, only what the document shows."""
    return {"probe": tags.get(names.PROBE, result.dimension), "trainer": tags.get(names.TRAINER, "?"),
            "mode": tags.get(names.MODE, "aligned"), "version": tags.get(names.WRAPPER_VERSION, "?"),
            "torch": tags.get(names.TORCH_VERSION, "?"), "run_id": run_id, "status": result.status,
            "headline": result.headline, "reason": result.reason, "figures": dict(sorted(result.figures.items())),
            "findings": [{k: getattr(f, k) for k in FINDING_FIELDS} for f in result.findings]}


def take_snapshot(client, experiment: str = "evalkit", taken: str = "") -> dict:
    """The newest finished probe run per (probe, trainer, mode) and the newest verdict run of `experiment`; each
    trainer's version as its newest training job recorded it."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise ValueError(f"no experiment {experiment!r} in this store: run `evalkit-eval` first")
    query = f"tags.`{names.ROLE}` = '{names.ROLE_PROBE}' and attributes.status = 'FINISHED'"
    newest: dict[tuple, object] = {}
    for run in client.search_runs([exp.experiment_id], query, order_by=["attributes.start_time DESC"],
                                  max_results=5000):
        t = run.data.tags
        newest.setdefault((t.get(names.PROBE), t.get(names.TRAINER), t.get(names.MODE)), run)
    # each trainer's version as its own training jobs recorded it (a probe run's tag may be its control arm's)
    jobs = client.search_runs([exp.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_JOB}'",
                              order_by=["attributes.start_time DESC"], max_results=5000)
    versions: dict[str, str] = {}
    for run in jobs:
        if run.data.tags.get(names.WRAPPER_VERSION):
            versions.setdefault(run.data.tags.get(names.TRAINER, "?"), run.data.tags[names.WRAPPER_VERSION])
    probes, commits = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for (probe, _, _), run in sorted(newest.items(), key=lambda kv: tuple(map(str, kv[0]))):
            path = client.download_artifacts(
                run.info.run_id, f"{names.PROBE_ARTIFACT_DIR}/{names.probe_result_file(probe)}", tmp)
            with open(path) as fh:
                entry = probe_entry(run.data.tags, ProbeResult.from_json(fh.read()), run.info.run_id)
                entry["version"] = versions.get(entry["trainer"], entry["version"])
                probes.append(entry)
            commits.add(run.data.tags.get(names.MLFLOW_GIT_COMMIT, "")[:10])
        verdicts = client.search_runs([exp.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_VERDICT}'",
                                      order_by=["attributes.start_time DESC"], max_results=1)
        rows = []
        if verdicts:
            path = client.download_artifacts(
                verdicts[0].info.run_id, f"{names.VERDICT_ARTIFACT_DIR}/{names.VERDICT_JSON_FILE}", tmp)
            with open(path) as fh:
                rows = verdict_rows(json.load(fh))
    if not probes and not rows:
        raise ValueError(f"experiment {experiment!r} holds no finished probe run and no verdict: nothing to show")
    return {"schema": SCHEMA, "taken": taken, "evalkit_commit": ", ".join(sorted(c for c in commits if c)) or "?",
            "verdict": rows, "probes": probes}


def verdict_rows(data: dict) -> list[dict]:
    """The snapshot's rows of a verdict (its `verdict.json`): per arm, each dimension's cell as text."""
    return [{"trainer": r["arm"]["trainer"], "mode": r["arm"]["mode"], "task": r["arm"]["task"],
             "caliber": r["arm"]["caliber"], "cells": {d: _cell(cell) for d, cell in r["dimensions"].items()}}
            for r in data["rows"]]


def columns(rows: list[dict]) -> list[str]:
    """The dimensions a snapshot's verdict rows hold, in the table's order (one stored before a probe existed has
    no cell of it)."""
    return [d for d in dimension_names() if all(d in r["cells"] for r in rows)]


def _cell(dim: dict) -> str:
    return f"{dim['status']} ({dim['figure']})" if dim.get("figure") else dim["status"]


def _esc(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def _row(cells) -> str:
    return "| " + " | ".join(_esc(c) for c in cells) + " |"


def results_name(snapshot: dict) -> str:
    """The name of a snapshot's document and file: torch's version, then each wrapper's, in trainer order
    (`torch-2.13.0+cpu_accelerate-1.16.0_fabric-2.6.6`)."""
    probes = snapshot.get("probes", [])
    torch = sorted({p["torch"] for p in probes if p.get("torch") not in (None, "?")})
    wrappers = sorted({(p["trainer"], p["version"]) for p in probes if p["trainer"] != "baseline"})
    parts = [f"torch-{v}" for v in torch] + [f"{t}-{v}" for t, v in wrappers]
    if not parts:
        raise ValueError("the snapshot names no version: nothing to name its document by")
    return "_".join(parts).replace("/", "-").replace(" ", "-")


def verdict_excerpt(snapshot: dict, document: str) -> str:
    """The README's excerpt of a snapshot: each wrapper's cells in aligned mode (status only), the cells of each probe
    of differences (`Dimension.differences`) in both modes (in full), and the link to the whole `document`."""
    rows = {(r["trainer"], r["mode"]): r for r in snapshot["verdict"]}
    if not rows:
        raise ValueError("the snapshot holds no verdict: nothing to excerpt")
    trainers = sorted({t for t, _ in rows})
    first = next(iter(snapshot["verdict"]))
    dims = columns(snapshot["verdict"])
    out = [f"The quick evaluation of {snapshot.get('taken') or '(date not recorded)'} (task {first['task']}, caliber "
           f"`{first['caliber']}`), aligned mode:", "", _row(["trainer", *dims]), "|" + "---|" * (1 + len(dims))]
    out += [_row([t, *(rows[t, "aligned"]["cells"][d].split(" (", 1)[0] for d in dims)])
            for t in trainers if (t, "aligned") in rows]
    for dim in (d for d in dims if dimension(d).differences):
        out += ["", f"Its {dim} cells, each wrapper as its documented quick start writes it (`defaults`) and with "
                    "every documented knob set to the baseline's semantics (`aligned`):", "",
                _row(["trainer", "defaults", "aligned"]), "|---|---|---|"]
        out += [_row([t, *(rows[t, m]["cells"][dim] if (t, m) in rows else "-" for m in ("defaults", "aligned"))])
                for t in trainers]
    return "\n".join(out + ["", f"Every cell with its figures and reasons: [{document}]({document})."])


def render(snapshot: dict) -> str:
    """A results document from a snapshot: a header saying where it comes from, then one section per table."""
    if snapshot.get("schema") != SCHEMA:
        raise ValueError(f"not a findings snapshot ({snapshot.get('schema')!r}; expected {SCHEMA})")
    probes = snapshot["probes"]
    versions = sorted({(p["trainer"], p["version"]) for p in probes if p["trainer"] != "baseline"})
    torch = sorted({p["torch"] for p in probes})
    lines = ["# What each wrapper did, as one evaluation measured it", "",
             f"<!-- generated by scripts/docs.py from {results_name(snapshot)}.json beside it: do not edit -->", "",
             f"Taken {snapshot.get('taken') or '(date not recorded)'} at evalkit {snapshot['evalkit_commit']}, torch "
             f"{', '.join(torch) or '?'}, " + ", ".join(f"{t} {v}" for t, v in versions) + ". Every line below is "
             "what that evaluation's probe runs and verdict recorded; a newer version of a wrapper, or of evalkit's "
             "judges, may say otherwise: run `evalkit-eval`, then `python scripts/docs.py snapshot` to record it "
             "(a document of its own when the versions differ). What each probe does and how it judges: "
             "[docs/probes/](../probes/).", ""]
    lines += _verdict_section(snapshot["verdict"]) + _headlines_section(probes)
    for dim in (d for d in dimension_names() if dimension(d).differences):
        for mode in ("defaults", "aligned"):
            lines += _differences_section(probes, dim, mode)
    lines += _long_run_section(probes)
    return "\n".join(lines).rstrip() + "\n"


def _verdict_section(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    dims = columns(rows)
    out = ["## The verdict", "", _row(["trainer", "mode", *dims]), "|" + "---|" * (2 + len(dims))]
    out += [_row([r["trainer"], r["mode"], *(r["cells"][d] for d in dims)])
            for r in sorted(rows, key=lambda r: (r["trainer"], r["mode"]))]
    return out + ["", f"Task {rows[0]['task']}, caliber `{rows[0]['caliber']}`; every reason is in the report.", ""]


def _headlines_section(probes: list[dict]) -> list[str]:
    """Each probe's cell per trainer and mode: its status and headline."""
    by = {(p["trainer"], p["mode"], p["probe"]): p for p in probes}
    arms = sorted({(p["trainer"], p["mode"]) for p in probes})
    shown = [d for d in dimension_names("asks") if any(p["probe"] == d for p in probes)]
    if not arms:
        return []
    out = ["## Every probe, per wrapper and mode", "", _row(["trainer", "mode", *shown]),
           "|" + "---|" * (2 + len(shown))]
    for trainer, mode in arms:
        cells = []
        for d in shown:
            p = by.get((trainer, mode, d))
            cells.append("-" if p is None else p["status"] + (f": {p['headline']}" if p["headline"] else ""))
        out.append(_row([trainer, mode, *cells]))
    return out + [""]


def _differences_section(probes: list[dict], dim: str, mode: str) -> list[str]:
    """The findings of a probe whose findings are differences from your loop (`Dimension.differences`), in `mode`."""
    rows = sorted((p for p in probes if p["probe"] == dim and p["mode"] == mode), key=lambda p: p["trainer"])
    if not rows:
        return []
    aligned = {p["trainer"]: {f["code"] for f in p["findings"]} for p in probes
               if p["probe"] == dim and p["mode"] == "aligned"} if mode == "defaults" else {}
    out = [f"## The {dim} probe, `{mode}` mode", "",
           "| wrapper (version) | what differs from the baseline | why (what reproduces it) | first step (job) "
           "| setting that aligns it |", "|---|---|---|---|---|"]
    for p in rows:
        head = f"{p['trainer']} ({p['version']})"
        if not p["findings"]:
            out.append(_row([head, "nothing: every step as the oracle's" if p["status"] == "pass"
                             else f"{p['status']}: {p['headline'] or p['reason']}", "", "", ""]))
        for i, f in enumerate(p["findings"]):
            finding = Finding(**{k: f[k] for k in FINDING_FIELDS})
            why = finding.explained_by[0] if finding.explained_by else f"unexplained ({finding.size})"
            knob = finding.knob
            if knob and p["trainer"] in aligned and finding.code not in aligned[p["trainer"]]:
                knob += " (verified: aligned mode shows none)"
            out.append(_row([head if i == 0 else "", f"`{finding.code}` {finding.title}",
                             "" if why == finding.title else why, f"{finding.first_step} ({finding.job})", knob]))
    return out + [""]


def _long_run_section(probes: list[dict]) -> list[str]:
    """The long runs' RSS slopes, of whichever probe records them (`leak_kib_per_1k_steps`)."""
    rows = [p for p in probes if "leak_kib_per_1k_steps" in p["figures"]]
    if not rows:
        return []
    title = f"## The {' and '.join(sorted({p['probe'] for p in rows}))} probe's long run"
    out = [title, "", "RSS slope in KiB per 1,000 steps [95 % interval], the wrapper's "
           "and the baseline's long run beside it in the same probe run.", "",
           "| trainer | mode | the wrapper's slope | the baseline's |", "|---|---|---|---|"]
    for p in sorted(rows, key=lambda p: (p["trainer"], p["mode"])):
        fig = p["figures"]
        out.append(_row([p["trainer"], p["mode"], _slope(fig, "leak"), _slope(fig, "baseline_leak")]))
    return out + [""]


def _slope(fig: dict, prefix: str) -> str:
    """'815 [748, 882]' from the figures <prefix>_kib_per_1k_steps, <prefix>_low, <prefix>_high ('-' if absent)."""
    if f"{prefix}_kib_per_1k_steps" not in fig:
        return "-"
    low, high = fig.get(f"{prefix}_low"), fig.get(f"{prefix}_high")
    interval = f" [{low:.0f}, {high:.0f}]" if low is not None and high is not None else ""
    return f"{fig[f'{prefix}_kib_per_1k_steps']:.0f}{interval}"
