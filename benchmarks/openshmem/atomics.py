"""Atomics and non-blocking puts from C++, ours against Open MPI's OSHMEM in the same run.

    python3 benchmarks/openshmem/atomics.py [--quick] [--rounds R] [--out FILE.json] [--no-hosts]

Four patterns, 2 PEs, PE 0 acting on PE 1 (docs/benchmarks.md, "Atomics and non-blocking puts"):
  fetch_add         shmem_long_atomic_fetch_add / Runtime::Atomic(kAdd), per call (latency)
  compare_swap      shmem_long_atomic_compare_swap / kCompareSwap, per call, every one succeeds
  put_nbi           8 B shmem_putmem_nbi / PutNbi, per call, the quiet ending each batch
                    included (1 / the message rate)
  put_signal_quiet  8 B completed at the target: OSHMEM's put, fence, add, quiet against our
                    put_signal, quiet
on one host (shmem_bench forks its PEs, run twice: by default and with
HYPER_PARALLEL_SHMEM_WAIT=spin, whose waits only spin as OSHMEM's do; oshrun -np 2) and, unless
--no-hosts, across two
namespace hosts over UCX tcp on a veth link (root; as benchmarks/scale_out/scale_out.py). Each round runs
every pattern for ours and then OSHMEM's, so the two alternate; a pattern's figure is the median
of every repetition of every round. Writes FILE.json and, beside it, atomics.png (ours over
OSHMEM's time per pattern: below 1 is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.build import build_native, build_oshmem, native_binary, oshrun  # noqa: E402
from common.hosts import Relay, import_netns_hosts  # noqa: E402
from common.plots import pyplot, save  # noqa: E402
from common.progress import progress  # noqa: E402
from common.report import write_json  # noqa: E402
from common.results import records  # noqa: E402

TESTS = ("fetch_add", "compare_swap", "put_nbi", "put_signal_quiet")
# The targets, ours / OSHMEM's time (docs/benchmarks.md): on one host, latency of the
# atomics and 1 / message rate of put_nbi; across hosts put_signal_quiet.
ONE_HOST_GOALS = {"fetch_add": 1.0, "compare_swap": 1.0, "put_nbi": 1.0}
HOSTS_GOALS = {"put_signal_quiet": 1.0}


def samples(out: str) -> tuple:
    """(samples_us, iters) of the first record of a benchmark's output."""
    got = records(out)
    return (got[0]["samples_us"], got[0]["iters"]) if got else ([], 0)


def one_host(native: str, oshmem: str | None, test: str, p: dict) -> dict:
    """{"hps": samples, "oshmem": samples}: one run each, ours first."""
    common = ["--sizes", "8", "--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    got = {}
    # Ours as it runs by default (waits spin briefly, then sleep: a write to a sleeping PE's
    # word wakes it), and with waits that only spin, as OSHMEM's do.
    for impl, wait in (("hps", "auto"), ("hps_spin", "spin")):
        ours = subprocess.run([native, "--test", test, "--pes", "2"] + common,
                              capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, HYPER_PARALLEL_SHMEM_WAIT=wait))
        got[impl] = samples(ours.stdout)[0] if ours.returncode == 0 else []
    if oshmem:
        theirs = subprocess.run(oshrun(2) + [oshmem, "--test", test] + common, capture_output=True,
                                text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
        got["oshmem"] = samples(theirs.stdout)[0]  # its crash at finalize is a known bug
    return got


def across_hosts(hosts, relay, folder: str, native: str, oshmem: str | None, test: str, p: dict,
                 port: int) -> dict:
    from scale_out.native import run_native
    from scale_out.peers import run_oshmem
    from scale_out.pes import hps_env

    got = {}
    lines, problem = run_native(hosts, native, test, [8], p, port,
                                hps_env({"bw": [8], "coll": [8]}, {}))
    got["hps"] = next((d["samples_us"] for d in lines.get(0, []) if "samples_us" in d), []) \
        if not problem else []
    if oshmem:
        rows, _ = run_oshmem(hosts, relay, oshmem, folder, test, [8], p)
        got["oshmem"] = rows[0]["samples_us"] if rows else []
    return got


def summarise(collected: dict, goals: dict) -> list:
    rows = []
    for test in TESTS:
        ours = collected.get(test, {}).get("hps", [])
        theirs = collected.get(test, {}).get("oshmem", [])
        spin = collected.get(test, {}).get("hps_spin", [])
        row = {"test": test, "hps_us": statistics.median(ours) if ours else None,
               "oshmem_us": statistics.median(theirs) if theirs else None,
               "hps_samples": ours, "oshmem_samples": theirs}
        if spin:
            row["hps_spin_us"] = statistics.median(spin)
            row["hps_spin_samples"] = spin
        if row["hps_us"] and row["oshmem_us"]:
            row["ratio"] = row["hps_us"] / row["oshmem_us"]
            if test in goals:
                row["goal"] = goals[test]
                row["met"] = row["ratio"] <= goals[test]
        rows.append(row)
    return rows


def plot(results: dict, path: str) -> None:
    plt = pyplot()
    if plt is None:
        return
    figure, axis = plt.subplots(figsize=(8, 4))
    width = 0.38
    for shift, (layout, rows) in zip((-width / 2, width / 2), results.items()):
        ratios = [row.get("ratio") or 0 for row in rows]
        bars = axis.bar([i + shift for i in range(len(rows))], ratios, width, label=layout)
        for bar, row in zip(bars, rows):
            if row.get("ratio"):
                axis.annotate(f"{row['hps_us']:.3g} / {row['oshmem_us']:.3g} us",
                              (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=7, rotation=90)
    axis.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    highest = max((row.get("ratio") or 0 for rows in results.values() for row in rows),
                  default=1.0)
    axis.set_ylim(0, max(highest, 1.0) * 1.45)  # room for the labels
    axis.set_xticks(range(len(TESTS)), TESTS)
    axis.set_ylabel("ours / OSHMEM's time per operation (lower is better)")
    axis.set_title("2 PEs, 8 B, medians (ours / OSHMEM us above each bar)")
    axis.legend()
    save(plt, figure, path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer repetitions")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 3)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "atomics.json"))
    parser.add_argument("--no-hosts", action="store_true", help="one host only")
    args = parser.parse_args()
    p = {"reps": 3 if args.quick else 5, "min_us": 10000 if args.quick else 20000}
    rounds = args.rounds or (1 if args.quick else 3)
    build_native()
    native = native_binary()
    oshmem, problem = build_oshmem()
    if problem:
        print(f"atomics: OSHMEM skipped: {problem}", file=sys.stderr)
    layouts = ["one host"]
    hosts_problem = None
    if not args.no_hosts:
        netns_hosts = import_netns_hosts()
        hosts_problem = netns_hosts.available()
        if hosts_problem:
            print(f"atomics: across hosts skipped: {hosts_problem}", file=sys.stderr)
        else:
            layouts.append("two hosts")
    collected = {layout: {test: {"hps": [], "hps_spin": [], "oshmem": []} for test in TESTS}
                 for layout in layouts}
    started, step, total = time.monotonic(), 0, rounds * len(TESTS) * len(layouts)

    def add(layout, test, got):
        for impl, values in got.items():
            collected[layout][test][impl] += values

    for _ in range(rounds):
        for test in TESTS:
            add("one host", test, one_host(native, oshmem, test, p))
            step += 1
            progress(step, total, f"one host: {test}", started)
    if "two hosts" in layouts:
        with tempfile.TemporaryDirectory(prefix="atomics-") as folder, \
                netns_hosts.NetnsHosts(2) as hosts:
            relay = Relay(hosts, folder) if oshmem else None
            try:
                port = 29900
                for _ in range(rounds):
                    for test in TESTS:
                        port += 1
                        add("two hosts", test,
                            across_hosts(hosts, relay, folder, native, oshmem, test, p, port))
                        step += 1
                        progress(step, total, f"two hosts: {test}", started)
            finally:
                if relay:
                    relay.close()
    results = {layout: summarise(collected[layout],
                                 ONE_HOST_GOALS if layout == "one host" else HOSTS_GOALS)
               for layout in layouts}
    write_json(args.out, {"rounds": rounds, "params": p, "oshmem": oshmem is not None,
                          "hosts_skipped": hosts_problem, "results": results})
    plot(results, os.path.join(os.path.dirname(os.path.abspath(args.out)), "atomics.png"))
    for layout, rows in results.items():
        for row in rows:
            ratio = f"{row['ratio']:.2f}x" if row.get("ratio") else "-"
            spin = f" (spin {row['hps_spin_us']:.3f})" if row.get("hps_spin_us") else ""
            print(f"{layout:9s} {row['test']:17s} ours {row['hps_us'] or 0:8.3f} us{spin}  "
                  f"OSHMEM {row['oshmem_us'] or 0:8.3f} us  ours/OSHMEM {ratio}"
                  + (f"  goal <= {row['goal']}: {'met' if row['met'] else 'missed'}"
                     if "goal" in row else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
