"""A fit that returns short of `max_steps` without a stop it declared fails the run, naming how far it trained; a
`sys.exit` from the adapter is named as what it is (issue 48). The worker's judgement, on summaries."""
from __future__ import annotations

from evalkit.worker.run import StoppedShort, error_summary, stopped_short

FRESH = {"start_step_source": "fresh start", "skipped_steps": 0}


def test_a_fit_that_trains_nothing_or_stops_early_without_a_word_is_named():
    assert stopped_short({**FRESH, "last_step": 0}, 6).startswith("trained 0 of 6 optimizer steps: ")
    found = stopped_short({**FRESH, "last_step": 3}, 6)
    assert found.startswith("trained 3 of 6 optimizer steps: ") and "ended_by" in found
    resumed = stopped_short({"start_step_source": "scheduler state", "last_step": 7, "skipped_steps": 0}, 10)
    assert resumed.startswith("stopped at step 7 of 10: ")


def test_a_full_run_a_declared_stop_and_skipped_steps_are_not_short():
    assert stopped_short({**FRESH, "last_step": 6}, 6) is None
    assert stopped_short({**FRESH, "last_step": 3, "ended_by": "its stop callback"}, 6) is None
    assert stopped_short({**FRESH, "last_step": 4, "skipped_steps": 2}, 6) is None   # the GradScaler skipped two
    assert stopped_short({**FRESH, "last_step": 4, "skipped_steps": 1}, 6) is not None
    # micro-batches computed but no optimizer step seen: steps applied by hand (no torch.optim hook fires), not
    # "nothing trained"; the semantic probe answers inconclusive for it (tests/planted/silent_loop.py)
    assert stopped_short({**FRESH, "last_step": 0, "observed_dtypes": {"float32": 12}}, 6) is None
    assert stopped_short({**FRESH, "last_step": 0, "observed_dtypes": {}}, 6) is not None


def test_the_failure_line_is_the_reason_itself_and_a_sys_exit_names_the_step():
    assert error_summary(StoppedShort("trained 0 of 6 optimizer steps: x")) == "trained 0 of 6 optimizer steps: x"
    try:
        raise SystemExit(0)
    except SystemExit as exc:
        line = error_summary(exc, step=2, max_steps=6)
    assert line == ("SystemExit: 0 (the adapter exited the process with sys.exit(0) at step 2 of 6, before its "
                    "fit returned)")
