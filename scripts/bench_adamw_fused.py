#!/usr/bin/env python
"""Does the Trainer's default optimizer explain its defaults-mode speed? On CPU, `TrainingArguments()` picks
`optim="adamw_torch_fused"` (`torch.optim.AdamW(fused=True)`); the baseline builds `torch.optim.AdamW(...)` with
torch's default implementation. This times one training step (forward, backward, optimizer step) of the
performance probe's model (mlp_regression, hidden 256, batch 32) with each optimizer, the two taking turns block by
block in one process on the same thread count, and prints the milliseconds per step, the optimizer step alone, and
the ratio. Nothing of evalkit's instrumentation is in the loop: it isolates the optimizer.

    python scripts/bench_adamw_fused.py                     # depths 2 and 32 (the quick preset's), 1 thread
    python scripts/bench_adamw_fused.py --depths 2 8 32 --threads 2 --blocks 40
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from evalkit.tasks import catalog


def model_and_batch(depth: int, hidden: int, batch: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    task = catalog.mlp_regression(0, n_train=batch, n_val=1, in_dim=32, hidden=hidden, depth=depth, out_dim=1,
                                  noise=0.1)
    x, y = task.train_set.tensors
    return task.model, x, y


class Arm:
    """One optimizer on its own copy of the model; `block` runs `steps` training steps and returns (total s,
    optimizer-step s)."""

    def __init__(self, depth: int, hidden: int, batch: int, fused: bool):
        self.model, self.x, self.y = model_and_batch(depth, hidden, batch)
        kwargs = {"fused": True} if fused else {}
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.0, **kwargs)
        self.loss = torch.nn.MSELoss()

    def block(self, steps: int) -> tuple[float, float]:
        in_step = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            self.opt.zero_grad(set_to_none=True)
            self.loss(self.model(self.x), self.y).backward()
            t = time.perf_counter()
            self.opt.step()
            in_step += time.perf_counter() - t
        return time.perf_counter() - start, in_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 32])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=30, help="blocks per arm, taking turns")
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), hidden {args.hidden}, batch {args.batch}, "
          f"{args.blocks} blocks of {args.steps} steps per arm, taking turns")
    for depth in args.depths:
        arms = {"default": Arm(depth, args.hidden, args.batch, False), "fused": Arm(depth, args.hidden, args.batch,
                                                                                    True)}
        for arm in arms.values():
            arm.block(args.steps)                                   # warm-up
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        for _ in range(args.blocks):
            for name, arm in arms.items():
                times[name].append(arm.block(args.steps))
        ms = {name: (statistics.median(t for t, _ in ts) / args.steps * 1e3,
                     statistics.median(o for _, o in ts) / args.steps * 1e3) for name, ts in times.items()}
        (d_step, d_opt), (f_step, f_opt) = ms["default"], ms["fused"]
        print(f"depth {depth:3d}: step {d_step:6.2f} ms (optimizer {d_opt:5.2f}) default AdamW | {f_step:6.2f} ms "
              f"(optimizer {f_opt:5.2f}) fused | fused/default {f_step / d_step:.3f} "
              f"({(f_step - d_step) / d_step:+.1%} of the step)")


if __name__ == "__main__":
    main()
