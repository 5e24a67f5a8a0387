"""The custom loss in Lightning: a LightningModule subclass overriding `training_step`."""
from __future__ import annotations

from evalkit.adapters.custom.options import L1Weight
from evalkit.adapters.lightning_trainer import LightningAdapter


class LightningCustomLoss(L1Weight, LightningAdapter):
    def module_class(self) -> type:
        l1_weight = self.l1_weight

        class L1Module(super().module_class()):
            def training_step(self, batch, batch_idx):
                x, y = batch
                out = self(x)
                return self.loss_fn(out, y) + l1_weight * out.abs().mean()

        return L1Module
