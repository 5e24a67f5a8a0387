"""Did each customization take effect? Decided from the job's records alone.

Custom loss: every optimizer step's recorded update must equal `-lr * g`, g the gradient of the custom formula
(task loss + l1_weight * mean |output|) at the recorded parameters before the step, on the samples the
observers saw that step (the semantic probe's float64 oracle, its calibrated tolerance). An update that equals
the task loss's alone is "the custom loss was ignored".
Custom callback: its `custom/param_norm` reports (`TrainJob.log_value`) must come once per optimizer step, after
the step (the value is the L2 norm of the parameters recorded after that step), and training must end after
`stop_at_step` steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.probes.customization.plan import CALLBACK, LOSS, PARAM_NORM
from evalkit.probes.evidence import JobEvidence
from evalkit.probes.findings import Finding
from evalkit.probes.semantics.oracle import GradientOracle, ObservedStep, expected_update, observed_steps

NORM_REL_TOL = 1e-5        # the callback's norm against the recorded parameters' (stored to 9 digits)


@dataclass
class Verification:
    """One customization's outcome: verified, or the findings that say how it did not take effect."""

    customization: str
    verified: bool
    detail: str                                   # one line: what was checked, what was seen
    findings: list[Finding] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)


def _failed(customization: str, job: JobEvidence) -> Verification:
    why = job.failure_reason or job.status
    finding = Finding(f"{customization}.run_failed", f"the {customization} customization's run ended {job.status}",
                      job.name, None, observed=why, size=why[:200], explainable=False)
    return Verification(customization, False, f"run ended {job.status}: {why[:200]}", [finding])


class CustomLossOracle(GradientOracle):
    """The task's model in float64, its micro-batch gradients those of the custom loss."""

    def __init__(self, config: dict[str, Any], l1_weight: float):
        super().__init__(config)
        task_loss = self.loss_fn
        self.loss_fn = lambda out, y: task_loss(out, y) + l1_weight * out.abs().mean()


def _gap(step: ObservedStep, predicted: np.ndarray) -> float:
    return float(np.linalg.norm(step.delta - predicted) / max(np.linalg.norm(predicted), 1e-30))


def check_loss(job: JobEvidence, l1_weight: float) -> Verification:
    if job.status != "FINISHED":
        return _failed(LOSS, job)
    notes: list[str] = []
    custom = observed_steps(job, CustomLossOracle(job.config, l1_weight), notes)
    plain = {s.step: s for s in observed_steps(job, GradientOracle(job.config))}
    if not custom:
        return Verification(LOSS, False, "no step could be checked: " + "; ".join(notes or ["no steps recorded"]),
                            [Finding("loss.unchecked", "no optimizer step could be checked", job.name, None,
                                     observed="; ".join(notes), explainable=False)])
    matches = [s.matches(expected_update(s, None)) for s in custom]
    plain_matches = [s.step in plain and plain[s.step].matches(expected_update(plain[s.step], None)) for s in custom]
    distinct = [_gap(s, expected_update(plain[s.step], None)) for s in custom if s.step in plain]
    figures = {"loss_steps_checked": len(custom), "loss_steps_matching": sum(matches)}
    if all(matches):
        return Verification(LOSS, True, f"every update of {len(custom)} steps follows the custom loss's gradient "
                            f"(the task loss alone would differ by {min(distinct or [0.0]):.1%} or more)",
                            figures=figures)
    first = custom[matches.index(False)]
    if all(plain_matches):
        title, code = "the custom loss was ignored: every update follows the task loss alone", "loss.ignored"
    else:
        title, code = "updates follow neither the custom loss nor the task loss", "loss.neither"
    size = f"{sum(not m for m in matches)}/{len(custom)} steps; step {first.step}'s update is " \
           f"{_gap(first, expected_update(first, None)):.1%} off the custom loss's"
    finding = Finding(code, title, job.name, first.step, size=size, explainable=False)
    return Verification(LOSS, False, f"{title} ({size})", [finding], figures)


def check_callback(job: JobEvidence, stop_at_step: int) -> Verification:
    if job.status != "FINISHED":
        return _failed(CALLBACK, job)
    calls = [v for v in job.values if v.get("name") == PARAM_NORM]
    steps_run = max((int(r["step"]) for r in job.steps), default=0)
    max_steps = int(job.config.get("train", {}).get("max_steps", 0))
    figures = {"callback_calls": len(calls), "callback_steps_run": steps_run}
    findings: list[Finding] = []

    def add(code: str, title: str, first_step: int | None, size: str) -> None:
        findings.append(Finding(code, title, job.name, first_step, expected=None, size=size, explainable=False))

    seen = [int(c["step"]) for c in calls]
    if not calls:
        add("callback.never_fired", "the callback was registered but never fired", None,
            f"0 reports in {steps_run} optimizer steps")
    else:
        counts = {s: seen.count(s) for s in sorted(set(seen))}
        expected = list(range(1, steps_run + 1))
        if sorted(set(seen)) == list(range(0, steps_run)) and all(n == 1 for n in counts.values()):
            add("callback.before_step", "the callback fires before the optimizer step, not after it", 1,
                f"reports at steps 0..{steps_run - 1}")
        elif any(n > 1 for n in counts.values()):
            many = max(counts.values())
            add("callback.per_micro_batch", "the callback fires more than once per optimizer step", min(
                s for s, n in counts.items() if n > 1), f"up to {many} reports per step ({len(calls)} in "
                f"{steps_run} steps)")
        elif seen != expected:
            missing = [s for s in expected if s not in counts]
            add("callback.missed_steps", "the callback does not fire after every optimizer step",
                missing[0] if missing else None, f"{len(calls)} reports in {steps_run} steps; none after steps "
                f"{_span(missing)}")
        wrong = _wrong_values(job, calls)
        if wrong and not findings:
            step, got, want = wrong[0]
            add("callback.wrong_value", "the callback's value is not the parameters' norm after the step", step,
                f"{len(wrong)} reports off; step {step}: {got:.9g} vs {want:.9g}")
    if steps_run != stop_at_step:
        late = steps_run > stop_at_step
        title = ("training did not stop when the callback asked" if steps_run >= max_steps and late
                 else "training stopped late" if late else "training stopped early")
        add("callback.stop", title, min(steps_run, stop_at_step) + 1 if late else steps_run + 1,
            f"{steps_run} steps run, stop asked after step {stop_at_step}")
    detail = (f"{len(calls)} reports, one after each of the {steps_run} optimizer steps; training ended after step "
              f"{stop_at_step} as asked" if not findings else "; ".join(f.title for f in findings))
    return Verification(CALLBACK, not findings, detail, findings, figures)


def _wrong_values(job: JobEvidence, calls: list[dict]) -> list[tuple[int, float, float]]:
    out = []
    for call in calls:
        step = int(call["step"])
        if step not in job.params:
            continue
        want = float(np.linalg.norm(job.params[step]))
        got = float(call["value"])
        if abs(got - want) > NORM_REL_TOL * max(abs(want), 1e-30):
            out.append((step, got, want))
    return out


def _span(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:6])) + (f" (+{len(steps) - 6} more)" if len(steps) > 6 else "")
