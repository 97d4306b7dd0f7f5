"""MegaMoE's training step at EP 2 x DP 2 on 4 PEs: its gradients reduced on shmem.all_reduce
beside the same step reduced over gloo, in one run (docs/benchmarks.md, "Reductions and
broadcast").

    python benchmarks/moe/moe_reductions.py [--steps 9] [--rounds 5] [--out DIR]

One job of 4 PEs through the package's launcher, one torch thread per PE. Two decoders of the
MoE suite's "small" shape (hidden 64, intermediate 128, shared 64, 8 experts, top-2, 2 layers,
sequence 128, batch 4; benchmarks/moe/suite.py), both on the SHMEM path over EP groups of 2 and their
DP groups, from the same seed. Rounds alternate them; in a round each runs --steps training
steps (zero_grad, forward, backward, reduce_gradients, AdamW): one with the default reduction
(shmem.all_reduce over the world and the DP group's team), the other with over="gloo". A PE's
figure is the median step time over the rounds, the job's the slowest PE's. Writes
moe_reductions.json to --out and prints the ratio (SHMEM reductions' step / gloo's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.launch import pe_or_drive, run_pes, start_pe  # noqa: E402
from common.report import when, write_json  # noqa: E402
from common.results import emit_on  # noqa: E402

TARGET = 0.9  # the step with SHMEM reductions at most this fraction of gloo's


def _pe(args) -> None:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                              expert_data_parallel_groups,
                                                              make_optimizer, reduce_gradients,
                                                              synthetic_tokens)

    rank, _, handle = start_pe()
    ep_group, dp_group = expert_data_parallel_groups(2)
    config = DecoderConfig(hidden_size=64, intermediate_size=128, shared_intermediate_size=64,
                           num_experts=8, top_k=2, layers=2, sequence=128, batch=4)
    models = {over: MoEDecoder(config, "shmem", seed=3, group=ep_group, dp_group=dp_group)
              for over in ("shmem", "gloo")}
    optimizers = {over: make_optimizer(model) for over, model in models.items()}

    def step(over: str, index: int) -> None:
        model, optimizer = models[over], optimizers[over]
        optimizer.zero_grad(set_to_none=False)
        loss, _ = model.loss(synthetic_tokens(config, rank, index))
        loss.backward()
        reduce_gradients(model, over=over)
        optimizer.step()

    for over in models:
        for index in range(2):
            step(over, index)  # warm-up: buffers, teams, pages
    samples = {over: [] for over in models}
    for round_index in range(args.rounds):
        order = ("shmem", "gloo") if round_index % 2 == 0 else ("gloo", "shmem")
        for over in order:
            dist.barrier()
            started = time.perf_counter()
            for index in range(args.steps):
                step(over, 100 + index)
            elapsed = torch.tensor([(time.perf_counter() - started) / args.steps * 1e3],
                                   dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            samples[over].append(elapsed.item())
    emit_on(rank, {over: {"median_ms": statistics.median(values),
                          "samples_ms": [round(v, 3) for v in values]}
                   for over, values in samples.items()})
    for model in models.values():
        model.close()
    for group in (ep_group, dp_group):
        dist.destroy_process_group(group)
    handle.close()
    dist.destroy_process_group()


def _drive(args) -> int:
    result = run_pes(4, [os.path.abspath(__file__), "--pe", "--steps", str(args.steps),
                         "--rounds", str(args.rounds)], key="shmem")[0]
    ratio = result["shmem"]["median_ms"] / result["gloo"]["median_ms"]
    print(f"MegaMoE EP 2 x DP 2, 4 PEs, small shape: step with SHMEM reductions "
          f"{result['shmem']['median_ms']:.2f} ms, with gloo's {result['gloo']['median_ms']:.2f} "
          f"ms: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'missed'})")
    path = write_json(os.path.join(args.out, "moe_reductions.json"),
                      {"when": when(), "cores": os.cpu_count(), "steps": args.steps,
                       "rounds": args.rounds, "ratio": ratio, **result})
    print(f"wrote {path}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=9, help="training steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    return pe_or_drive(parser, _pe, _drive)


if __name__ == "__main__":
    sys.exit(main())
