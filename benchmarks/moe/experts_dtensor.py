"""MegaMoE's experts as DTensors against the same layer with plain local shards, in one run
(docs/benchmarks.md, "MegaMoE: the experts as DTensors").

    python benchmarks/moe/experts_dtensor.py [--rounds 5] [--calls 100] [--out bench-results]

One PE (a world of 1 over gloo on loopback, one torch intra-op thread) builds two equal layers
from one seed: "dtensor", the layer as it is (experts Shard(0) over the EP mesh), and "plain",
the same layer with its experts turned back into plain local parameters (the layout before
they became DTensors). Dispatch and combine are the same code on both; what differs is how the
expert weights reach the compute and how their gradients come back. Three things are timed,
the two layers alternating call by call so that the machine's load falls on both alike:
  - forward: route, dispatch, the experts, combine;
  - forward + backward (gradients set to None before each, torch's default zero_grad);
  - an AdamW step over the experts' weights (foreach, as mega_moe.model.make_optimizer).
A round's figure is the least of --calls calls after warm-up; the table shows the median over
--rounds rounds of each layout and their ratio, and goes to experts_dtensor.json in --out.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.report import write_json  # noqa: E402

H, I, E, TOP_K, TOKENS = 64, 128, 8, 2, 256


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _least(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.mega_moe import MegaMoE

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0",
                      WORLD_SIZE="1")
    dist.init_process_group("gloo")
    names = ("gate_proj", "up_proj", "down_proj")
    results: dict = {"dtensor": {}, "plain": {}}
    try:
        with shmem.acquire_shmem():
            layers = {}
            for layout in ("dtensor", "plain"):
                torch.manual_seed(0)
                layers[layout] = MegaMoE(H, I, E, TOP_K)
            plain = layers["plain"]
            plain.mesh = None  # the layer then computes on plain parameters, as before
            for name in names:
                setattr(plain, name, torch.nn.Parameter(getattr(plain, name).detach().to_local()
                                                        .clone()))
            x = torch.randn(TOKENS, H, generator=torch.Generator().manual_seed(1))
            optimizers = {layout: torch.optim.AdamW([getattr(layer, n) for n in names],
                                                    lr=1e-4, foreach=True)
                          for layout, layer in layers.items()}

            def forward(layer):
                with torch.no_grad():
                    layer(x)

            def forward_backward(layer):
                layer.zero_grad()
                layer(x).sum().backward()

            def adamw(layout):
                optimizers[layout].step()

            cases = {"forward": lambda layout: forward(layers[layout]),
                     "forward + backward": lambda layout: forward_backward(layers[layout]),
                     "AdamW step (experts)": adamw}
            for layout in layers:  # warm-up, and gradients for the optimizer steps
                for _ in range(10):
                    forward_backward(layers[layout])
            total = args.rounds * len(cases) * 2
            done = 0
            for case, fn in cases.items():
                samples = {"dtensor": [], "plain": []}
                for _ in range(args.rounds):
                    for layout in ("dtensor", "plain"):
                        samples[layout].append(_least(lambda: fn(layout), args.calls))
                        done += 1
                        print(f"\r  {done}/{total} rounds", end="", file=sys.stderr, flush=True)
                for layout in samples:
                    results[layout][case] = statistics.median(samples[layout])
            print(file=sys.stderr)
            for layer in layers.values():
                layer.close()
    finally:
        dist.destroy_process_group()

    print(f"MegaMoE layer, one PE: hidden {H}, intermediate {I}, {E} experts, top {TOP_K}, "
          f"{TOKENS} tokens; median of {args.rounds} rounds of the least of {args.calls} calls")
    print(f"| {'':22} | {'DTensor experts':>16} | {'plain shards':>13} | {'ratio':>6} |")
    print(f"|{'-' * 24}|{'-' * 18}:|{'-' * 15}:|{'-' * 7}:|")
    rows = []
    for case in results["dtensor"]:
        d, p = results["dtensor"][case] * 1e3, results["plain"][case] * 1e3
        rows.append({"case": case, "dtensor_ms": d, "plain_ms": p, "ratio": d / p})
        print(f"| {case:22} | {d:13.3f} ms | {p:10.3f} ms | {d / p:5.2f}× |")
    path = write_json(os.path.join(args.out, "experts_dtensor.json"),
                      {"shape": {"hidden": H, "intermediate": I, "experts": E, "top_k": TOP_K,
                                 "tokens": TOKENS},
                       "rounds": args.rounds, "calls": args.calls, "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
