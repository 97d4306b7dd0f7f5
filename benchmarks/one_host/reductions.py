"""Reductions and broadcast on one host: ours beside gloo and the machine bound, in one run.

    python benchmarks/one_host/reductions.py [--pes 2,4] [--bytes 1048576] [--rounds 9] [--out DIR]

For each PE count the driver starts one job through the package's launcher, one process per PE,
one torch intra-op thread each. Every PE joins a gloo group and acquires the runtime; then, for
all_reduce (sum), reduce_scatter (sum) and broadcast (root 0) of float32, --bytes of input per
PE, it runs rounds that alternate ours, gloo's (all_reduce, reduce_scatter_tensor, broadcast)
and the machine bound, each round a timed loop, and reports the median of the rounds (the
slowest PE's). The machine bound is the memory traffic an ideal shared-memory algorithm needs
at each PE, run by every PE at once with torch ops on the same tensors:
  - all_reduce: an add over (P - 1) / P of the elements (the reduce-scatter) and a copy of
    (P - 1) / P of the bytes (the all-gather);
  - reduce_scatter: an add over (P - 1) / P of the elements;
  - broadcast: a copy of the bytes (the root copies nothing but waits for the others).
The driver prints the ratios taken in this run (gloo's time / ours; the bound's time / ours)
against the targets of docs/benchmarks.md, writes reductions.json and reductions.png to --out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.launch import pe_or_drive, run_pes, start_pe  # noqa: E402
from common.plots import bars, pyplot  # noqa: E402
from common.progress import step  # noqa: E402
from common.report import header, when, write_json, wrote  # noqa: E402
from common.results import emit_on  # noqa: E402
from common.stats import alternating  # noqa: E402
from common.units import ints  # noqa: E402

OPS = ("all_reduce", "reduce_scatter", "broadcast")
# Targets (issue text, docs/benchmarks.md): speed against gloo by PE count, and the bound.
GLOO_TARGET = {2: 3.0, 4: 2.0}
BOUND_TARGET = 0.6


# ---- PE side ------------------------------------------------------------------------------

def _pe(args) -> None:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem

    rank, size, handle = start_pe()
    n = args.bytes // 4
    block = n // size
    out = shmem.empty(n, dtype=torch.float32)
    part = shmem.empty(block, dtype=torch.float32)
    inp = torch.randn(n, generator=torch.Generator().manual_seed(rank))
    gloo_out = torch.empty(n)
    gloo_part = torch.empty(block)
    scratch = torch.empty(n)
    share = n - block  # (P - 1) / P of the elements

    def bound(op):
        if op == "all_reduce":
            return lambda: (torch.add(inp[:share], gloo_out[:share], out=scratch[:share]),
                            scratch[:share].copy_(gloo_out[:share]))
        if op == "reduce_scatter":
            return lambda: torch.add(inp[:share], gloo_out[:share], out=scratch[:share])
        return lambda: scratch.copy_(inp) if rank != 0 else None

    bodies = {
        ("all_reduce", "hps"): lambda: shmem.all_reduce(out, inp),
        ("all_reduce", "gloo"): lambda: dist.all_reduce(gloo_out.copy_(inp)),
        ("reduce_scatter", "hps"): lambda: shmem.reduce_scatter(part, inp),
        ("reduce_scatter", "gloo"): lambda: dist.reduce_scatter_tensor(gloo_part, inp),
        ("broadcast", "hps"): lambda: shmem.broadcast(out, inp, 0),
        ("broadcast", "gloo"): lambda: dist.broadcast(gloo_out, 0),
    }
    for op in OPS:
        bodies[(op, "bound")] = bound(op)

    def timed(body, iters: int) -> float:
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            body()
        elapsed = torch.tensor([(time.perf_counter() - start) / iters * 1e6], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest PE's
        return elapsed.item()

    rows = []
    for op in OPS:
        systems = ("hps", "gloo", "bound")
        for system in systems:
            for _ in range(3):
                bodies[(op, system)]()  # warm-up: pages, endpoints
        probe = timed(bodies[(op, "gloo")], 3)
        iters = max(3, min(2000, int(args.min_time_us / max(probe, 1.0))))
        samples = alternating(systems, args.rounds,
                              lambda system: timed(bodies[(op, system)], iters))
        if rank == 0:
            rows.append({"op": op, "pes": size, "bytes": args.bytes, "iters": iters,
                         **{f"{s}_us": statistics.median(v) for s, v in samples.items()},
                         **{f"{s}_samples": [round(x, 2) for x in v] for s, v in samples.items()}})
    for row in rows:
        emit_on(rank, row)
    shmem.free(part)
    shmem.free(out)
    handle.close()
    dist.destroy_process_group()


# ---- driver -------------------------------------------------------------------------------

def _launch(pes: int, args) -> list:
    return run_pes(pes, [os.path.abspath(__file__), "--pe", "--rounds", str(args.rounds),
                         "--bytes", str(args.bytes), "--min-time-us", str(args.min_time_us)],
                   key="op")


def _plot(rows: list, path: str) -> str | None:
    plt = pyplot()
    if plt is None:
        return None
    return bars(plt, [f"{row['op']}\n{row['pes']} PEs" for row in rows],
                [("gloo's time / ours", [row["gloo_us"] / row["hps_us"] for row in rows]),
                 ("the machine bound's time / ours",
                  [row["bound_us"] / row["hps_us"] for row in rows])],
                f"float32, {rows[0]['bytes'] >> 10} KiB per PE, one host, medians",
                "ratio (above 1: ours faster)", path)


def _drive(args) -> int:
    start = time.monotonic()
    rows = []
    pes_list = ints(args.pes)
    for index, pes in enumerate(pes_list, 1):
        step(index, len(pes_list), f"{pes} PEs")
        rows += _launch(pes, args)
    cores = os.cpu_count() or 1
    print(f"float32, {args.bytes} bytes per PE, {cores} cores; µs per call (slowest PE, median "
          f"of {args.rounds} alternating rounds)")
    print(header(("op", -15), ("PEs", 4), ("ours", 10), ("gloo", 10), ("bound", 10),
                 ("gloo/ours", 11), ("bound/ours", 12)))
    for row in rows:
        print(f"{row['op']:<15} {row['pes']:>3} {row['hps_us']:>9.1f} {row['gloo_us']:>9.1f} "
              f"{row['bound_us']:>9.1f} {row['gloo_us'] / row['hps_us']:>9.2f}x "
              f"{row['bound_us'] / row['hps_us']:>10.2f}")
    for row in rows:
        goal = GLOO_TARGET.get(row["pes"])
        if goal is None:
            continue
        speed = row["gloo_us"] / row["hps_us"]
        line = f"target {row['op']} {row['pes']} PEs: >= {goal:g}x gloo: {speed:.2f}x, " \
               f"{'met' if speed >= goal else 'missed'}"
        if row["pes"] == 2:
            fraction = row["bound_us"] / row["hps_us"]
            line += f"; >= {BOUND_TARGET} of the bound: {fraction:.2f}, " \
                    f"{'met' if fraction >= BOUND_TARGET else 'missed'}"
        print(line)
    path = write_json(os.path.join(args.out, "reductions.json"),
                      {"when": when(), "cores": cores, "rounds": args.rounds, "rows": rows,
                       "seconds": round(time.monotonic() - start, 1)})
    print(wrote(path, _plot(rows, os.path.join(args.out, "reductions.png"))))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", default="2,4", help="PE counts, comma-separated")
    parser.add_argument("--bytes", type=int, default=1 << 20, help="input bytes per PE")
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds per system")
    parser.add_argument("--min-time-us", type=float, default=20000,
                        help="the least time one round's loop takes")
    return pe_or_drive(parser, _pe, _drive)


if __name__ == "__main__":
    sys.exit(main())
