"""Publishes benchmark results: copies them from the results folder into docs/benchmarks/.

    python3 benchmarks/publish.py [--from bench-results] [--dry-run] [NAME ...]

Every benchmark writes into the results folder (bench-results/ by default, or its --out); this
step alone writes into docs/benchmarks/ (and docs/mega_moe_trace.png), so a trial run never
touches the recorded figures. Without NAMEs it copies every file of PUBLISHED that the results
folder holds; with NAMEs, just those (any file of the folder, e.g. a one-off comparison that
docs/benchmarks.md cites). It lists what it copied, and what it did not find.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: common

from common import RESULTS, ROOT  # noqa: E402

DOCS = os.path.join(ROOT, "docs", "benchmarks")
# What each benchmark writes and docs/benchmarks.md shows (the folder's file names).
PUBLISHED = (
    # benchmarks/run.py: the one-host suite, --moe, --symm-mem
    "results.json", "put_get.png", "all_gather_pingpong.png", "all_to_all.png",
    "moe_results.json", "moe.png", "symm_mem_results.json",
    # one_host/
    "reductions.json", "reductions.png", "teams.json", "teams.png",
    # moe/
    "moe_reductions.json", "experts_dtensor.json", "mega_moe_trace.png",
    # scale_out/
    "scale_out.json", "scale_out_put_bw.png", "scale_out_latency.png",
    "scale_out_collectives.png", "scale_out_breakdown.png", "collectives_hosts.json",
    "collectives_hosts.png", "scale_out_model.json", "scale_out_model.png",
    # openshmem/ and native/
    "osu_openshmem.json", "osu_openshmem.png", "osu_openshmem_hosts.json",
    "osu_openshmem_hosts.png", "atomics.json", "atomics.png", "all_gather_algorithms.json",
    "all_gather_algorithms.png",
)
# The files published outside docs/benchmarks/.
ELSEWHERE = {"mega_moe_trace.png": os.path.join(ROOT, "docs", "mega_moe_trace.png")}


def destination(name: str) -> str:
    return ELSEWHERE.get(name, os.path.join(DOCS, name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", default=RESULTS,
                        help="the results folder (default: bench-results/)")
    parser.add_argument("--dry-run", action="store_true", help="say what it would copy")
    parser.add_argument("names", nargs="*", help="the files to publish (default: PUBLISHED)")
    args = parser.parse_args()
    names = args.names or [n for n in PUBLISHED if os.path.isfile(os.path.join(args.source, n))]
    missing = [n for n in args.names if not os.path.isfile(os.path.join(args.source, n))]
    for name in missing:
        print(f"not found: {os.path.join(args.source, name)}", file=sys.stderr)
    for name in names:
        if name in missing:
            continue
        target = destination(os.path.basename(name))
        if not args.dry_run:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(args.source, name), target)
        print(f"{'would copy' if args.dry_run else 'copied'} {name} -> "
              f"{os.path.relpath(target, ROOT)}")
    if not names:
        print(f"nothing to publish in {args.source}", file=sys.stderr)
    return 1 if missing or not names else 0


if __name__ == "__main__":
    sys.exit(main())
