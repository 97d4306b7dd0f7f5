"""A scaling model of the runtime with every peer remote: latency and state per PE against N.

    python benchmarks/scale_out_model.py [--pes 2,4,8] [--reps 5] [--min-time-us 20000]
                                         [--predict 8,64,1024] [--out FILE]

On this one machine, every peer of every PE goes through the UCX transport over loopback
(HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all, UCX_TLS=tcp,self, UCX_NET_DEVICES=lo), so a PE pays the
network path's software cost for each peer, as it would with one PE per host. At each PE count
N it runs, through the package's launcher:

  benchmarks/python_bench.py --test barrier              shmem.barrier()
  benchmarks/python_bench.py --test allgather --sizes 8,1048576
                                                         shmem.all_gather, 8 B and 1 MiB per PE
  this script --pe-check                                 every peer's transport is "ucx", the UCX
                                                         endpoints of each PE, and the remote
                                                         operations (puts, atomics, bytes) one
                                                         barrier / all_gather costs a PE

A figure is the median of the repetitions of PE 0's mean time per call (the fastest
repetition is kept too). Each measurement is fitted by least squares to t(N) = a + b * (N - 1)
(b: the cost of one more peer), of the medians and of the fastest repetitions, and each fit
predicts t at the --predict counts. The control block a PE's segment carries (per-team and
per-peer arrays, ccsrc/backends/host/control_block.h ControlLayout) and its UCX endpoints (one
per remote peer) are computed for the same counts. Output: a table on stdout and FILE
(default docs/benchmarks/scale_out_model.json).

Caveats: the PEs share this machine's cores (8 PEs on 2 cores wait for each other's
timeslices, and every PE has a UCX progress thread), so b carries the oversubscription as well
as the per-peer network cost; the fit is of three points; the host backend serves worlds of at
most kMaxHostPes (256) PEs today, so the prediction at 1024 is of the model, not of a job that
runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
LOOPBACK = {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", "UCX_TLS": "tcp,self",
            "UCX_NET_DEVICES": "lo"}
MEASUREMENTS = (("barrier", "barrier", 0), ("allgather", "all_gather 8 B per PE", 8),
                ("allgather", "all_gather 1 MiB per PE", MIB))

# ControlLayout (ccsrc/backends/host/control_block.h), from the struct sizes on x86-64:
# ControlBlock (the head) 192 B (32 B of fields, the doorbell on its own 64-byte line, lost_peer
# on another); CollectiveSlot 12 words aligned to 64: 128 B; PaddedCounter 64 B.
HEAD_BYTES, SLOT_BYTES, COUNTER_BYTES, PAGE = 192, 128, 64, 4096
DEFAULT_TEAMS = 64  # Config::kDefaultMaxTeams (HYPER_PARALLEL_SHMEM_MAX_TEAMS)
MAX_HOST_PES = 256  # kMaxHostPes: the largest world the host backend serves


def control_block(pes: int, teams: int = DEFAULT_TEAMS) -> dict:
    """The bytes of one PE's control block for `pes` PEs and `teams` team slots, by array."""
    parts = {"head": (HEAD_BYTES + 63) // 64 * 64,
             "collective": teams * 2 * SLOT_BYTES,  # this PE's own descriptors
             "epochs": teams * pes * COUNTER_BYTES,
             "offers": pes * 2 * SLOT_BYTES,
             "mirrors": teams * 2 * pes * SLOT_BYTES,  # remote peers' descriptors
             "beats": pes * COUNTER_BYTES}
    total = sum(parts.values())
    return {"pes": pes, "teams": teams, "parts": parts, "bytes": total,
            "bytes_paged": (total + PAGE - 1) // PAGE * PAGE,
            "per_pe_bytes": total - parts["head"] - parts["collective"],
            "ucx_endpoints": pes - 1}


def fit(points: list) -> dict:
    """Least squares of t = a + b * (N - 1) over [(N, t)]."""
    xs = [n - 1 for n, _ in points]
    ys = [t for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    residual = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    total = sum((y - my) ** 2 for y in ys)
    return {"a_us": a, "b_us": b, "r2": 1 - residual / total if total else 1.0}


# ---- the PE side of --pe-check -------------------------------------------------------------

def pe_check() -> int:
    """Every peer through UCX; this PE's endpoints; remote operations per call (rank 0 prints
    the maxima over the PEs as one JSON line)."""
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)
    init_process_group_from_environment()
    rank, size = dist.get_rank(), dist.get_world_size()
    handle = shmem.acquire_shmem()
    try:
        state = shmem.debug_state()
        transports = sorted({p["transport"] for p in state["peers"] if p["pe"] != rank})
        network = state["network"] or {}
        out = shmem.empty(size * MIB, dtype=torch.uint8)
        source = torch.full((MIB,), rank, dtype=torch.uint8)
        calls = 20
        per_call = {}
        for name, body in (("barrier", shmem.barrier),
                           ("all_gather 8 B per PE",
                            lambda: shmem.all_gather(out[: 8 * size], source[:8])),
                           ("all_gather 1 MiB per PE", lambda: shmem.all_gather(out, source))):
            body()
            shmem.barrier()
            before = shmem.debug_state()["network"]["ops"]
            for _ in range(calls):
                body()
            after = shmem.debug_state()["network"]["ops"]
            per_call[name] = {key: (after[key] - before[key]) / calls for key in after}
        shmem.free(out)
        mine = {"transports": transports, "endpoints": network.get("endpoints"),
                "provider": network.get("provider"), "version": network.get("version"),
                "per_call": per_call}
        gathered = [None] * size
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            print(json.dumps({
                "pes": size, "transports": sorted({t for g in gathered for t in g["transports"]}),
                "endpoints": [g["endpoints"] for g in gathered],
                "provider": mine["provider"], "version": mine["version"],
                # The most any PE issued per call (the closing barrier of the measurement is
                # outside it; a barrier's own ops are in its row).
                "remote_ops_per_call": {name: {key: max(g["per_call"][name][key]
                                                        for g in gathered)
                                               for key in per_call[name]}
                                        for name in per_call}}), flush=True)
    finally:
        handle.close()
        dist.destroy_process_group()
    return 0


# ---- the driver ----------------------------------------------------------------------------

def launch(pes: int, program: list, timeout_s: int = 900) -> tuple:
    """Runs `program` as `pes` PEs with every peer remote over loopback: (rc, stdout, stderr)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **LOOPBACK)
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "hyper_parallel.core.multicore.shmem.launch", "--nproc",
               str(pes), "--timeout", str(timeout_s), *program]
    done = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=timeout_s + 60)
    return done.returncode, done.stdout, done.stderr


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def measure(pes: int, args) -> tuple:
    """(points {measurement: row}, check, problems) at `pes` PEs."""
    bench = os.path.join(HERE, "python_bench.py")
    common = ["--reps", str(args.reps), "--min-time-us", str(args.min_time_us)]
    points, problems = {}, []
    for test, sizes in (("barrier", None), ("allgather", "8,1048576")):
        program = [bench, "--test", test] + (["--sizes", sizes] if sizes else []) + common
        rc, out, err = launch(pes, program)
        if rc != 0:
            problems.append(f"{test} x{pes}: exit {rc}: "
                            + " | ".join(err.strip().splitlines()[-4:]))
        for record in json_lines(out):
            name = next(label for t, label, size in MEASUREMENTS
                        if t == record["test"] and size == record["bytes"])
            points[name] = {"pes": pes, "median_us": statistics.median(record["samples_us"]),
                            "min_us": min(record["samples_us"]),
                            "max_us": max(record["samples_us"]),
                            "samples_us": record["samples_us"], "iters": record["iters"]}
    rc, out, err = launch(pes, [os.path.abspath(__file__), "--pe-check"])
    check = (json_lines(out) or [None])[0]
    if rc != 0 or check is None:
        problems.append(f"check x{pes}: exit {rc}: " + " | ".join(err.strip().splitlines()[-4:]))
    elif check["transports"] != ["ucx"] or any(e != pes - 1 for e in check["endpoints"]):
        problems.append(f"check x{pes}: peers not all through UCX: {check}")
    return points, check, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", default="2,4,8", type=lambda t: [int(v) for v in t.split(",")])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--min-time-us", type=float, default=20000)
    parser.add_argument("--predict", default="8,64,1024",
                        type=lambda t: [int(v) for v in t.split(",")])
    parser.add_argument("--teams", type=int, default=DEFAULT_TEAMS,
                        help="team slots for the control block (HYPER_PARALLEL_SHMEM_MAX_TEAMS)")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks",
                                                      "scale_out_model.json"))
    parser.add_argument("--pe-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pe_check:
        return pe_check()
    started = time.monotonic()
    raw = {label: [] for _, label, _ in MEASUREMENTS}
    checks, problems = [], []
    for pes in args.pes:
        print(f"[{time.monotonic() - started:5.0f}s] {pes} PEs ...", file=sys.stderr, flush=True)
        points, check, bad = measure(pes, args)
        for label, row in points.items():
            raw[label].append(row)
        if check:
            checks.append(check)
        problems += bad
    models = {}
    for label, rows in raw.items():
        if len(rows) < 2:
            continue
        model = fit([(r["pes"], r["median_us"]) for r in rows])
        model["predicted_us"] = {str(n): model["a_us"] + model["b_us"] * (n - 1)
                                 for n in args.predict}
        # The same fit of each point's fastest repetition: on a loaded machine the median
        # still carries other processes' timeslices, the minimum the least of them.
        least = fit([(r["pes"], r["min_us"]) for r in rows])
        least["predicted_us"] = {str(n): least["a_us"] + least["b_us"] * (n - 1)
                                 for n in args.predict}
        models[label] = {"points": rows, **model, "of_min": least}
    counts = sorted(set(args.pes) | set(args.predict))
    results = {
        "machine": {"cpus": os.cpu_count(), "system": platform.platform(),
                    "python": platform.python_version(),
                    "load_average": os.getloadavg(),
                    "seconds": round(time.monotonic() - started, 1)},
        "setting": {**LOOPBACK, "launcher": "hyper_parallel.core.multicore.shmem.launch",
                    "reps": args.reps, "min_time_us": args.min_time_us,
                    "statistic": "median over repetitions of PE 0's mean time per call"},
        "model": "t(N) = a + b * (N - 1), least squares: of the medians (a_us, b_us), and of "
                 "each point's fastest repetition (of_min)",
        "fits": models, "checks": checks,
        "control_block": {"teams": args.teams, "max_host_pes": MAX_HOST_PES,
                          "formula": "head 192 + collective 2*T*128 + epochs T*N*64 + offers "
                                     "2*N*128 + mirrors 2*T*N*128 + beats N*64 bytes",
                          "by_pes": [control_block(n, args.teams) for n in counts]},
        "problems": problems,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as sink:
        json.dump(results, sink, indent=1)
    print(f"{'measurement':<26}" + "".join(f"{'N=' + str(n):>11}" for n in args.pes)
          + f"{'a us':>10}{'b us/peer':>11}{'r2':>6}"
          + "".join(f"{'@' + str(n):>12}" for n in args.predict))
    for label, model in models.items():
        for statistic, fitted in (("median_us", model), ("min_us", model["of_min"])):
            by = {r["pes"]: r[statistic] for r in model["points"]}
            name = label + (" (min)" if statistic == "min_us" else "")
            print(f"{name:<26}" + "".join(f"{by.get(n, float('nan')):>11.1f}" for n in args.pes)
                  + f"{fitted['a_us']:>10.1f}{fitted['b_us']:>11.1f}{fitted['r2']:>6.2f}"
                  + "".join(f"{fitted['predicted_us'][str(n)]:>12.0f}" for n in args.predict))
    print()
    print(f"{'PEs':>6}{'control block B':>17}{'paged':>11}{'UCX endpoints':>15}")
    for block in results["control_block"]["by_pes"]:
        note = "  (above the host backend's 256-PE world)" if block["pes"] > MAX_HOST_PES else ""
        print(f"{block['pes']:>6}{block['bytes']:>17,}{block['bytes_paged']:>11,}"
              f"{block['ucx_endpoints']:>15}{note}")
    for check in checks:
        print(f"check x{check['pes']}: transports {check['transports']}, endpoints "
              f"{sorted(set(check['endpoints']))}, remote ops per call (max over PEs): "
              + "; ".join(f"{name}: {ops['puts']:.0f} puts, {ops['atomics']:.0f} atomics, "
                          f"{ops['bytes_put'] / 1024:.1f} KiB"
                          for name, ops in check["remote_ops_per_call"].items()))
    for problem in problems:
        print(f"problem: {problem}")
    print(f"wrote {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
