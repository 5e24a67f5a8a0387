"""The typed effective config (`evalkit.contract.effective`): a deviation explains a finding by its code, never by words
of its text; what an adapter reports is recorded and read back unchanged."""
from __future__ import annotations

import pytest

from evalkit.contract.effective import Departure, Deviation, EffectiveConfig, QuickStartPage, finding_family

ALREADY = Deviation("resume.finished_run_restarts", "Engine.run on a state that already reached max_iters starts a "
                    "new run from iteration 0")


@pytest.mark.parametrize("deviation, finding, explains", [
    (Deviation("lr.per_epoch", "scheduler stepped once per epoch"), "lr.per_epoch", True),     # its own code
    (Deviation("lr", "the LR follows the wrapper's own rule"), "lr.per_micro_batch", True),    # its family
    (Deviation("lr", "the LR follows the wrapper's own rule"), "unexplained.lr", True),       # what was checked
    (Deviation("lr.per_epoch", "scheduler stepped once per epoch"), "lr.per_micro_batch", False),   # a sibling
    (Deviation("l", "a prefix of the family"), "lr.per_epoch", False),
    (Deviation("window", "windows of the wrapper's own"), "unexplained.lr", False),
    (ALREADY, "lr.per_micro_batch", False),             # "lr" is in "already": words are never compared
    (ALREADY, "unexplained.lr", False),
])
def test_a_deviation_explains_a_finding_by_its_code_or_family_only(deviation, finding, explains):
    assert deviation.explains(finding) is explains


def test_a_findings_family():
    assert [finding_family(c) for c in ("clip.not_applied", "unexplained.update", "threads.changed")] == [
        "clip", "update", "threads"]


@pytest.mark.parametrize("code", ["", "Lr.per_epoch", "lr per epoch", "lr.", ".lr", "lr..x"])
def test_a_deviation_code_is_dotted_lower_case_words(code):
    with pytest.raises(ValueError, match="deviation code"):
        Deviation(code, "some text")


def test_what_an_adapter_reports_is_recorded_and_read_back_unchanged():
    config = EffectiveConfig(mode="defaults", deviations=[ALREADY], aligns={"lr": "a LambdaLR"},
                             quick_start=[QuickStartPage("https://x.org/quick", "1.0", "step 2")],
                             departures=[Departure("the model", "evalkit built it", "model")],
                             details={"wrapper": "x", "nested": {"n": 1}})
    recorded = config.as_json()
    assert recorded["deviations"] == [{"code": ALREADY.code, "text": ALREADY.text}] and recorded["wrapper"] == "x"
    assert EffectiveConfig.of(recorded) == config
    aligned = EffectiveConfig(explicit_settings={"seed": 1}).as_json()      # no quick start in aligned mode
    assert "quick_start" not in aligned and aligned["explicit_settings"] == {"seed": 1}


def test_a_deviation_of_evalkits_choice_is_recorded_as_such_and_read_back():
    ours = Deviation("lr.per_epoch", "the run's per-step schedule in the per-epoch slot", by="evalkit")
    recorded = EffectiveConfig(deviations=[ours, ALREADY]).as_json()["deviations"]
    assert recorded == [{"code": "lr.per_epoch", "text": ours.text, "by": "evalkit"},
                        {"code": ALREADY.code, "text": ALREADY.text}]
    assert EffectiveConfig.of({"deviations": recorded}).deviations == [ours, ALREADY]
    assert ours.declared.startswith("evalkit's setting") and ALREADY.declared == ALREADY.text
    with pytest.raises(ValueError, match="by='page'"):
        Deviation("lr", "text", by="page")


def test_a_plain_dict_is_read_as_one_and_a_typed_key_of_the_wrong_shape_is_refused():
    plain = EffectiveConfig.of({"loop": "third party", "known_deviations": ["old words"]})
    assert plain.deviations == [] and plain.details == {"loop": "third party", "known_deviations": ["old words"]}
    with pytest.raises(ValueError, match="wrong shape"):
        EffectiveConfig.of({"deviations": ["the LR scheduler is stepped by the wrapper's own rule"]})
