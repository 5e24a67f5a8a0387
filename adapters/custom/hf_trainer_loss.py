"""The custom loss with the transformers Trainer: a Trainer subclass overriding `compute_loss`, the documented way
(the Trainer still divides the returned loss for gradient accumulation)."""
from __future__ import annotations

from evalkit.adapters.custom.options import L1Weight
from evalkit.adapters.hf_trainer import HFTrainerAdapter


class HFTrainerCustomLoss(L1Weight, HFTrainerAdapter):
    def trainer_class(self) -> type:
        l1_weight = self.l1_weight

        class L1Trainer(super().trainer_class()):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                outputs = model(**inputs)
                loss = outputs["loss"] + l1_weight * outputs["logits"].abs().mean()
                return (loss, outputs) if return_outputs else loss

        return L1Trainer
