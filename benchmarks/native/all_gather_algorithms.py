"""all_gather's algorithms among hosts against each other, with hosts made over loopback.

    python3 benchmarks/native/all_gather_algorithms.py --bench BUILD/shmem_bench [--rounds 3]
        [--out FILE] [--plot FILE] [--quick]

Every PE of a layout reaches the PEs of other "hosts" through UCX over loopback
(`HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all`: every PE a host of its own; `blocks:K`: hosts of K
PEs that map each other), and `HYPER_PARALLEL_SHMEM_ALGORITHMS=all_gather=<algorithm>` forces
one algorithm ("auto" is what a user gets). Each round runs every layout with every algorithm,
the order rotated every round so none always runs first; a run's figure is the median of its 5
repetitions (benchmarks/native/shmem_bench.cc). It prints, per layout and size, each
algorithm's median over the rounds with the rounds' spread, writes the rows as JSON and plots
time against bytes per PE, one panel per layout. Build the benchmark with
`cmake -S benchmarks/native -B DIR -G Ninja && cmake --build DIR --target shmem_bench`.

The PEs share this machine's cores (two here), so what it measures is how each algorithm
behaves when every round waits for a peer's timeslice as much as for the wire: docs/benchmarks.md
says what that does and does not tell about a cluster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.plots import pyplot, save  # noqa: E402
from common.report import write_json  # noqa: E402
from common.results import records  # noqa: E402

ALGORITHMS = ("direct", "bruck", "ring", "auto")
LAYOUTS = (("all", 4), ("all", 8), ("all", 16), ("blocks:2", 8))
SIZES = "8,65536,1048576"


def layout_name(remote_peers: str, pes: int) -> str:
    if remote_peers == "all":
        return f"{pes} hosts x 1 PE"
    per_host = int(remote_peers.split(":")[1])
    return f"{pes // per_host} hosts x {per_host} PEs"


def run_once(bench: str, remote_peers: str, pes: int, algorithm: str, sizes: str) -> dict:
    env = dict(os.environ, HYPER_PARALLEL_SHMEM_REMOTE_PEERS=remote_peers,
               HYPER_PARALLEL_SHMEM_ALGORITHMS=f"all_gather={algorithm}",
               UCX_TLS="tcp,self", UCX_NET_DEVICES="lo")
    done = subprocess.run([bench, "--test", "allgather", "--pes", str(pes), "--sizes", sizes,
                           "--reps", "5", "--min-time-us", "20000"],
                          capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{layout_name(remote_peers, pes)} {algorithm}:\n{done.stderr}")
    return {record["bytes"]: statistics.median(record["samples_us"])
            for record in records(done.stdout)}


def plot(rows: list[dict], path: str) -> None:
    plt = pyplot()
    if plt is None:
        return
    layouts = list(dict.fromkeys(row["layout"] for row in rows))
    figure, axes = plt.subplots(1, len(layouts), figsize=(4.2 * len(layouts), 3.8), squeeze=False)
    for axis, layout in zip(axes[0], layouts):
        for algorithm in ALGORITHMS:
            mine = sorted((row["bytes"], row["median_us"]) for row in rows
                          if row["layout"] == layout and row["algorithm"] == algorithm)
            if mine:
                axis.plot([b for b, _ in mine], [t for _, t in mine], marker="o", label=algorithm)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_title(layout)
        axis.set_xlabel("bytes per PE")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("all_gather, us (median of rounds)")
    axes[0][0].legend()
    figure.suptitle("all_gather among hosts over UCX loopback, 2-core machine")
    save(plt, figure, path)
    print(f"plot: {path}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="shmem_bench of the build to measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="8-PE layouts only, one round")
    parser.add_argument("--out", default=os.path.join(RESULTS, "all_gather_algorithms.json"))
    parser.add_argument("--plot", help="the plot's path (default: beside --out, .png)")
    args = parser.parse_args()
    layouts = [l for l in LAYOUTS if l[1] == 8] if args.quick else list(LAYOUTS)
    rounds = 1 if args.quick else args.rounds
    found: dict = {}
    runs = rounds * len(layouts) * len(ALGORITHMS)
    done_runs = 0
    for round_index in range(rounds):
        shift = round_index % len(ALGORITHMS)
        order = ALGORITHMS[shift:] + ALGORITHMS[:shift]
        for remote_peers, pes in layouts:
            for algorithm in order:
                done_runs += 1
                print(f"[{done_runs}/{runs}] round {round_index + 1}: "
                      f"{layout_name(remote_peers, pes)}, {algorithm}", file=sys.stderr,
                      flush=True)
                for size, median in run_once(args.bench, remote_peers, pes, algorithm,
                                             SIZES).items():
                    found.setdefault((layout_name(remote_peers, pes), size, algorithm),
                                     []).append(median)
    rows = []
    print(f"{'layout':<20}{'bytes':>9}" + "".join(f"{a + ' us [spread]':>26}" for a in ALGORITHMS))
    for layout in dict.fromkeys(key[0] for key in found):
        for size in sorted({key[1] for key in found if key[0] == layout}):
            line = f"{layout:<20}{size:>9}"
            for algorithm in ALGORITHMS:
                times = found.get((layout, size, algorithm), [])
                if not times:
                    line += f"{'-':>26}"
                    continue
                rows.append({"layout": layout, "bytes": size, "algorithm": algorithm,
                             "rounds_us": times, "median_us": statistics.median(times)})
                line += f"{statistics.median(times):>12.1f} [{min(times):.0f}-{max(times):.0f}]"
            print(line)
    write_json(args.out, {"rounds": rounds, "rows": rows})
    plot(rows, args.plot or os.path.splitext(args.out)[0] + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
