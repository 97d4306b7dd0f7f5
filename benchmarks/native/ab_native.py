"""Two builds of the native benchmark against each other on one host, in alternating rounds.

    python3 benchmarks/native/ab_native.py --before OLD/shmem_bench --after NEW/shmem_bench \
        [--rounds 3] [--routes mapped,ucx] [--out FILE]

Each round runs every case (put with 8 B, 64 KiB and 1 MiB and the ping-pong with 8 B and
4 KiB on 2 PEs; barrier on 2, 4 and 8 PEs; all_gather with 8 B, 64 KiB and 1 MiB per PE on 2,
4 and 8 PEs) on every route asked for (mapped: the PEs map each other, as on one host; ucx:
every peer through UCX over loopback, HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) with both binaries, the order swapped every round so neither always
runs second; a run's figure is the median of its 5 repetitions (benchmarks/native/shmem_bench.cc).
Per case it prints the median over the rounds of each build, the rounds' spread (least and
greatest) and the ratio after / before. A change keeps the speed where the after median lies
within the before rounds' spread or below it. Build a commit's benchmark with
`cmake -S benchmarks/native -B DIR -G Ninja && cmake --build DIR --target shmem_bench` in a
checkout of it (`git worktree add`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.report import write_json  # noqa: E402
from common.results import records  # noqa: E402

CASES = (("put", 2, "8,65536,1048576"), ("pingpong", 2, "8,4096"), ("barrier", 2, "8"), ("barrier", 4, "8"), ("barrier", 8, "8"),
         ("allgather", 2, "8,65536,1048576"), ("allgather", 4, "8,65536,1048576"),
         ("allgather", 8, "8,65536,1048576"))


# The environment of each route (docs/scale-out.md, "Settings").
ROUTE_ENV = {
    "mapped": {},
    "ucx": {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", "UCX_TLS": "tcp,self",
            "UCX_NET_DEVICES": "lo"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the old build's shmem_bench")
    parser.add_argument("--after", required=True, help="the new build's shmem_bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="",
                        help="comma list of test:pes to run (allgather:4,barrier:8); default all")
    parser.add_argument("--routes", default="mapped",
                        help="comma list of mapped and ucx (every peer through UCX over loopback)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    chosen = {tuple(item.split(":")) for item in args.only.split(",") if item}
    cases = [case for case in CASES if not chosen or (case[0], str(case[1])) in chosen]
    binaries = {"before": args.before, "after": args.after}
    routes = [route for route in args.routes.split(",") if route]
    for route in routes:
        if route not in ROUTE_ENV:
            parser.error(f"--routes takes mapped and ucx, not {route!r}")
    found: dict = {}
    steps = len(cases) * len(routes)
    for round_index in range(args.rounds):
        order = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
        step = 0
        for route in routes:
            env = dict(os.environ, **ROUTE_ENV[route])
            for test, pes, sizes in cases:
                step += 1
                print(f"[round {round_index + 1}/{args.rounds}, case {step}/{steps}] "
                      f"{test} on {pes} PEs, {route}", file=sys.stderr, flush=True)
                for which in order:
                    done = subprocess.run([binaries[which], "--test", test, "--pes", str(pes),
                                           "--sizes", sizes, "--reps", "5",
                                           "--min-time-us", "20000"],
                                          capture_output=True, text=True, timeout=900, env=env)
                    if done.returncode != 0:
                        print(done.stderr, file=sys.stderr)
                        return 1
                    for record in records(done.stdout):
                        found.setdefault((route, test, pes, record["bytes"], which), []).append(
                            statistics.median(record["samples_us"]))
    rows = []
    print(f"{'case':<36}{'before us [spread]':>28}{'after us [spread]':>28}{'after/before':>14}")
    for (route, test, pes, size, which), after in sorted(found.items()):
        if which != "after":
            continue
        before = found[(route, test, pes, size, "before")]
        row = {"route": route, "test": test, "pes": pes, "bytes": size, "before_us": before,
               "after_us": after, "ratio": statistics.median(after) / statistics.median(before)}
        rows.append(row)
        name = f"{test} {pes} PEs {size} B {route}"
        print(f"{name:<36}{statistics.median(before):>12.2f} [{min(before):.2f}-{max(before):.2f}]"
              f"{statistics.median(after):>12.2f} [{min(after):.2f}-{max(after):.2f}]"
              f"{row['ratio']:>14.2f}")
    if args.out:
        write_json(args.out, {"rounds": args.rounds, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
