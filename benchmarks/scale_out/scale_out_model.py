"""A scaling model of the runtime with every peer remote: latency and state per PE against N.

    python benchmarks/scale_out/scale_out_model.py [--pes 2,4,8,16] [--reps 5] [--min-time-us 20000]
                                         [--predict 64,1024] [--out FILE]

On this one machine, every peer of every PE goes through the UCX transport over loopback
(HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all, UCX_TLS=tcp,self, UCX_NET_DEVICES=lo), so a PE pays the
network path's software cost for each peer, as it would with one PE per host. At each PE count
N it runs, through the package's launcher:

  benchmarks/one_host/python_bench.py --test barrier              shmem.barrier()
  benchmarks/one_host/python_bench.py --test allgather --sizes 8,1048576
                                                         shmem.all_gather, 8 B and 1 MiB per PE
  this script --pe-check                                 every peer's transport is "ucx", the UCX
                                                         endpoints of each PE, and the remote
                                                         operations (puts, atomics, bytes) one
                                                         barrier / all_gather costs a PE

A figure is the median of the repetitions of PE 0's mean time per call (the fastest
repetition is kept too). The barrier and the 8-byte all_gather, which agree in rounds among the
PEs (every PE a host of its own here: docs/architecture.md, "Agreement across hosts"), are
fitted by least squares to t(N) = a + b * ceil(log2 N) (b: the cost of one more round); the
1 MiB all_gather, whose bytes per PE grow with N, to t(N) = a + b * (N - 1). Each fit, of the
medians and of the fastest repetitions, predicts t at the --predict counts. The control block a
PE's segment carries (per-team and per-peer arrays, ccsrc/backends/host/control_block.h
ControlLayout) and its UCX endpoints at init (one per watch partner: the PEs at distance 2^k
either way, docs/scale-out.md, "Liveness") are computed for the same counts; the check reports
the endpoints each PE had at init and after the measured calls.
Output: a table on stdout and FILE (default bench-results/scale_out_model.json, its plot
beside it; benchmarks/publish.py copies them into docs/benchmarks/).

Caveats: the PEs share this machine's cores (16 PEs on 2 cores wait for each other's
timeslices, and every PE has a UCX progress thread), so b carries the oversubscription as well
as the network cost; the predictions at 64 and 1024 PEs are of the model, not of a job that
ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import BENCH, RESULTS  # noqa: E402
from common.launch import pes_command  # noqa: E402
from common.plots import pyplot, save  # noqa: E402
from common.report import machine, write_json  # noqa: E402
from common.results import emit_on, records  # noqa: E402
from common.stats import record as measured  # noqa: E402
from common.units import MIB, ints  # noqa: E402
LOOPBACK = {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", "UCX_TLS": "tcp,self",
            "UCX_NET_DEVICES": "lo"}
# (test, label, bytes, the fit's x: "log2" for ceil(log2 N), "peers" for N - 1)
MEASUREMENTS = (("barrier", "barrier", 0, "log2"), ("allgather", "all_gather 8 B per PE", 8, "log2"),
                ("allgather", "all_gather 1 MiB per PE", MIB, "peers"))

# ControlLayout (ccsrc/backends/host/control_block.h), from the struct sizes on x86-64:
# ControlBlock (the head) 192 B (32 B of fields, the doorbell on its own 64-byte line, lost_peer
# on another); CollectiveSlot 12 words aligned to 64: 128 B; SummarySlot 41 words aligned to
# 64: 384 B; PaddedCounter 64 B.
HEAD_BYTES, SLOT_BYTES, SUMMARY_BYTES, COUNTER_BYTES, PAGE = 192, 128, 384, 64, 4096
DEFAULT_TEAMS = 64  # Config::kDefaultMaxTeams (HYPER_PARALLEL_SHMEM_MAX_TEAMS)
DEFAULT_MAX_PES = 4096  # Config::kDefaultMaxPes (HYPER_PARALLEL_SHMEM_MAX_PES)


def rounds(pes: int) -> int:
    """ceil(log2 pes): the rounds of a dissemination among pes parties."""
    return max(0, (pes - 1).bit_length())


def control_block(pes: int, teams: int = DEFAULT_TEAMS) -> dict:
    """The bytes of one PE's control block for `pes` PEs and `teams` team slots, by array."""
    parts = {"head": (HEAD_BYTES + 63) // 64 * 64,
             "collective": teams * 2 * SLOT_BYTES,  # this PE's own descriptors
             "verdicts": teams * 2 * SUMMARY_BYTES,  # a host leader's verdicts
             "rounds": teams * rounds(pes) * 2 * SUMMARY_BYTES,  # summaries received per round
             "steps": teams * rounds(pes) * COUNTER_BYTES,  # round words of data in rounds
             "arrivals": teams * 2 * 9 * COUNTER_BYTES,  # 8 lanes for the host, 1 network
             "offers": pes * 2 * SLOT_BYTES,  # team creation's mailbox per peer
             "beats": pes * COUNTER_BYTES}  # heartbeats per remote peer
    total = sum(parts.values())
    return {"pes": pes, "teams": teams, "parts": parts, "bytes": total,
            "bytes_paged": (total + PAGE - 1) // PAGE * PAGE,
            "per_team_bytes": (total - parts["head"] - parts["offers"] - parts["beats"]) // teams,
            "ucx_endpoints": len(watch_partners(0, pes))}


def watch_partners(rank: int, pes: int) -> set:
    """The PEs `rank` makes endpoints to at init (backends/host/liveness.h WatchPartners)."""
    partners, distance = set(), 1
    while distance < pes:
        partners |= {(rank + distance) % pes, (rank - distance) % pes}
        distance *= 2
    return partners - {rank}


def control_block_before(pes: int, teams: int = DEFAULT_TEAMS) -> int:
    """The control block before the agreement in rounds (a mirror of every peer's descriptor
    slots and an epoch per peer in every team slot), for the plot."""
    return 192 + teams * 2 * SLOT_BYTES + teams * pes * COUNTER_BYTES + pes * 2 * SLOT_BYTES \
        + teams * 2 * pes * SLOT_BYTES + pes * COUNTER_BYTES


def plot(results: dict, path: str) -> None:
    """Latency against N with the fits, and the control block against N, before and after."""
    plt = pyplot()
    if plt is None:
        return
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, model in results["fits"].items():
        if model["form"] != "a + b * ceil(log2 N)":
            continue
        points = model["points"]
        shown = left.plot([p["pes"] for p in points], [p["median_us"] for p in points], "o",
                          label=f"{label} (median)")[0]
        counts = [2 ** k for k in range(1, 11)]
        left.plot(counts, [model["a_us"] + model["b_us"] * rounds(n) for n in counts], "--",
                  color=shown.get_color(),
                  label=f"fit {model['a_us']:.0f} + {model['b_us']:.0f}·⌈log2 N⌉ µs")
    left.set_xscale("log", base=2)
    left.set_xlabel("PEs N (each a host of its own, over loopback)")
    left.set_ylabel("µs per call")
    left.set_title("barrier and 8-byte all_gather, in rounds")
    left.legend(fontsize=7)
    counts = [2 ** k for k in range(1, 13)]
    teams = results["control_block"]["teams"]
    right.plot(counts, [control_block(n, teams)["bytes"] / 1024 for n in counts], "o-",
               label="in rounds (this build)")
    right.plot(counts, [control_block_before(n, teams) / 1024 for n in counts], "s--",
               label="per-peer mirrors and epochs (before)")
    right.axhline(1024, color="grey", linewidth=0.8)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("PEs N")
    right.set_ylabel("KiB per PE")
    right.set_title(f"control block per PE, {teams} team slots (line: 1 MiB)")
    right.legend(fontsize=7)
    save(plt, figure, path)
    print(f"wrote {path}", file=sys.stderr)


def x_of(pes: int, form: str) -> int:
    return rounds(pes) if form == "log2" else pes - 1


def fit(points: list, form: str) -> dict:
    """Least squares of t = a + b * x(N) over [(N, t)], x as x_of(N, form)."""
    xs = [x_of(n, form) for n, _ in points]
    ys = [t for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    residual = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    total = sum((y - my) ** 2 for y in ys)
    return {"form": "a + b * ceil(log2 N)" if form == "log2" else "a + b * (N - 1)",
            "a_us": a, "b_us": b, "r2": 1 - residual / total if total else 1.0}


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
        endpoints_at_init = network.get("endpoints")
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
        mine = {"transports": transports, "endpoints": endpoints_at_init,
                "endpoints_after": shmem.debug_state()["network"]["endpoints"],
                "provider": network.get("provider"), "version": network.get("version"),
                "per_call": per_call}
        gathered = [None] * size
        dist.all_gather_object(gathered, mine)
        emit_on(rank, {
                "pes": size, "transports": sorted({t for g in gathered for t in g["transports"]}),
                "endpoints": [g["endpoints"] for g in gathered],
                "endpoints_after": [g["endpoints_after"] for g in gathered],
                "provider": mine["provider"], "version": mine["version"],
                # The most any PE issued per call (the closing barrier of the measurement is
                # outside it; a barrier's own ops are in its row).
                "remote_ops_per_call": {name: {key: max(g["per_call"][name][key]
                                                        for g in gathered)
                                               for key in per_call[name]}
                                        for name in per_call}})
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
    done = subprocess.run(pes_command(pes, timeout_s, program), env=env, capture_output=True, text=True,
                          timeout=timeout_s + 60)
    return done.returncode, done.stdout, done.stderr


def measure(pes: int, args) -> tuple:
    """(points {measurement: row}, check, problems) at `pes` PEs."""
    bench = os.path.join(BENCH, "one_host", "python_bench.py")
    common = ["--reps", str(args.reps), "--min-time-us", str(args.min_time_us)]
    points, problems = {}, []
    for test, sizes in (("barrier", None), ("allgather", "8,1048576")):
        program = [bench, "--test", test] + (["--sizes", sizes] if sizes else []) + common
        rc, out, err = launch(pes, program)
        if rc != 0:
            problems.append(f"{test} x{pes}: exit {rc}: "
                            + " | ".join(err.strip().splitlines()[-4:]))
        for record in records(out):
            name = next(label for t, label, size, _ in MEASUREMENTS
                        if t == record["test"] and size == record["bytes"])
            row = measured("hps_python", record["test"], record["bytes"], record["samples_us"],
                           record["iters"])
            points[name] = {"pes": pes, **{key: row[key] for key in (
                "median_us", "min_us", "max_us", "iters")}, "samples_us": record["samples_us"]}
    rc, out, err = launch(pes, [os.path.abspath(__file__), "--pe-check"])
    check = (records(out, "transports") or [None])[0]
    if rc != 0 or check is None:
        problems.append(f"check x{pes}: exit {rc}: " + " | ".join(err.strip().splitlines()[-4:]))
    elif check["transports"] != ["ucx"] or any(
            e != len(watch_partners(rank, pes)) for rank, e in enumerate(check["endpoints"])):
        problems.append(f"check x{pes}: peers not all through UCX: {check}")
    return points, check, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", default="2,4,8,16", type=ints)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--min-time-us", type=float, default=20000)
    parser.add_argument("--predict", default="64,1024", type=ints)
    parser.add_argument("--teams", type=int, default=DEFAULT_TEAMS,
                        help="team slots for the control block (HYPER_PARALLEL_SHMEM_MAX_TEAMS)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "scale_out_model.json"))
    parser.add_argument("--plot", help="the plot's file (default: --out's, ending .png)")
    parser.add_argument("--plot-only", metavar="JSON", help="redraw the plot from a result file")
    parser.add_argument("--pe-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.plot = args.plot or os.path.splitext(args.out)[0] + ".png"
    if args.pe_check:
        return pe_check()
    if args.plot_only:
        with open(args.plot_only) as source:
            plot(json.load(source), args.plot)
        return 0
    started = time.monotonic()
    raw = {label: [] for _, label, _, _ in MEASUREMENTS}
    forms = {label: form for _, label, _, form in MEASUREMENTS}
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
        form = forms[label]
        model = fit([(r["pes"], r["median_us"]) for r in rows], form)
        model["predicted_us"] = {str(n): model["a_us"] + model["b_us"] * x_of(n, form)
                                 for n in args.predict}
        # The same fit of each point's fastest repetition: on a loaded machine the median
        # still carries other processes' timeslices, the minimum the least of them.
        least = fit([(r["pes"], r["min_us"]) for r in rows], form)
        least["predicted_us"] = {str(n): least["a_us"] + least["b_us"] * x_of(n, form)
                                 for n in args.predict}
        models[label] = {"points": rows, **model, "of_min": least}
    counts = sorted(set(args.pes) | set(args.predict))
    results = {
        "machine": machine(started, load_average=os.getloadavg()),
        "setting": {**LOOPBACK, "launcher": "hyper_parallel.core.multicore.shmem.launch",
                    "reps": args.reps, "min_time_us": args.min_time_us,
                    "statistic": "median over repetitions of PE 0's mean time per call"},
        "model": "t(N) = a + b * x(N), least squares (x: each fit's form, ceil(log2 N) or "
                 "N - 1): of the medians (a_us, b_us), and of each point's fastest repetition "
                 "(of_min)",
        "fits": models, "checks": checks,
        "control_block": {"teams": args.teams, "max_pes": DEFAULT_MAX_PES,
                          "formula": "head 192 + T*(collective 2*128 + verdicts 2*384 + rounds "
                                     "ceil(log2 N)*2*384 + arrivals 2*9*64) + N*(offers 2*128 + "
                                     "beats 64) bytes",
                          "by_pes": [control_block(n, args.teams) for n in counts]},
        "problems": problems,
    }
    write_json(args.out, results)
    print(f"{'measurement':<26}" + "".join(f"{'N=' + str(n):>11}" for n in args.pes)
          + f"{'a us':>10}{'b us':>11}{'r2':>6}"
          + "".join(f"{'@' + str(n):>12}" for n in args.predict))
    for label, model in models.items():
        for statistic, fitted in (("median_us", model), ("min_us", model["of_min"])):
            by = {r["pes"]: r[statistic] for r in model["points"]}
            name = label + (" (min)" if statistic == "min_us" else "")
            print(f"{name:<26}" + "".join(f"{by.get(n, float('nan')):>11.1f}" for n in args.pes)
                  + f"{fitted['a_us']:>10.1f}{fitted['b_us']:>11.1f}{fitted['r2']:>6.2f}"
                  + "".join(f"{fitted['predicted_us'][str(n)]:>12.0f}" for n in args.predict))
    print()
    print(f"{'PEs':>6}{'control block B':>17}{'paged':>11}{'UCX endpoints at init':>23}")
    for block in results["control_block"]["by_pes"]:
        note = "  (above HYPER_PARALLEL_SHMEM_MAX_PES' default)" \
            if block["pes"] > DEFAULT_MAX_PES else ""
        print(f"{block['pes']:>6}{block['bytes']:>17,}{block['bytes_paged']:>11,}"
              f"{block['ucx_endpoints']:>23}{note}")
    for check in checks:
        print(f"check x{check['pes']}: transports {check['transports']}, endpoints at init "
              f"{sorted(set(check['endpoints']))}, after the calls "
              f"{sorted(set(check.get('endpoints_after', [])))}, remote ops per call (max over PEs): "
              + "; ".join(f"{name}: {ops['puts']:.0f} puts, {ops['atomics']:.0f} atomics, "
                          f"{ops['bytes_put'] / 1024:.1f} KiB"
                          for name, ops in check["remote_ops_per_call"].items()))
    for problem in problems:
        print(f"problem: {problem}")
    print(f"wrote {args.out}")
    plot(results, args.plot)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
