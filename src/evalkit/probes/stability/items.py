"""The stability probe's items other than resumes: damaged checkpoints offered to a resume, an error at step k.

What is judged is what the wrapper did, as a user would see it: a resume offered a damaged checkpoint
counts as refusing it only when its failure can be laid at the checkpoint's door (a resume of an intact copy of the
same checkpoint succeeded, or the failure names the checkpoint); a crash for another reason is no evidence either
way. An error raised at step k counts as shown only when it propagated: a wrapper that catches it and ends the
process with `sys.exit(0)` leaves a user an exit status 0 and a finished job, whatever evalkit's worker made of it
(it records every exception, SystemExit included, as a failure: the exit status the wrapper asked for is kept as
evidence in the worker's summary, `system_exit`).
"""
from __future__ import annotations

import re

from evalkit import names
from evalkit.probes.evidence import JobEvidence

PASS, FAIL, NOT_EXERCISED = "pass", "fail", "not exercised"
NOT_CLAIMED = "not claimed"      # a drill the wrapper refused as documented-unsupported (evalkit.probes.refusals)
OOM_MARKERS = ("out of memory", "outofmemoryerror")
LOSS_MARKERS = ("error in the loss function",)
# A failure that names the checkpoint: the word, a loader's error (torch.load's unpickler and zip reader,
# load_state_dict's mismatch), or evalkit's own checksum refusal.
CHECKPOINT_MARKERS = ("checkpoint", "state_dict", "unpickl", "pytorchstreamreader", "zip archive", "central directory",
                      "corruptcheckpoint", "eoferror", "ran out of input", "weights_only", "safetensor")
# Damage a plain torch.save/torch.load loop does not see: torch.load checks no checksum, so 256 inverted bytes in
# tensor data load without a word (tests/unit/probes/stability/test_judge.py checks it on this torch). A wrapper
# failing this item fails it the way the hand-written loop it replaces would, unless that loop adds a checksum.
SHARED_WITH_TORCH = {"flipped": "shared with plain torch: torch.load checks no checksum"}
SYSTEM_EXIT = re.compile(r"^(?:rank \d+: )?SystemExit: ?(\S*)")


def names_checkpoint(job: JobEvidence) -> bool:
    reason = job.failure_reason.lower()
    where = str(job.config.get("resume_from") or "").lower()
    return any(m in reason for m in CHECKPOINT_MARKERS) or bool(where and where in reason)


def refused_damaged(job: JobEvidence, kind: str, intact: JobEvidence | None = None) -> tuple[str, str]:
    """(status, outcome) of a resume offered a damaged checkpoint. It fails when it trained on (the damage
    accepted or the checkpoint ignored). A failure counts as refusing the damage when `intact` (a resume of an
    undamaged copy of the same checkpoint) succeeded, or, without that control, when the failure names the
    checkpoint; otherwise it is not exercised (the wrapper may fail every resume, or crash for another reason).
    A job that took optimizer steps before it failed did not refuse anything: it trained on the damage (or from
    scratch), whatever ended it."""
    if job.status != "FINISHED" and job.steps:
        return FAIL, _trained_on(job, kind) + f", then failed ({job.failure_reason or job.status})"
    if job.status != "FINISHED":
        reason = job.failure_reason or f"ended {job.status}"
        if intact is not None and intact.status == "FINISHED" and intact.steps:
            return PASS, f"refused it (the intact copy's resume, {intact.name}, trained on): {reason}"
        if intact is not None:
            return NOT_EXERCISED, (f"the resume failed ({reason}), but so did the resume of an intact copy "
                                   f"({intact.name}: {intact.failure_reason or intact.status}): the failure says "
                                   "nothing about the damage; make the wrapper resume an intact checkpoint first")
        if names_checkpoint(job):
            return PASS, f"refused it: {reason}"
        return NOT_EXERCISED, (f"the resume failed ({reason}) without naming the checkpoint, and no resume of an "
                               "intact copy ran to tell a refusal from a crash for another reason (probe.only: "
                               "include its item's jobs)")
    if not job.steps:
        shared = f" ({SHARED_WITH_TORCH[kind]})" if kind in SHARED_WITH_TORCH else ""
        return FAIL, f"exited 0 without training: the {kind} checkpoint was accepted without a word{shared}"
    return FAIL, _trained_on(job, kind)


def _trained_on(job: JobEvidence, kind: str) -> str:
    """What a resume offered a damaged checkpoint did with it, read from the steps it took."""
    shared = f" ({SHARED_WITH_TORCH[kind]})" if kind in SHARED_WITH_TORCH else ""
    first, last = int(job.steps[0]["step"]), int(job.steps[-1]["step"])
    if first == 1:
        return f"started again from step 1 without a word (the {kind} checkpoint was ignored)"
    return f"loaded the {kind} checkpoint and trained steps {first}..{last} on it{shared}"


def exit_status(job: JobEvidence) -> int | None:
    """The exit status the wrapper asked for with `sys.exit` (SystemExit), from the worker's summary
    (`system_exit`), else from the failure reason the worker wrote (`SystemExit: <code>`); None: it did not."""
    recorded = job.summary.get("system_exit")
    if isinstance(recorded, dict) and recorded.get("status") is not None:
        return int(recorded["status"])
    found = SYSTEM_EXIT.match(job.failure_reason)
    if not found:
        return None
    code = found.group(1)
    if code in ("", "None") or code.startswith("("):     # sys.exit() / sys.exit(None), then "(caused by ...)"
        return 0
    return int(code) if code.lstrip("-").isdigit() else 1    # a message: Python prints it and exits 1


def error_at_step(job: JobEvidence, step: int, markers: tuple[str, ...], what: str) -> tuple[bool, str]:
    """An error raised at step k: the run must end non-zero, the error visible, the records up to k - 1 kept."""
    numbers = [int(s["step"]) for s in job.steps]
    last = numbers[-1] if numbers else 0
    if job.status == "FINISHED" or names.FIT_RETURNED_SHORT in job.failure_reason:
        past = f", trained on to step {last}" if last >= step else ""
        caught = "" if job.status == "FINISHED" else \
            "; evalkit failed the run, as its fit returned short of max_steps without a declared stop"
        return False, f"exited 0 after the {what} at step {step} (swallowed{past}{caught})"
    code = exit_status(job)
    if code == 0:
        return False, (f"the wrapper caught the {what} and exited with status 0 (sys.exit): the error did not "
                       f"propagate (a user sees a finished job; evalkit's worker recorded {job.failure_reason[:80]})")
    if last >= step:
        return False, f"trained on past the {what} at step {step} (to step {last}) before failing: retried silently"
    problems = []
    reason = job.failure_reason
    if not any(m in reason.lower() for m in markers):
        problems.append(f"the {what} is not in the failure reason ({reason or 'none'})")
    if last != step - 1:
        problems.append(f"records kept up to step {last}, not {step - 1}")
    if problems:
        return False, "; ".join(problems)
    how = f"exited with status {code} (sys.exit) after showing the error" if code is not None else \
        "with the error shown"
    return True, f"ended {job.status} {how} ({reason[:120]}), steps 1..{last} kept"
