"""The custom loss with Accelerate: the loop's loss line, changed (Accelerate has no loop of its own)."""
from __future__ import annotations

from evalkit.adapters.accelerate_loop import AccelerateAdapter
from evalkit.adapters.custom.options import L1Weight


class AccelerateCustomLoss(L1Weight, AccelerateAdapter):
    def training_loss(self, net, loss_fn, x, y):
        out = net(x)
        return loss_fn(out, y) + self.l1_weight * out.abs().mean()
