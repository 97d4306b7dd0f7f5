"""One MegaMoE step under torch.profiler, drawn as a timeline (docs/mega_moe_trace.png).

    python benchmarks/moe/moe_trace.py [--pes 2] [--out bench-results/mega_moe_trace.png]

(benchmarks/publish.py copies the drawing to docs/mega_moe_trace.png.)

Starts --pes PEs through the package's launcher; each runs a layer's forward and backward
(H 256, I 512, 8 experts, top 2, 512 tokens per PE, the combine on a stream of its own) twice
to warm up, then once under torch.profiler. PE 0 draws its trace: one row per thread that ran
an hps_moe range (the caller's thread, the combine stream's executor), each range a bar
coloured by phase (count exchange, dispatch, waits, each expert, combine), with the caller's
torch work behind them in grey. The ranges are the ones the layer records itself
(docs/mega_moe.md, "Profiling"); nothing here adds any.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.launch import LAUNCHER  # noqa: E402
from common.plots import pyplot, save  # noqa: E402

PHASE_COLOURS = {"count_exchange": "tab:purple", "dispatch": "tab:blue",
                 "wait_rows": "tab:gray", "expert": "tab:green", "combine": "tab:orange",
                 "wait_results": "tab:red"}


def _phase(name: str) -> str:
    short = name.split("::", 1)[1]
    return "expert" if short.startswith("expert_") else short


def _step(args) -> None:
    """PE side: the profiled step; PE 0 draws it."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.mega_moe import MegaMoE, MegaMoEResources
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)
    init_process_group_from_environment(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    try:
        with MegaMoEResources(256, 8, 2, max_tokens=512, overlap_combine=True) as resources:
            layer = MegaMoE(256, 512, 8, 2, shared_intermediate_size=256,
                            gated_shared_expert=True, resources=resources)
            x = torch.randn(512, 256, requires_grad=True)
            for _ in range(2):
                layer(x).sum().backward()
            shmem.barrier()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                layer(x).sum().backward()
            if rank == 0:
                _draw(prof.events(), args.out, dist.get_world_size())
            shmem.barrier()
    finally:
        dist.destroy_process_group()


def _draw(events, out: str, pes: int) -> None:
    plt = pyplot()
    if plt is None:
        return
    from matplotlib.patches import Patch

    ranges = [e for e in events if e.name.startswith("hps_moe::")]
    start = min(e.time_range.start for e in events)
    threads = sorted({e.thread for e in ranges},
                     key=lambda t: min(e.time_range.start for e in ranges if e.thread == t))
    caller = threads[0]
    labels = ["caller's thread" if t == caller else "combine stream's thread" for t in threads]
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.9 * len(threads)))
    # The caller's own torch work (top-level ops and autograd nodes), behind the ranges.
    for e in events:
        if e.thread == caller and not e.name.startswith("hps_moe::") and e.cpu_parent is None:
            ax.broken_barh([((e.time_range.start - start) / 1e3, e.cpu_time_total / 1e3)],
                           (threads.index(caller) - 0.45, 0.9), color="0.88")
    for e in ranges:
        row = threads.index(e.thread)
        begin = (e.time_range.start - start) / 1e3
        ax.broken_barh([(begin, (e.time_range.end - e.time_range.start) / 1e3)],
                       (row - 0.35, 0.7), color=PHASE_COLOURS[_phase(e.name)])
        if e.name.startswith("hps_moe::expert_"):
            ax.text(begin, row + 0.42, e.name.rsplit("_", 1)[1], fontsize=6, va="bottom")
    ax.set_yticks(range(len(threads)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the step began (PE 0)")
    ax.set_title(f"One MegaMoE layer step on PE 0 of {pes}: forward, then backward\n"
                 f"H 256, I 512, 8 experts, top 2, 512 tokens per PE; torch.profiler ranges",
                 fontsize=10)
    ax.legend(handles=[Patch(color=c, label=p.replace("_", " ")) for p, c in PHASE_COLOURS.items()]
              + [Patch(color="0.88", label="other torch work")], ncol=7, fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(threads) > 1 else -0.6))
    print(f"wrote {save(plt, fig, out, dpi=130)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(RESULTS, "mega_moe_trace.png"))
    parser.add_argument("--pe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pe:
        _step(args)
        return 0
    command = LAUNCHER + ["--nproc", str(args.pes), os.path.abspath(__file__), "--pe", "--out",
               os.path.abspath(args.out)]
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
