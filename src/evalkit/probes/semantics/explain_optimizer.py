"""The optimizer a wrapper stepped against the one the run names (`train.optimizer`, `weight_decay`, `momentum`,
`betas`; torch's defaults for the rest): read from the optimizer record (`observe/optimizer_groups.py`), so a wrapper
that builds its own optimizer from its arguments is judged on what it built. Findings:
- `optim.other`: another optimizer class than the one named;
- `wd.skipped`: weight decay asked, but some parameters sit in a group without it (which ones);
- `wd.unasked`: weight decay in some group where the run asks for none;
- `optim.hyper`: another hyperparameter (weight decay, momentum, betas, eps, nesterov, dampening, amsgrad, maximize);
- `optim.unoptimized`: parameters of the model in no param group (never updated);
- `lr.per_group`: param groups stepped with different LRs (the run names one).
The recorded groups are then what the update check replays (`update_rule.observed_rule`), so each of these is named
once and its updates are still checked.
"""
from __future__ import annotations

from typing import Any, Callable

from evalkit.probes.findings import Finding
from evalkit.probes.semantics.update_rule import ASKED_EPS

CLASSES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
OPTIM_KNOB = "the run's optimizer built by the user's code and handed to the wrapper (or named in its arguments)"
WD_KNOB = "one param group over every parameter with the run's weight_decay"


def asked_hyperparameters(train: dict[str, Any]) -> dict[str, Any]:
    """What torch.optim's constructor gets from evalkit's make_optimizer, as the optimizer record writes it."""
    name = str(train.get("optimizer") or "sgd")
    wd = float(train.get("weight_decay") or 0.0)
    if name == "sgd":
        return {"weight_decay": wd, "momentum": float(train.get("momentum") or 0.0), "dampening": 0.0,
                "nesterov": False, "maximize": False}
    return {"weight_decay": wd, "betas": [float(b) for b in train.get("betas") or (0.9, 0.999)], "eps": ASKED_EPS,
            "amsgrad": False, "maximize": False}


def _differs(seen: Any, asked: Any) -> bool:
    if isinstance(asked, list):
        return not isinstance(seen, list) or len(seen) != len(asked) or any(map(_differs, seen, asked))
    if isinstance(asked, float):
        return seen is None or abs(float(seen) - asked) > 1e-12 * max(1.0, abs(asked))
    return seen != asked


def _names(params: list[str], limit: int = 6) -> str:
    more = f" and {len(params) - limit} more" if len(params) > limit else ""
    return ", ".join(params[:limit]) + more


def check_optimizer(job: str, config: dict[str, Any], records: list[dict[str, Any]],
                    declared: Callable[[str], str]) -> list[Finding]:
    if not records:
        return []
    train = config.get("train", {})
    record, step = records[0], int(records[0].get("step") or 1)
    name = str(train.get("optimizer") or "sgd")
    base = dict(job=job, first_step=step)
    found: list[Finding] = []
    seen_class = str(record.get("class"))
    if seen_class.lower() != name:
        found.append(Finding(code="optim.other", title="another optimizer than the one the run names",
                             expected=CLASSES.get(name, name), observed=f"{record.get('module')}.{seen_class}",
                             size=f"{seen_class} instead of {CLASSES.get(name, name)}",
                             explained_by=[f"the wrapper built {seen_class} itself"], knob=OPTIM_KNOB,
                             declared=declared("optim.other"), **base))
        return found + _groups(record, train, base, declared, hyper=False)
    return found + _groups(record, train, base, declared, hyper=True)


def _groups(record: dict[str, Any], train: dict[str, Any], base: dict, declared, hyper: bool) -> list[Finding]:
    asked = asked_hyperparameters(train)
    wd = asked["weight_decay"]
    groups = record.get("groups") or []
    found: list[Finding] = []
    undecayed = [p for g in groups if wd and not float(g.get("weight_decay") or 0.0) for p in g.get("params", [])]
    if undecayed:
        total = sum(len(g.get("params", [])) for g in groups)
        found.append(Finding(code="wd.skipped", title="weight decay skipped on some parameters",
                             expected=f"weight_decay={wd:g} on every parameter",
                             observed=f"0 on {len(undecayed)} of {total} parameter tensors",
                             size=f"no decay on {_names(undecayed)}",
                             explained_by=[f"a param group without weight decay holding {_names(undecayed)}"],
                             knob=WD_KNOB, declared=declared("wd.skipped"),
                             evidence={"undecayed": undecayed}, **base))
    unasked = [p for g in groups if not wd and float(g.get("weight_decay") or 0.0) for p in g.get("params", [])]
    if unasked:
        rates = sorted({float(g["weight_decay"]) for g in groups if float(g.get("weight_decay") or 0.0)})
        found.append(Finding(code="wd.unasked", title="weight decay the run does not ask for",
                             expected="weight_decay=0", observed=f"weight_decay {rates}",
                             size=f"decay {rates} on {_names(unasked)}",
                             explained_by=[f"the wrapper's optimizer decays {_names(unasked)}"], knob=WD_KNOB,
                             declared=declared("wd.unasked"), evidence={"decayed": unasked}, **base))
    if hyper:
        other = {}
        for g in groups:
            for key, want in asked.items():
                if key != "weight_decay" and key in g and _differs(g[key], want):
                    other.setdefault(key, (g[key], want))
            rate = float(g.get("weight_decay") or 0.0)
            if wd and rate and _differs(rate, wd):
                other.setdefault("weight_decay", (rate, wd))
        if other:
            words = "; ".join(f"{k} {seen} where {want} asked" for k, (seen, want) in other.items())
            found.append(Finding(code="optim.hyper", title="optimizer hyperparameters differ from the run's",
                                 expected={k: w for k, (_, w) in other.items()},
                                 observed={k: s for k, (s, _) in other.items()}, size=words,
                                 explained_by=[f"the wrapper's optimizer: {words}"], knob=OPTIM_KNOB,
                                 declared=declared("optim.hyper"), **base))
    unoptimized = list(record.get("unoptimized") or [])
    if unoptimized:
        found.append(Finding(code="optim.unoptimized", title="parameters the optimizer never updates",
                             expected="every parameter in a param group", observed=_names(unoptimized),
                             size=f"{len(unoptimized)} parameter tensor(s) in no param group",
                             explained_by=[f"{_names(unoptimized)} left out of the optimizer"], knob=OPTIM_KNOB,
                             declared=declared("optim.unoptimized"), **base))
    return found


def check_group_lrs(job: str, rows: list[dict[str, Any]], declared: Callable[[str], str]) -> list[Finding]:
    """Several param groups whose LRs differ at some step (the run names one LR schedule for all)."""
    for row in sorted(rows, key=lambda r: r["step"]):
        groups = row.get("lr_groups")
        lrs = [float(v) for v in str(groups).split()] if groups not in (None, "") else []
        if lrs and max(lrs) - min(lrs) > 1e-12 * max(1.0, max(abs(v) for v in lrs)):
            return [Finding(code="lr.per_group", title="param groups stepped with different LRs", job=job,
                            first_step=int(row["step"]), expected="one LR for every group", observed=lrs,
                            size=f"LRs {lrs} at step {row['step']}",
                            explained_by=["param groups with their own LR (or schedule)"],
                            knob="one LR and schedule for every param group", declared=declared("lr.per_group"))]
    return []
