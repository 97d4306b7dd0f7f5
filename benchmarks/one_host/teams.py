"""Teams: collectives over two disjoint teams of 2 running at once, beside one team alone, the
world of 2, and gloo subgroups, in one run (docs/benchmarks.md, "Teams").

    python benchmarks/one_host/teams.py [--reps 15] [--calls 20] [--bytes 1048576] [--out bench-results]

The driver starts two jobs through the package's launcher, one process per PE, each PE with
one torch intra-op thread:
  - 4 PEs split into rows {0,1} and {2,3} (shmem.team_split_2d(TEAM_WORLD, 2)) and the same
    rank pairs as gloo subgroups. For each of barrier, all_gather and all_to_all (--bytes per PE
    and call): "teams": both rows run the call at once; "alone": row {0,1} runs it while row
    {2,3} waits at a barrier; "gloo": both rows run it at once on their subgroups.
  - 2 PEs: "world": the same calls over the whole world of 2 (shmem and gloo).
A sample is the mean time per call of --calls back-to-back calls after a world barrier; a PE's
figure is the median of --reps samples after warm-up, and the job's is the slowest PE's. The
driver prints a table with the ratios taken in this run, writes teams.json and teams.png to
--out, and says what 2 cores allow.
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
from common.report import header, write_json, wrote  # noqa: E402
from common.results import emit_on  # noqa: E402

OPS = ("barrier", "all_gather", "all_to_all")


# ---- PE side ------------------------------------------------------------------------------

def _pe(args) -> None:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem

    rank, size, handle = start_pe()
    elements = args.bytes // 4
    if size == 4:
        row, _column = shmem.team_split_2d(shmem.TEAM_WORLD, 2)
        groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        gloo_group = groups[rank // 2]
        team, n = row, 2
    else:
        team, n, gloo_group = None, size, None
    out = shmem.empty(n * elements, dtype=torch.float32)
    inp = torch.full((n * elements,), float(rank), dtype=torch.float32)
    gloo_out = torch.empty(n * elements, dtype=torch.float32)

    # Each op's call, ours over the team and gloo's over the subgroup.
    shmem_call = {"barrier": lambda: shmem.barrier(team=team),
                  "all_gather": lambda: shmem.all_gather(out, inp[:elements], team=team),
                  "all_to_all": lambda: shmem.all_to_all(out, inp, team=team)}.get
    gloo_call = {"barrier": lambda: dist.barrier(group=gloo_group),
                 "all_gather": lambda: dist.all_gather_into_tensor(gloo_out, inp[:elements],
                                                                   group=gloo_group),
                 "all_to_all": lambda: dist.all_to_all_single(gloo_out, inp,
                                                              group=gloo_group)}.get

    def sample(call, active: bool) -> float:
        shmem.barrier()
        start = time.perf_counter()
        if active:
            for _ in range(args.calls):
                call()
        elapsed = (time.perf_counter() - start) / args.calls
        shmem.barrier()
        return elapsed

    def measure(call, active: bool) -> float:
        for _ in range(2):
            sample(call, active)
        samples = [sample(call, active) for _ in range(args.reps)]
        mine = torch.tensor([statistics.median(samples) if active else 0.0], dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        return mine.item() * 1e6

    results = []
    for op in OPS:
        if size == 4:
            figures = {"teams": measure(shmem_call(op), True),
                       "alone": measure(shmem_call(op), rank < 2),
                       "gloo": measure(gloo_call(op), True)}
        else:
            figures = {"world": measure(shmem_call(op), True),
                       "gloo_world": measure(gloo_call(op), True)}
        results.append({"op": op, "pes": size, "bytes": args.bytes, **figures})
    for line in results:
        emit_on(rank, line)
    shmem.free(out)
    if size == 4:
        row.destroy()
        _column.destroy()
    handle.close()
    dist.destroy_process_group()


# ---- driver -------------------------------------------------------------------------------

def _launch(pes: int, args) -> list:
    return run_pes(pes, [os.path.abspath(__file__), "--pe", "--reps", str(args.reps), "--calls",
                         str(args.calls), "--bytes", str(args.bytes)], key="op")


def _plot(rows: list, path: str) -> str | None:
    plt = pyplot(quiet=True)
    if plt is None:
        return None
    series = {"world": "shmem, world of 2", "gloo_world": "gloo, world of 2",
              "alone": "shmem, one team of 2", "teams": "shmem, two teams at once",
              "gloo": "gloo, two subgroups at once"}
    return bars(plt, [row["op"] for row in rows],
                [(label, [row[name] for row in rows]) for name, label in series.items()],
                f"teams of 2, {rows[0]['bytes'] >> 10} KiB per PE (lower is better)",
                "µs per call (log)", path, size=(7, 3.6), fontsize=None, log=True, one=False)


def _drive(args) -> int:
    start = time.monotonic()
    four = {row["op"]: row for row in _launch(4, args)}
    two = {row["op"]: row for row in _launch(2, args)}
    rows = [{**four[op], **{k: v for k, v in two[op].items() if k in ("world", "gloo_world")}}
            for op in OPS]
    cores = os.cpu_count() or 1
    print(f"teams of 2 on 4 PEs, {args.bytes} bytes per PE, {cores} cores; "
          f"µs per call (slowest PE, median of {args.reps} samples of {args.calls} calls)")
    print(header(("op", -11), ("world of 2", 12), ("gloo world", 12), ("one team", 10),
                 ("two teams", 11), ("gloo subgr.", 12), ("two/one", 9), ("gloo/teams", 11),
                 ("gloo/world", 11)))
    for row in rows:
        print(f"{row['op']:<11} {row['world']:>11.1f} {row['gloo_world']:>11.1f}"
              f" {row['alone']:>9.1f} {row['teams']:>10.1f} {row['gloo']:>11.1f}"
              f" {row['teams'] / row['alone']:>7.2f}x {row['gloo'] / row['teams']:>9.1f}x"
              f" {row['gloo_world'] / row['world']:>9.1f}x")
    for row in rows:
        if row["op"] != "barrier":
            speedup = row["gloo"] / row["teams"]
            print(f"target {row['op']}: >= 10x gloo subgroups at {args.bytes >> 10} KiB per PE: "
                  f"{speedup:.1f}x, {'met' if speedup >= 10 else 'missed'}")
    print(f"target: two concurrent teams within 1.2x of one team alone, where cores allow: "
          f"4 PEs on {cores} cores " +
          ("share them, so two busy teams cannot run beside each other without slowing down"
           if cores < 4 else "each have a core"))
    path = write_json(os.path.join(args.out, "teams.json"),
                      {"cores": cores, "reps": args.reps, "calls": args.calls, "rows": rows,
                       "seconds": round(time.monotonic() - start, 1)})
    print(wrote(path, _plot(rows, os.path.join(args.out, "teams.png"))))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--bytes", type=int, default=1 << 20, help="bytes per PE and call")
    return pe_or_drive(parser, _pe, _drive)


if __name__ == "__main__":
    sys.exit(main())
