"""The custom loss with Fabric: the loop's loss line, changed (Fabric has no loop of its own)."""
from __future__ import annotations

from evalkit.adapters.custom.options import L1Weight
from evalkit.adapters.fabric import FabricAdapter


class FabricCustomLoss(L1Weight, FabricAdapter):
    def training_loss(self, model, loss_fn, x, y):
        out = model(x)
        return loss_fn(out, y) + self.l1_weight * out.abs().mean()
