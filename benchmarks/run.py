"""The benchmark suite: Hyper-Parallel SHMEM on the host backend beside its peers, in one run.

    python benchmarks/run.py [--quick] [--contended] [--moe | --moe-only] [--out DIR]
                             [--symm-mem | --symm-mem-only] [--no-oshmem] [--no-python]

Peers measured in the same run, reported as ratios:
  memcpy      a single-threaded local copy of the same size (the limit), interleaved with
              the native put/get repetitions so both see the same noise;
  hps_native  the runtime from C++ (benchmarks/native/shmem_bench.cc), no Python;
  hps_python  the runtime through the Python API (benchmarks/one_host/python_bench.py);
  hps_op      the same put through the custom op torch.ops.hps.put that a compiled function
              calls (put_overhead only: its cost beside the eager call's, as a ratio);
  gloo        torch.distributed over gloo: send/recv, barrier, all_gather_into_tensor,
              all_to_all_single;
  oshmem      OpenMPI's OSHMEM doing the same patterns (benchmarks/native/oshmem_bench.c),
              skipped with a message when OpenMPI is not installed.
Each figure is the median of the repetitions after warm-up (min and max kept as spread).
--contended adds a scenario: the latency patterns (ping-pong, barrier) again, each with one
CPU-bound process (a hog) running beside the job for its whole length, ours and OSHMEM's
alike; its rows carry scenario "contended".
--moe adds the MegaMoE suite (benchmarks/moe/suite.py): the training step of a small MoE decoder on
SHMEM against all-to-all over gloo, dispatch + combine alone, a sweep of the expert size;
--moe-only runs just that suite.
--symm-mem adds torch's symmetric-memory API on the HPS CPU backend (benchmarks/one_host/symm_mem_bench.py):
torch.ops.symm_mem's all-reduces, reduce-scatter and all-to-alls against gloo's equivalents,
and a MoE layer written against that API beside MegaMoE and the all-to-all layer, at 2 and 4
PEs; --symm-mem-only runs just that (with --moe-only: both suites).
Output: a table and the targets on stdout, DIR/results.json (DIR/moe_results.json for the
MegaMoE suite, DIR/symm_mem_results.json for the symm_mem one), and PNG plots in DIR.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: common, the suites

from common import RESULTS  # noqa: E402
from common.build import build_native, build_oshmem  # noqa: E402
from common.launch import bench_env, run_capture, run_jobs, suite_job, tail  # noqa: E402
from common.report import machine, print_report, write_json  # noqa: E402
from common.results import parse  # noqa: E402
from common.stats import rounds_of  # noqa: E402
from moe import suite as moe  # noqa: E402
from one_host import suite, summary  # noqa: E402
from one_host import symm_mem_report  # noqa: E402
from one_host.figures import plots  # noqa: E402


def run_job(label: str, command: list, scenario: str = "idle", env: dict | None = None) -> tuple:
    """Returns (records, problem or None), the records tagged with the scenario ("contended":
    one CPU hog beside the job). OSHMEM's crash after its final line is the known Open MPI
    4.1.4 shmem_finalize bug and does not count as a failure."""
    try:
        done = run_capture(command, env, 1800, hog=scenario == "contended")
    except subprocess.TimeoutExpired:
        return [], f"{label}: timed out after 1800 s"
    records, finished = parse(done.stdout)
    for record in records:
        record["scenario"] = scenario
    if done.returncode != 0 and not (label.startswith("oshmem") and finished):
        return records, f"{label}: exit code {done.returncode}: " + tail(done)
    return records, None


def rounds(args, default: int) -> int:
    """--rounds, else 1 with --quick, else `default`."""
    return args.rounds if args.rounds is not None else (1 if args.quick else default)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer sizes and repetitions (about three minutes)")
    parser.add_argument("--out", default=RESULTS,
                        help="folder for results.json and the plots (default: bench-results/)")
    parser.add_argument("--no-oshmem", action="store_true", help="skip the OSHMEM peer")
    parser.add_argument("--no-python", action="store_true", help="skip the Python and gloo runs")
    parser.add_argument("--contended", action="store_true",
                        help="also run the latency patterns (ping-pong, barrier) with one "
                             "CPU-bound process beside the job, ours and OSHMEM's alike")
    parser.add_argument("--rounds", type=int, default=None,
                        help="run every measurement this many times, alternating the order, and "
                             "pool the repetitions (default: 1 with --quick, else 3)")
    parser.add_argument("--moe", action="store_true",
                        help="also run the MegaMoE suite (training step, dispatch + combine, "
                             "expert-size sweep; about 6 minutes, 1 with --quick)")
    parser.add_argument("--moe-only", action="store_true", help="run only the MegaMoE suite")
    parser.add_argument("--symm-mem", action="store_true",
                        help="also run torch's symm_mem API on the HPS CPU backend against gloo, "
                             "and a MoE layer on it beside MegaMoE (about a minute)")
    parser.add_argument("--symm-mem-only", action="store_true",
                        help="run only the symm_mem suite (with --moe-only: both)")
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be at least 1, but got {args.rounds}")
    os.makedirs(args.out, exist_ok=True)
    if args.moe_only or args.symm_mem_only:
        code = run_moe(args) if args.moe_only else 0
        if args.symm_mem or args.symm_mem_only:
            code = run_symm_mem(args) or code
        return code
    run_one_host(args)
    code = run_moe(args) if args.moe else 0
    return (run_symm_mem(args) or code) if args.symm_mem else code


def run_one_host(args) -> None:
    """The one-host suite: runs, prints its table and targets, writes results.json and the
    plots into args.out."""
    p = suite.plan(args.quick)
    notes = []
    build_native()
    oshmem = None
    if not args.no_oshmem:
        oshmem, problem = build_oshmem()
        if problem:
            notes.append(problem)
            print(problem, file=sys.stderr)
    env = suite.job_env(p)
    count = rounds(args, 3)
    work = rounds_of(suite.jobs(p, oshmem, not args.no_python, args.contended), count)
    records, failed, started = run_jobs(work, lambda *job: run_job(*job, env=env))
    notes += failed
    rows = summary.summarise(records)
    goals = summary.targets(rows)
    info = machine(started, quick=args.quick, contended=args.contended, rounds=count)
    path = write_json(os.path.join(args.out, "results.json"),
                      {"machine": info, "rows": rows, "targets": goals, "notes": notes})
    written = plots(rows, args.out)
    print_report(summary.table(rows), info, notes, path, written, goals, (48, 14))
    if not written:
        print("no plots: matplotlib is not installed (pip install matplotlib)")


def run_suite(base: list, count: int, key: str, timeout_s: int) -> tuple:
    """A PE-side suite's launches (label, command), `count` rounds in alternating order, pooled:
    (records: its result lines holding `key`, notes: what failed, started: monotonic time)."""
    return run_jobs(rounds_of(base, count), suite_job(bench_env(), key, timeout_s))


def run_moe(args) -> int:
    """The MegaMoE suite: runs, prints its tables and targets, writes moe_results.json and
    moe.png into args.out."""
    count = rounds(args, 3)
    records, notes, started = run_suite(moe.jobs(args.quick), count, "moe", 1800)
    rows = moe.summarise(records)
    goals = moe.targets(rows)
    info = machine(started, quick=args.quick, rounds=count)
    path = write_json(os.path.join(args.out, "moe_results.json"),
                      {"machine": info, "rows": rows, "targets": goals, "notes": notes})
    figure = moe.plot(rows, args.out)
    print_report(moe.table(rows), info, notes, path, figure, goals, (22, 10))
    return 1 if notes and not rows else 0


def run_symm_mem(args) -> int:
    """The symm_mem suite: runs, prints its tables, writes symm_mem_results.json into
    args.out."""
    count = args.rounds if args.rounds is not None else 1
    records, notes, started = run_suite(symm_mem_report.jobs(args.quick), count, "symm", 900)
    backends = sorted({str(r.get("backend")) for r in records if r["symm"] == "backend"})
    rows = symm_mem_report.summarise([r for r in records if r["symm"] != "backend"])
    info = machine(started, quick=args.quick, rounds=count, symm_mem_backend=backends,
                   load_average_1min=sorted({round(r["load"], 2) for r in records if "load" in r}))
    if backends != ["HPS"]:
        notes.append(f"symm_mem.get_backend('cpu') was {', '.join(backends)}, not HPS: the "
                     "symm_mem paths were skipped (is the package with the backend installed?)")
    failed = [row for row in rows if row.get("errors")] if backends == ["HPS"] else []
    for row in failed:  # a wrong result or a raised error: the row was not timed
        where = f"{row.get('op') or row.get('config')} x{row['pes']}" + (
            f" {row['bytes']} B" if row.get("bytes") else "")
        notes.append(f"FAILED {where}: " + "; ".join(row["errors"]))
    path = write_json(os.path.join(args.out, "symm_mem_results.json"),
                      {"machine": info, "rows": rows, "notes": notes})
    print_report(symm_mem_report.table(rows), info, notes, path)
    return 1 if failed or (notes and not rows) else 0


if __name__ == "__main__":
    sys.exit(main())
