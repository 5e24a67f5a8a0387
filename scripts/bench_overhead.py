"""What evalkit's measuring costs, measured side by side in one run (ratios, never absolute targets).

1. Observer overhead: the baseline loop with evalkit's observers vs the same loop without them,
   interleaved in blocks in one process; both variants carry the same minimal step clock (one global
   optimizer post-hook), so the ratio isolates the observers. Target: median ratio <= 1.02.
2. Shipping cost per metric point: evalkit's spool -> log_batch shipping vs one `log_metric` call per
   point, on the same SQLite store. Target: >= 30x cheaper.

    python scripts/bench_overhead.py [--task mlp_regression] [--blocks 12] [--block-steps 60] [--points 1000]
                                     [Hydra overrides: task.hidden=256, hardware=cuda, precision=bf16_mixed]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch  # noqa: E402
from hydra import compose, initialize_config_module  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402

from adapters.baseline import BaselineAdapter  # noqa: E402
from evalkit.config import register_configs  # noqa: E402
from evalkit.controller.job import caliber  # noqa: E402
from evalkit.observe.observer import Observer  # noqa: E402
from evalkit.spool import SpoolWriter  # noqa: E402
from evalkit.worker.run import build_task, make_job, resolve_device  # noqa: E402


def _compose(overrides: list[str]):
    register_configs()
    with initialize_config_module("evalkit.conf", version_base=None):
        return compose("config", overrides=overrides)


def observer_overhead(task: str, blocks: int, block_steps: int, skip: int,
                      overrides: list[str]) -> tuple[float, float, float]:
    cfg = _compose([f"task={task}", f"train.max_steps={block_steps}", "train.val_every=0", *overrides])
    task_obj = build_task(cfg)
    device = resolve_device(cfg.hardware.device, 0)
    stamps: list[float] = []

    def tick(*_) -> None:
        stamps.append(time.perf_counter())

    clock = register_optimizer_step_post_hook(tick)
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        spool = SpoolWriter(tmp, 0)
        for block in range(2 * blocks):
            observed = (block % 2 == 0) == ((block // 2) % 2 == 0)     # ABBA order: O U U O O U ...
            job = make_job(cfg, task_obj, device, {"ckpt_dir": os.path.join(tmp, "ckpt")})
            job.ckpt_every, job.max_steps = 10**9, block_steps
            observer = Observer(task_obj, spool, job.device, warmup_steps=0).attach() if observed else None
            stamps.clear()
            _fit(job)
            if observer:
                observer.detach()
            if device.type == "cuda":
                # Per-step stamps would only time the CPU's queueing: one block's mean step time, from the
                # step after `skip` until the device finished the last one.
                torch.cuda.synchronize(device)
                times[observed].append((time.perf_counter() - stamps[skip]) / (len(stamps) - 1 - skip))
            else:
                times[observed].extend([b - a for a, b in zip(stamps, stamps[1:])][skip:])
        spool.close()
    clock.remove()
    with_obs, without = statistics.median(times[True]), statistics.median(times[False])
    return with_obs / without, with_obs, without, caliber(cfg)


def _fit(job) -> None:
    adapter = BaselineAdapter()
    adapter._save = lambda *a, **k: None        # checkpoint writes are not what this bench measures
    adapter.fit(job)


def shipping_cost(points: int) -> tuple[float, float, float]:
    from mlflow.tracking import MlflowClient

    from evalkit.controller.ship import Shipper
    from evalkit.spool import SpoolWriter as Writer

    per_step = 4    # train/loss, train/lr, train/grad_norm, train/step_time_s
    with tempfile.TemporaryDirectory() as tmp:
        client = MlflowClient(f"sqlite:///{tmp}/bench.db")
        exp = client.create_experiment("bench")
        writer = Writer(os.path.join(tmp, "spool"), 0)
        for step in range(1, points // per_step + 1):
            writer.add({"kind": "step", "step": step, "wall": time.time(), "dt": 0.01, "lr": [1e-3],
                        "grad_norm": 0.5, "loss": 1.0 / step, "loss_scale": None})   # no scaler: no point
        writer.close()
        shipped = client.create_run(exp).info.run_id
        t0 = time.perf_counter()
        sent = Shipper(client, shipped, os.path.join(tmp, "spool"), 1).poll(final=True)
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
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--block-steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=5, help="steps at the start of each block left out")
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the task, e.g. task.hidden=256")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    ratio, with_obs, without, cal = observer_overhead(args.task, args.blocks, args.block_steps, args.skip,
                                                      args.overrides)
    print(f"observer overhead on {args.task} {' '.join(args.overrides)} (caliber {cal}, "
          f"{args.blocks}x{args.block_steps} steps per variant, ABBA-interleaved):")
    print(f"  median step time observed {with_obs * 1e3:.3f} ms / unobserved {without * 1e3:.3f} ms"
          f" = ratio {ratio:.4f}  (target <= 1.02: {'PASS' if ratio <= 1.02 else 'MISS'}); "
          f"observers cost {(with_obs - without) * 1e3:+.3f} ms per step")
    speedup, ship, naive = shipping_cost(args.points)
    print(f"shipping {args.points} metric points to SQLite: evalkit {ship * 1e6:.1f} us/point, "
          f"log_metric {naive * 1e6:.1f} us/point = {speedup:.1f}x cheaper "
          f"(target >= 30x: {'PASS' if speedup >= 30 else 'MISS'})")


if __name__ == "__main__":
    main()
