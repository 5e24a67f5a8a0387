"""The first screen's sentences say what a documented refusal left unjudged (issue 44): a column passed with world
size 2 never judged is no plain pass there either. Built from the semantics judge on recorded evidence: the
baseline's world-size-1 jobs beside Poutyne's world-size-2 jobs as recorded (refused as documented-unsupported)."""
from __future__ import annotations

import json

from helpers import FIXTURES
from probe_runs import verdict_cell
from semantics_runs import recorded_evidence

from evalkit.probes.semantics.judge import judge
from evalkit.verdict.plain import Evidence, sentence


def test_a_pass_with_world_size_2_refused_says_world_size_2_was_not_judged():
    ws1 = [j for j in recorded_evidence(FIXTURES / "semantics" / "baseline.json") if j.world_size == 1]
    ws2 = [j for j in recorded_evidence(FIXTURES / "semantics" / "wrappers" / "poutyne.defaults.json.gz")
           if j.world_size == 2]
    result = json.loads(judge(ws1 + ws2).to_json())
    said = sentence(Evidence("semantics", verdict_cell("semantics", result, "poutyne"), result, result["figures"]))
    assert said.startswith("Trains step for step like your loop (")
    assert said.endswith("no difference); world size 2 not judged (documented as unsupported).")
    every = json.loads(judge(ws1).to_json())
    plain = sentence(Evidence("semantics", verdict_cell("semantics", every, "handwritten"), every, every["figures"]))
    assert "not judged" not in plain
