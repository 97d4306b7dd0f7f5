"""Scale-out benchmark: two hosts, one PE on each, over a network link; the runtime beside its peers.

    sudo python benchmarks/scale_out/scale_out.py [--quick] [--only SYSTEM,...] [--out DIR]
                                        [--pe-env KEY=VALUE ...] [--plots DIR]
    sudo python benchmarks/scale_out/scale_out.py --smoke        # ucx_perftest across the link, seconds
    python benchmarks/scale_out/scale_out.py --plot-only DIR/scale_out.json [--plots DIR]

The two hosts are Linux namespaces joined by a bridge (tests/python/netns_hosts.py): each has
its own network stack with one veth link, eth0, its own hostname, process ids and /dev/shm, so
every byte between the two PEs crosses eth0 over TCP. Needs root. The systems measured:

  oshmem        Open MPI's OSHMEM over UCX tcp (benchmarks/native/oshmem_bench.c), launched by
                oshrun from host 0 with a hostfile naming both hosts' addresses. oshrun starts
                the remote daemon (orted) through a launch agent (--mca plm_rsh_agent) instead
                of ssh: a small script that hands its argv and its stdin/stdout/stderr (as file
                descriptors over a Unix socket) to this process, which starts the command
                inside host 1's namespaces; see Relay (common/hosts.py).
                put_bw: putmem x iters + quiet; put_signal: 8 B putmem, fence, atomic add on a
                flag, quiet (time per call; the target waits in shmem_wait_until, which
                drives its progress); pingpong: 8 B putmem + fence + atomic set,
                answered after shmem_wait_until (half round trip).
  ucx_perftest  UCX's own benchmark, server on host 1 and client on host 0: ucp_put_bw,
                ucp_put_lat and ucp_am_lat (its typical latency, i.e. the median);
                ucp_put_bw with -O 1 (one put in flight, like a blocking putmem).
  gloo          torch.distributed over gloo: all_gather_into_tensor, all_to_all_single.
  hps           Hyper-Parallel SHMEM from Python (hyper_parallel.core.multicore.shmem): put_bw
                (shmem.put x iters, then a barrier), put_signal (8 B, time per call, a
                barrier closing each repetition), pingpong (put_signal + wait_signal),
                all_gather, all_to_all. A build without the UCX transport fails every row with
                UNSUPPORTED_CAPABILITY; the failure is recorded per row and the run goes on.
  moe           the MegaMoE training step (benchmarks/moe/moe_bench.py --test step: zero_grad,
                forward, backward, dense all-reduce, AdamW of the suite's small decoder;
                MegaMoE with EP over both PEs against AllToAllMoE, the same layer over gloo's
                all_to_all_single, built from the same seed, routers frozen, alternating
                order, one torch thread per PE, a step's time the slower PE's) on the suite's
                model sizes (benchmarks/moe/suite.py SIZES): across the two hosts, and for reference
                on one host through the package's launcher, every peer through UCX over lo
                (HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) and over shared memory.

Every PE-side figure is the median of the repetitions (min and max kept); bandwidth is bytes
moved per second (GB = 1e9 B). Output: a table with ratios (peer time / our time: above 1, ours
is faster), the MoE steps and the scale-out targets (met or not) on stdout, DIR/scale_out.json,
and the plots scale_out_put_bw.png, scale_out_latency.png and scale_out_collectives.png
(all_gather and all_to_all against gloo, the MoE step) in --plots (default: --out's folder;
docs/benchmarks for a recorded run).
The machine is shared by both hosts (same cores, same kernel): treat the figures as the link's software cost, not a NIC's; on a loaded
machine, busy-polling PEs wait for a scheduler tick (milliseconds) now and then.

Our side with settings of its own, e.g.:
    sudo python benchmarks/scale_out/scale_out.py --only hps,moe --pe-env UCX_TLS=tcp,self
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.hosts import LINK, import_netns_hosts  # noqa: E402
from common.report import failure, machine, write_json, wrote  # noqa: E402
from common.units import KIB, MIB, ints  # noqa: E402
from scale_out.moe import measure_moe  # noqa: E402
from scale_out.native import breakdown_stages, measure_breakdown, measure_native  # noqa: E402
from scale_out.peers import measure_oshmem, perftest_once, run_perftest  # noqa: E402
from scale_out.pes import PE_TESTS, measure_gloo, measure_hps, pe_main  # noqa: E402
from scale_out.report import plots, ratios, report, targets  # noqa: E402

SYSTEMS = ("oshmem", "ucx_perftest", "gloo", "hps", "native", "breakdown", "moe")


def plan(quick: bool) -> dict:
    if quick:
        return {"bw": [256 * KIB, 4 * MIB], "coll": [MIB], "reps": 3, "min_us": 50000,
                "perftest_bytes": 64 * MIB, "lat_iters": 5000,
                "moe": ["tiny", "small"], "moe_steps": 5}
    return {"bw": [64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "coll": [64 * KIB, MIB, 4 * MIB, 16 * MIB], "reps": 5, "min_us": 200000,
            "perftest_bytes": 256 * MIB, "lat_iters": 20000,
            "moe": ["tiny", "small", "medium"], "moe_steps": 9}


# ---- driver --------------------------------------------------------------------------------

def smoke() -> int:
    """ucx_perftest across the two hosts, small: the link and UCX tcp work (seconds)."""
    netns_hosts = import_netns_hosts()
    why = netns_hosts.available()
    if why:
        print(f"smoke: skipped: {why}")
        return 77
    if shutil.which("ucx_perftest") is None:
        print("smoke: skipped: ucx_perftest is missing (Debian ucx-utils)")
        return 77
    with netns_hosts.NetnsHosts(2) as hosts:
        lat, problem = perftest_once(hosts, "ucp_put_lat", 8, 2000, 13400, timeout_s=30)
        if problem:
            print(f"smoke: ucp_put_lat failed: {problem}")
            return 1
        bw, problem = perftest_once(hosts, "ucp_put_bw", 64 * KIB, 200, 13401, timeout_s=30)
        if problem:
            print(f"smoke: ucp_put_bw failed: {problem}")
            return 1
    print(f"smoke: ok: ucp_put_lat 8 B {lat['lat_typical_us']:.2f} us, "
          f"ucp_put_bw 64 KiB {bw['bw_avg_MBps']:.1f} MB/s, host0 -> host1 over {LINK}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, fewer repetitions")
    parser.add_argument("--smoke", action="store_true",
                        help="only a small ucx_perftest across the two hosts (seconds)")
    parser.add_argument("--only", default=",".join(SYSTEMS),
                        help=f"comma list of systems to run (default: {','.join(SYSTEMS)})")
    parser.add_argument("--out", default=RESULTS,
                        help="folder for scale_out.json (default: bench-results/)")
    parser.add_argument("--plots",
                        help="folder for the PNGs (default: --out's folder; "
                             "benchmarks/publish.py copies a recorded run into docs/benchmarks)")
    parser.add_argument("--plot-only", metavar="JSON", help="redraw the plots from a result file")
    parser.add_argument("--pe-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the PEs (ours, native and Python, "
                             "and gloo's)")
    parser.add_argument("--native-bench", metavar="PATH",
                        help="the shmem_bench to run for native and breakdown (default: build "
                             "the repository's into build/bench/)")
    parser.add_argument("--pe", choices=PE_TESTS, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=ints,
                        help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=5, help=argparse.SUPPRESS)
    parser.add_argument("--min-time-us", type=float, default=200000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pe:
        return pe_main(args)
    if args.smoke:
        return smoke()
    if args.plot_only:
        with open(args.plot_only) as source:
            results = json.load(source)
        written = plots(results, args.plots or os.path.dirname(os.path.abspath(args.plot_only)))
        print("wrote " + ", ".join(written) if written else "no plots: matplotlib is missing")
        return 0 if written else 1
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS}")
    extra_env = dict(item.split("=", 1) for item in args.pe_env)
    netns_hosts = import_netns_hosts()
    why = netns_hosts.available()
    if why:
        print(f"scale_out: cannot make the hosts: {why}", file=sys.stderr)
        return 77
    p = plan(args.quick)
    os.makedirs(args.out, exist_ok=True)
    rows, failures, notes, info, moe_steps = [], [], [], {}, []
    started, port = time.monotonic(), 29600
    with tempfile.TemporaryDirectory(prefix="scale-out-") as folder, \
            netns_hosts.NetnsHosts(2) as hosts:
        for system in only:
            print(f"[{time.monotonic() - started:6.0f}s] {system} ...", file=sys.stderr,
                  flush=True)
            if system == "oshmem":
                got, bad, info = measure_oshmem(hosts, folder, p)
            elif system == "ucx_perftest":
                if shutil.which("ucx_perftest") is None:
                    got, bad = [], [failure(system, "all", [], "unavailable",
                                            "ucx_perftest is missing (Debian ucx-utils)")]
                else:
                    got, bad, port = run_perftest(hosts, p, port)
            elif system == "gloo":
                got, bad, port = measure_gloo(hosts, p, port, extra_env)
            elif system == "moe":
                got, bad, port = measure_moe(hosts, p, port, extra_env)
                moe_steps += got
                got = []
            elif system == "native":
                got, bad, port = measure_native(hosts, p, port, extra_env, args.native_bench)
            elif system == "breakdown":
                got, bad, port = measure_breakdown(hosts, p, port, extra_env, args.native_bench)
            else:
                got, bad, port = measure_hps(hosts, p, port, extra_env)
            rows += got
            failures += bad
        residue = hosts
    if residue.residue():
        notes.append(f"namespaces left behind: {residue.residue()}")
    results = {"machine": machine(started, quick=args.quick), "hosts": 2, "pes_per_host": 1,
               "link": f"{LINK} (veth pair through a bridge, tcp)", "rows": rows,
               "failures": failures, "ratios": ratios(rows), "moe": moe_steps, "notes": notes,
               "breakdown": breakdown_stages(rows), **info}
    results["targets"] = targets(results)
    path = write_json(os.path.join(args.out, "scale_out.json"), results)
    written = plots(results, args.plots or args.out)
    report(results)
    print(wrote(path, written) + ("" if written else " (no plots: matplotlib is missing)"))
    return 0 if rows or moe_steps else 1


if __name__ == "__main__":
    sys.exit(main())
