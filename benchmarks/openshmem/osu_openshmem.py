"""OSU's OpenSHMEM benchmarks, ours beside Open MPI's OSHMEM, in one run on one host.

    python benchmarks/openshmem/osu_openshmem.py [--suites DIR] [--rounds 3] [--out DIR] [--hosts]

Builds the OSU micro-benchmarks 7.4's OpenSHMEM programs (unchanged, from --suites, default the
suites' folder beside the checkout, docs/openshmem.md; they are not part of the project) twice: with
hps-oshcc and with Open MPI's oshcc. Then, for --rounds rounds, it runs each program with
hps-oshrun and with oshrun, one after the other (point-to-point at 2 PEs on heap buffers;
barrier, broadcast, collect, fcollect and reduce at 2 and at 4 PEs), and keeps each row's median
over the rounds. A row is one message size of one program: latency in microseconds (put, get,
their _nb forms, atomics, the collectives) or messages per second (put_mr, put_mr_nb,
get_mr_nb). Its ratio says how many times better ours is: OSHMEM's latency / ours, or our rate
/ OSHMEM's. The summary is the median ratio over the rows OSHMEM completes and the lowest row
(targets in docs/benchmarks.md: median >= 1.0, no row below 0.9). Writes osu_openshmem.json and
osu_openshmem.png to --out (default bench-results/; benchmarks/publish.py copies them into
docs/benchmarks/).

--hosts: across two hosts made of network namespaces (root; tests/python/netns_hosts.py), one PE
on each: ours started with torchrun's variables on each host, UCX over TCP on the link; OSHMEM
by oshrun from host 0 with its daemon started on host 1 through the scale-out benchmark's relay
(benchmarks/scale_out/peers.py). Point-to-point programs and the collectives at 2 PEs; writes
osu_openshmem_hosts.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS, ROOT  # noqa: E402
from common.build import oshrun  # noqa: E402
from common.hosts import LINK, Relay, import_netns_hosts, write_hostfile  # noqa: E402
from common.launch import wait_all  # noqa: E402
from common.plots import pyplot, save  # noqa: E402
from common.report import markdown, write_json  # noqa: E402
P2P = ("put", "get", "put_nb", "get_nb", "put_mr", "put_mr_nb", "get_mr_nb", "atomics")
COLLECTIVES = ("barrier", "broadcast", "collect", "fcollect", "reduce")
RATES = ("put_mr", "put_mr_nb", "get_mr_nb")
MEDIAN_TARGET, ROW_TARGET = 1.0, 0.9
OSHMEM_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_osc": "^rdma", "SHMEM_SYMMETRIC_HEAP_SIZE": "1G"}


def build(suites: str, work: str) -> dict[str, dict[str, str]]:
    scripts = sysconfig.get_path("scripts")
    src = os.path.join(suites, "osu-micro-benchmarks-7.4", "c")
    compilers = {"hps": os.path.join(scripts, "hps-oshcc"), "oshmem": "oshcc"}
    built: dict[str, dict[str, str]] = {}
    for impl, cc in compilers.items():
        os.makedirs(os.path.join(work, impl), exist_ok=True)
        built[impl] = {}
        for prog in P2P + COLLECTIVES:
            exe = os.path.join(work, impl, f"osu_oshm_{prog}")
            subprocess.run([cc, "-O2", "-DOSHM_1_3", f"-I{src}/util",
                            f"{src}/openshmem/osu_oshm_{prog}.c", f"{src}/util/osu_util.c",
                            f"{src}/util/osu_util_pgas.c", "-lm", "-o", exe],
                           check=True, capture_output=True, timeout=300)
            built[impl][prog] = exe
    return built


def parse(prog: str, text: str) -> dict[str, float]:
    """Rows of an OSU table: size (or the atomic's name) -> the first figure."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if prog == "atomics":
            m = re.match(r"^(shmem_\w+)\s+([0-9.]+)\s+([0-9.]+)", line)
            if m:
                rows[m.group(1)] = float(m.group(3))  # latency column
            continue
        if prog == "barrier":
            m = re.match(r"^\s*([0-9.]+)\s*$", line)
            if m:
                rows["-"] = float(m.group(1))
            continue
        m = re.match(r"^(\d+)\s+([0-9.]+)", line)
        if m:
            rows[m.group(1)] = float(m.group(2))
    return rows


def run(impl: str, exe: str, pes: int, prog: str) -> dict[str, float]:
    scripts = sysconfig.get_path("scripts")
    args = ["heap"] if prog in P2P else []
    if impl == "hps":
        cmd, env = [os.path.join(scripts, "hps-oshrun"), "-np", str(pes), exe] + args, os.environ
    else:
        cmd = oshrun(pes) + [exe] + args
        env = dict(os.environ, **OSHMEM_ENV)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                            cwd=os.path.dirname(exe))
    if result.returncode != 0:
        return {}
    return parse(prog, result.stdout)


def run_across_hosts(built: dict, rounds: int, work: str, samples: dict) -> None:
    """Fills `samples` as main's loop does, with one PE on each of two namespace hosts."""
    from scale_out.peers import oshrun_command

    netns = import_netns_hosts()
    problem = netns.available()
    if problem:
        raise SystemExit(f"--hosts: {problem}")
    cases = [prog for prog in P2P + COLLECTIVES]
    with netns.NetnsHosts(2) as hosts:
        relay = Relay(hosts, work)
        hostfile = write_hostfile(hosts, work)
        try:
            port = 29600
            for r in range(rounds):
                for i, prog in enumerate(cases):
                    print(f"\rhosts round {r + 1}/{rounds} case {i + 1}/{len(cases)} {prog}   ",
                          end="", file=sys.stderr, flush=True)
                    args = ["heap"] if prog in P2P else []
                    port += 2
                    pes = []
                    for rank in range(2):
                        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2",
                                   MASTER_ADDR=hosts.address(0), MASTER_PORT=str(port),
                                   UCX_TLS="tcp,self", UCX_NET_DEVICES=LINK)
                        for name in ("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME", "HPS_OSHRUN_CONTROL_FD"):
                            env.pop(name, None)
                        pes.append(hosts.popen(rank, [built["hps"][prog]] + args, env=env,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True))
                    results = wait_all(pes, 900)
                    if results[0][0] == 0:
                        for row, value in parse(prog, results[0][1]).items():
                            samples.setdefault((prog, 2, row), {}).setdefault("hps", []).append(value)
                    theirs = hosts.popen(0, oshrun_command(hosts, relay, hostfile,
                                                           [built["oshmem"][prog]] + args),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         env=dict(os.environ, **OSHMEM_ENV))
                    rc, out, _ = wait_all([theirs], 900)[0]
                    if rc in (0, 139):  # 139 after its table: OSHMEM's crash at exit (ompi#11604)
                        for row, value in parse(prog, out).items():
                            samples.setdefault((prog, 2, row), {}).setdefault("oshmem", []).append(value)
        finally:
            relay.close()
    print(file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default=os.environ.get(
        "HPS_PEER_SUITES", os.path.join(ROOT, "..", "shared", "peer-suites")))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default="/tmp/hps-osu-openshmem")
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--hosts", action="store_true",
                        help="one PE on each of two namespace hosts (root)")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.suites, "osu-micro-benchmarks-7.4")):
        print(f"no OSU sources under {args.suites}; nothing to run")
        return 0
    built = build(args.suites, args.work)
    cases = [(prog, 2) for prog in P2P] + [(prog, n) for prog in COLLECTIVES for n in (2, 4)]
    samples: dict[tuple, dict[str, list[float]]] = {}
    if args.hosts:
        run_across_hosts(built, args.rounds, args.work, samples)
    for r in range(0 if args.hosts else args.rounds):
        for i, (prog, pes) in enumerate(cases):
            print(f"\rround {r + 1}/{args.rounds} case {i + 1}/{len(cases)} {prog}@{pes}   ",
                  end="", file=sys.stderr, flush=True)
            for impl in ("hps", "oshmem"):
                for row, value in run(impl, built[impl][prog], pes, prog).items():
                    samples.setdefault((prog, pes, row), {}).setdefault(impl, []).append(value)
    print(file=sys.stderr)
    rows = []
    for (prog, pes, row), by_impl in samples.items():
        ours = statistics.median(by_impl["hps"]) if "hps" in by_impl else None
        theirs = statistics.median(by_impl["oshmem"]) if "oshmem" in by_impl else None
        ratio = None
        if ours and theirs:
            ratio = ours / theirs if prog in RATES else theirs / ours
        rows.append({"program": prog, "pes": pes, "row": row, "hps": ours, "oshmem": theirs,
                     "unit": "msg/s" if prog in RATES else "us", "ratio": ratio})
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    summary = {"rows": len(rows), "rows_oshmem_completes": len(ratios),
               "median_ratio": statistics.median(ratios) if ratios else None,
               "lowest_ratio": min(ratios) if ratios else None,
               "median_target": MEDIAN_TARGET, "row_target": ROW_TARGET, "rounds": args.rounds,
               "where": "two namespace hosts, one PE each" if args.hosts else "one host"}
    name = "osu_openshmem_hosts" if args.hosts else "osu_openshmem"
    by_program: dict[str, list[float]] = {}
    for r in rows:
        if r["ratio"] is not None:
            by_program.setdefault(f"{r['program']}@{r['pes']}", []).append(r["ratio"])
    print(markdown(["program", "PEs", "rows", "median ratio", "lowest"],
                   [[*key.split("@"), len(values), f"{statistics.median(values):.2f}x",
                     f"{min(values):.2f}x"] for key, values in by_program.items()]))
    print(json.dumps(summary, indent=1))
    write_json(os.path.join(args.out, name + ".json"), {"summary": summary, "rows": rows})
    plt = pyplot()
    if plt is not None:
        keys = list(by_program)
        fig, ax = plt.subplots(figsize=(10, 4.5))
        ax.boxplot([by_program[k] for k in keys])
        ax.set_xticks(range(1, len(keys) + 1), keys)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.axhline(ROW_TARGET, color="red", linestyle=":", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylabel("ours vs OSHMEM (x, higher is better)")
        ax.set_title(f"OSU OpenSHMEM benchmarks, {summary['where']}: ratio per message size")
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
        save(plt, fig, os.path.join(args.out, name + ".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
