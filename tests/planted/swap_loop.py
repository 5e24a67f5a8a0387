"""The hand-written loop behind an adapter whose "wrapper" runs fp16_mixed on CPU as fp32 without a word, as
Accelerate (`mixed_precision="fp16"`) and the transformers Trainer (`fp16=True`) do (planted for
tests/e2e/test_probe_functional.py; importable with tests/planted on PYTHONPATH).

- aligned mode: the adapter refuses the job, as the bundled Accelerate and transformers adapters do, with
  `UnsupportedCombination` of kind silent-substitution: the functional probe fails the item (issue 28), it is no
  documented exemption;
- defaults mode: it trains in fp32 (autocast off, no scaler) where fp16_mixed was asked, as the wrapper would: the
  observed precision differs from the asked one and the item fails the same way.
"""
from __future__ import annotations

from evalkit.adapters.baseline import BaselineAdapter
from evalkit.contract import Precision, TrainJob, UnsupportedCombination

FP32 = Precision("fp32", None, False)


class PrecisionSwapAdapter(BaselineAdapter):
    def fit(self, job: TrainJob) -> None:
        if job.precision.name == "fp16_mixed" and job.device.type == "cpu":
            if self.mode == "aligned":
                raise UnsupportedCombination(
                    "the wrapper runs fp16_mixed on cpu as fp32 without a word; refused in aligned mode",
                    UnsupportedCombination.SUBSTITUTION)
            job.precision = FP32          # what the wrapper does with it
        super().fit(job)
