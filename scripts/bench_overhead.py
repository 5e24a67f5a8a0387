"""What evalkit's measuring costs, measured side by side in one run (ratios, never absolute targets).

1. Observer overhead, per model width (`task.hidden`; default 256, about 3 ms steps on CPU, and 1024, the
   default width): three variants of the baseline loop in one process, interleaved in rounds: bare (only the
   minimal step clock every variant carries: one global optimizer post hook), observed with the `timing`
   profile (what timed probe jobs run) and observed with the `full` profile. Each round runs every variant for
   one block of steps, in an order rotated through the six permutations (ABC ACB BAC BCA CAB CBA ...), so a
   drift of the machine, and each block's position, fall on all variants alike. A round's ratio is a
   profile's median step time over bare's in that round; printed: the median ratio over rounds with its
   interquartile range, each profile's cost per step in ms, and the target: timing profile <= 1.02.
2. Shipping cost per metric point: evalkit's spool -> log_batch shipping vs one `log_metric` call per
   point, on the same SQLite store. Target: >= 30x cheaper.

    python scripts/bench_overhead.py [--task mlp_regression] [--widths 256,1024] [--blocks 12]
                                     [--block-steps 60] [--skip 5] [--points 1000]
                                     [Hydra overrides: hardware=cuda, precision=bf16_mixed]

The default invocation takes about two minutes on a 2-core CPU machine; on a shared machine the rounds'
spread says how far the medians can be trusted.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from dataclasses import dataclass

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch  # noqa: E402
from hydra import compose, initialize_config_module  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402

from evalkit import names  # noqa: E402
from evalkit.adapters.baseline import BaselineAdapter  # noqa: E402
from evalkit.config import register_configs  # noqa: E402
from evalkit.controller.job.run import caliber  # noqa: E402
from evalkit.observe.observer import Observer  # noqa: E402
from evalkit.spool import SpoolWriter  # noqa: E402
from evalkit.worker.run import build_task, make_job, resolve_device  # noqa: E402

BARE, TIMING, FULL = "bare", "timing", "full"
VARIANTS = (BARE, TIMING, FULL)
ORDERS = list(itertools.permutations(VARIANTS))     # round r runs ORDERS[r % 6]
TARGET = 1.02


def _compose(overrides: list[str]):
    register_configs()
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=overrides)


@dataclass
class Overhead:
    """One width's rounds: per round, each variant's step time (CPU: the block's median step; CUDA: its mean)."""

    width: int
    caliber: str
    rounds: list[dict[str, float]]

    def ratios(self, profile: str) -> list[float]:
        return [r[profile] / r[BARE] for r in self.rounds]

    def cost_ms(self, profile: str) -> float:
        """The profile's cost per step: the median over rounds of its step time minus bare's, in ms."""
        return statistics.median(r[profile] - r[BARE] for r in self.rounds) * 1e3

    def step_ms(self, variant: str) -> float:
        return statistics.median(r[variant] for r in self.rounds) * 1e3


def observer_overhead(task: str, width: int, blocks: int, block_steps: int, skip: int,
                      overrides: list[str]) -> Overhead:
    """`blocks` rounds of the three variants at `task.hidden=width`, `block_steps` optimizer steps per block,
    the first `skip` steps of each block left out (they are also the observers' warm-up steps)."""
    cfg = _compose([f"task={task}", f"train.max_steps={block_steps}", "train.val_every=0", *overrides,
                    f"task.hidden={width}"])
    task_obj = build_task(cfg)
    device = resolve_device(cfg.hardware.device, 0)
    stamps: list[float] = []

    def tick(*_) -> None:
        stamps.append(time.perf_counter())

    clock = register_optimizer_step_post_hook(tick)
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        spool = SpoolWriter(tmp, 0)
        for r in range(blocks):
            times: dict[str, float] = {}
            for variant in ORDERS[r % len(ORDERS)]:
                job = make_job(cfg, task_obj, device, {"ckpt_dir": os.path.join(tmp, "ckpt")})
                job.ckpt_every, job.max_steps = 10**9, block_steps
                observer = None if variant == BARE else Observer(
                    task_obj, spool, job.device, warmup_steps=skip, profile=variant,
                    sample_ids=variant == FULL).attach()
                stamps.clear()
                _fit(job)
                if observer:
                    observer.detach()
                times[variant] = _block_step_time(stamps, skip, device)
            rounds.append(times)
        spool.close()
    clock.remove()
    return Overhead(width, caliber(cfg), rounds)


def _block_step_time(stamps: list[float], skip: int, device: torch.device) -> float:
    if device.type == "cuda":
        # Per-step stamps would only time the CPU's queueing: the block's mean step time, from the step after
        # `skip` until the device finished the last one.
        torch.cuda.synchronize(device)
        return (time.perf_counter() - stamps[skip]) / (len(stamps) - 1 - skip)
    return statistics.median([b - a for a, b in zip(stamps, stamps[1:])][skip:])


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return "(one round: no spread)"
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"(IQR {q1:.4f}-{q3:.4f} over {len(values)} rounds)"


def report(result: Overhead, task: str, block_steps: int, overrides: list[str]) -> None:
    print(f"observer overhead on {task} task.hidden={result.width} {' '.join(overrides)}".rstrip()
          + f" (caliber {result.caliber}, {len(result.rounds)} rounds x {block_steps} steps per variant, "
            "order rotated):")
    print(f"  median step time: bare {result.step_ms(BARE):.3f} ms, timing {result.step_ms(TIMING):.3f} ms, "
          f"full {result.step_ms(FULL):.3f} ms")
    for profile in (TIMING, FULL):
        ratios = result.ratios(profile)
        print(f"  {profile}/bare = {statistics.median(ratios):.4f} {_spread(ratios)}; "
              f"{profile} profile costs {result.cost_ms(profile):+.3f} ms per step")
    met = statistics.median(result.ratios(TIMING)) <= TARGET
    print(f"  timing profile <= {TARGET}: {'met' if met else 'NOT met'}")


def _fit(job) -> None:
    adapter = BaselineAdapter()
    adapter._save = lambda *a, **k: None        # checkpoint writes are not what this bench measures
    adapter.fit(job)


def shipping_cost(points: int) -> tuple[float, float, float]:
    from mlflow.tracking import MlflowClient

    from evalkit.controller.job.shipper import Shipper
    from evalkit.spool import SpoolWriter as Writer

    per_step = 4    # train/loss, train/lr, train/grad_norm, train/step_time_s
    with tempfile.TemporaryDirectory() as tmp:
        client = MlflowClient(f"sqlite:///{tmp}/bench.db")
        exp = client.create_experiment("bench")
        writer = Writer(os.path.join(tmp, names.SPOOL_DIR), 0)
        for step in range(1, points // per_step + 1):
            writer.add({"kind": "step", "step": step, "wall": time.time(), "dt": 0.01, "lr": [1e-3],
                        "grad_norm": 0.5, "loss": 1.0 / step, "loss_scale": None})   # no scaler: no point
        writer.close()
        shipped = client.create_run(exp).info.run_id
        t0 = time.perf_counter()
        sent = Shipper(client, shipped, os.path.join(tmp, names.SPOOL_DIR), 1).poll(final=True)
        ship_s = time.perf_counter() - t0
        assert sent == points, sent
        naive = client.create_run(exp).info.run_id
        t0 = time.perf_counter()
        for i in range(points):
            client.log_metric(naive, "train/loss", 1.0 / (i + 1), step=i)
        naive_s = time.perf_counter() - t0
    return (naive_s / points) / (ship_s / points), ship_s / points, naive_s / points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="mlp_regression")
    parser.add_argument("--widths", default="256,1024", help="model widths (task.hidden), comma-separated")
    parser.add_argument("--blocks", type=int, default=12, help="rounds: blocks per variant and width")
    parser.add_argument("--block-steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=5, help="steps at the start of each block left out")
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the job, e.g. hardware=cuda")
    args = parser.parse_args()
    if args.blocks < 1 or args.block_steps < args.skip + 3:
        parser.error("--blocks must be >= 1 and --block-steps >= --skip + 3")
    widths = [int(w) for w in args.widths.split(",") if w.strip()]
    torch.set_num_threads(max(1, torch.get_num_threads()))
    for width in widths:
        result = observer_overhead(args.task, width, args.blocks, args.block_steps, args.skip, args.overrides)
        report(result, args.task, args.block_steps, args.overrides)
    speedup, ship, naive = shipping_cost(args.points)
    print(f"shipping {args.points} metric points to SQLite: evalkit {ship * 1e6:.1f} us/point, "
          f"log_metric {naive * 1e6:.1f} us/point = {speedup:.1f}x cheaper "
          f"(target >= 30x: {'PASS' if speedup >= 30 else 'MISS'})")


if __name__ == "__main__":
    main()
