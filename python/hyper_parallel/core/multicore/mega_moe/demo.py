"""The MegaMoE demo: a small MoE decoder trained on N PEs, on SHMEM and on all-to-all.

    python -m hyper_parallel.core.multicore.mega_moe.demo [--pes N] [--steps S]

Every PE builds the same decoder (mega_moe.model, seeded, synthetic tokens) twice: once with
MegaMoE layers (dispatch and combine on SHMEM) and once with the all-to-all layers (gloo), and
trains both with AdamW on one batch of tokens per PE (so the loss visibly falls). PE 0 prints each step's loss (mean over the PEs) of both paths side by
side with their largest difference and step times, then the SHMEM pipeline's counters.
"""

from __future__ import annotations

import argparse
import sys
import time


def run_pe(steps: int) -> int:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                              make_optimizer, parameter_count,
                                                              synthetic_tokens, train_step)
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)  # one core per PE
    init_process_group_from_environment()
    rank, size = dist.get_rank(), dist.get_world_size()
    config = DecoderConfig(num_experts=2 * size, layers=2, sequence=64, batch=4)
    ok = True
    with shmem.acquire_shmem():
        models = {path: MoEDecoder(config, path, seed=0) for path in ("shmem", "a2a")}
        try:
            optimizers = {path: make_optimizer(model) for path, model in models.items()}
            if rank == 0:
                print(f"decoder: {config.layers} layers, hidden {config.hidden_size}, "
                      f"{config.num_experts} experts (top {config.top_k}, {config.num_experts // size}"
                      f" per PE) + a shared expert, {parameter_count(models['a2a'])} parameters "
                      f"per PE; {config.batch}x{config.sequence} tokens per PE per step",
                      flush=True)
                print(f"{'step':>4}  {'loss shmem':>12}  {'loss a2a':>12}  {'|diff|':>9}  "
                      f"{'shmem ms':>9}  {'a2a ms':>9}", flush=True)
            for step in range(steps):
                tokens = synthetic_tokens(config, rank, 0)  # one batch: the loss falls
                losses, times = {}, {}
                for path, model in models.items():
                    shmem.barrier()
                    started = time.perf_counter()
                    loss, _ = train_step(model, optimizers[path], tokens)
                    times[path] = torch.tensor([time.perf_counter() - started])
                    losses[path] = loss.reshape(1)
                for value in list(losses.values()):
                    dist.all_reduce(value)
                    value /= size
                for value in times.values():
                    dist.all_reduce(value, op=dist.ReduceOp.MAX)
                diff = abs(float(losses["shmem"]) - float(losses["a2a"]))
                ok = ok and diff <= 1e-4 * abs(float(losses["a2a"]))
                if rank == 0:
                    print(f"{step:>4}  {float(losses['shmem']):>12.6f}  {float(losses['a2a']):>12.6f}"
                          f"  {diff:>9.2e}  {1e3 * float(times['shmem']):>9.1f}"
                          f"  {1e3 * float(times['a2a']):>9.1f}", flush=True)
            stats = models["shmem"].resources.stats
            if rank == 0:
                print(f"PE 0 SHMEM pipeline: {stats.calls} dispatch/combine calls, "
                      f"{stats.started_early} of {stats.experts} experts started while a later "
                      f"expert's rows were still arriving; heap held "
                      f"{models['shmem'].resources.symmetric_bytes} bytes", flush=True)
        finally:
            for model in models.values():
                model.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0 if ok else 1


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyper_parallel.core.multicore.mega_moe.demo",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, default=2, help="number of PEs (default 2)")
    parser.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.steps <= 1000:
        parser.error(f"--steps must be in [1, 1000], but got {args.steps}")
    if args.worker:
        return run_pe(args.steps)
    if not 1 <= args.pes <= 16:
        parser.error(f"--pes must be in [1, 16], but got {args.pes}")
    from hyper_parallel.core.multicore.shmem.launch import run_pes

    print(f"MegaMoE demo: {args.pes} PEs, SHMEM path beside the all-to-all path", flush=True)
    code = run_pes(args.pes, [sys.executable, "-m", "hyper_parallel.core.multicore.mega_moe.demo",
                              "--worker", "--steps", str(args.steps)], timeout_s=600)
    print("both paths trained alike" if code == 0 else "the paths disagreed or a PE failed",
          flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
