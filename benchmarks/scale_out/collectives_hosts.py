"""Collectives across two hosts: ours beside gloo in the same processes, and the raw TCP floor.

`--tests` picks the collectives (all_gather and all_to_all by default; all_reduce, reduce_scatter
and broadcast of float32 against gloo's all_reduce, reduce_scatter_tensor and broadcast too).

Two hosts made of namespaces joined by one veth link (tests/python/netns_hosts.py), P PEs on
each (2 x 1 and 2 x 2 by default). Every PE joins one torch.distributed gloo group over the
link and acquires the SHMEM runtime; then, per size, it runs rounds that alternate ours and
gloo's (`all_gather` against `all_gather_into_tensor`, `all_to_all` against
`all_to_all_single`, the same bytes per PE), each round a timed loop, and reports the median of
the rounds. With one PE per host it also measures the floor a user could reach by hand: both PEs
exchanging the same bytes over one plain TCP socket pair (each sends what the collective sends
to the other PE, both directions at once; for broadcast the root's bytes one way, then a
one-byte acknowledgement).

    python3 benchmarks/scale_out/collectives_hosts.py                 # 2x1 and 2x2, 64 KiB and 1 MiB
    python3 benchmarks/scale_out/collectives_hosts.py --layouts 2x1 --rounds 5 --sizes 65536

Needs root (network namespaces) and UCX. Writes bench-results/collectives_hosts.json (or
--out) and .png (or --plot), and prints a table of speed ratios (gloo's time / ours: above 1,
ours is faster); benchmarks/publish.py copies them into docs/benchmarks/.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common import RESULTS  # noqa: E402
from common.hosts import LINK, base_env, import_netns_hosts  # noqa: E402
from common.plots import bars, pyplot  # noqa: E402
from common.progress import step  # noqa: E402
from common.report import markdown, when, write_json  # noqa: E402
from common.results import emit_on, records  # noqa: E402
from common.stats import alternating, mean_us  # noqa: E402
from common.units import MIB, human, ints  # noqa: E402


# ---- inside a PE ---------------------------------------------------------------------------

def _exchange_over_tcp(sock: socket.socket, payload: bytes, receive: bytearray) -> None:
    """Sends payload and receives len(receive) bytes on one socket, both at once."""
    sender = threading.Thread(target=sock.sendall, args=(payload,))
    sender.start()
    view, got = memoryview(receive), 0
    while got < len(receive):
        got += sock.recv_into(view[got:])
    sender.join()


def _send_over_tcp(sock: socket.socket, payload: bytes, receive: bytearray, root: bool) -> None:
    """The root sends payload and waits for a one-byte acknowledgement; the other PE receives
    len(receive) bytes and acknowledges them: a broadcast's bytes, one way, to completion."""
    if root:
        sock.sendall(payload)
        sock.recv(1)
        return
    view, got = memoryview(receive), 0
    while got < len(receive):
        got += sock.recv_into(view[got:])
    sock.sendall(b"k")


def pe_main(args) -> int:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    init_process_group_from_environment(timeout_s=120)
    rank, size = dist.get_rank(), dist.get_world_size()
    handle = shmem.acquire_shmem()
    largest = max(args.sizes)
    out_hps = shmem.empty(size * largest, dtype=torch.uint8)
    out_gloo = torch.empty(size * largest, dtype=torch.uint8)
    source = torch.full((largest,), rank, dtype=torch.uint8)
    tcp = None
    if size == 2 and args.tcp_port:
        if rank == 0:
            server = socket.create_server(("0.0.0.0", args.tcp_port))
            dist.barrier()
            tcp, _ = server.accept()
            server.close()
        else:
            dist.barrier()
            tcp = socket.create_connection((os.environ["MASTER_ADDR"], args.tcp_port))
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def timed(body, iters: int) -> float:
        dist.barrier()
        return mean_us(body, iters)

    rows = []
    for n in args.sizes:
        inp = source[:n]
        floats = n // 4  # the reductions: float32 sums of n bytes
        finp = torch.ones(floats)
        hps_f, gloo_f = out_hps[:n].view(torch.float32), out_gloo[:n].view(torch.float32)
        block = floats // size
        bodies = {
            ("all_gather", "hps"): lambda: shmem.all_gather(out_hps[: size * n], inp),
            ("all_gather", "gloo"): lambda: dist.all_gather_into_tensor(out_gloo[: size * n], inp),
            ("all_to_all", "hps"): lambda: shmem.all_to_all(out_hps[:n], inp),
            ("all_to_all", "gloo"): lambda: dist.all_to_all_single(out_gloo[:n], inp),
            ("all_reduce", "hps"): lambda: shmem.all_reduce(hps_f, finp),
            ("all_reduce", "gloo"): lambda: dist.all_reduce(gloo_f.copy_(finp)),
            ("reduce_scatter", "hps"): lambda: shmem.reduce_scatter(hps_f[:block],
                                                                    finp[: block * size]),
            ("reduce_scatter", "gloo"): lambda: dist.reduce_scatter_tensor(gloo_f[:block],
                                                                           finp[: block * size]),
            ("broadcast", "hps"): lambda: shmem.broadcast(out_hps[:n], inp, 0),
            ("broadcast", "gloo"): lambda: dist.broadcast(out_gloo[:n], 0),
        }
        bodies = {key: body for key, body in bodies.items() if key[0] in args.tests}
        if tcp is not None:
            # What each collective sends the other PE: all_gather its whole input, all_to_all
            # the other PE's half.
            for test, sent in (("all_gather", n), ("all_to_all", n // 2)):
                if test not in args.tests:
                    continue
                payload, receive = bytes(sent), bytearray(sent)
                bodies[(test, "tcp")] = (lambda p=payload, r=receive:
                                         _exchange_over_tcp(tcp, p, r))
            if "broadcast" in args.tests:
                payload, receive = bytes(n), bytearray(n)
                bodies[("broadcast", "tcp")] = (lambda p=payload, r=receive:
                                                _send_over_tcp(tcp, p, r, rank == 0))
        for (test, system), body in bodies.items():
            for _ in range(2):
                body()  # warm-up: endpoints, pages
        for test in args.tests:
            systems = [s for s in ("hps", "gloo", "tcp") if (test, s) in bodies]
            probe = timed(bodies[(test, "gloo")], 3)
            count = torch.tensor([max(3, min(2000, int(args.min_time_us / max(probe, 1.0))))])
            dist.broadcast(count, 0)
            iters = int(count.item())
            samples = alternating(systems, args.rounds,
                                  lambda system: timed(bodies[(test, system)], iters))
            if rank == 0:
                for system in systems:
                    rows.append({"test": test, "system": system, "bytes": n, "pes": size,
                                 "iters": iters, "median_us": statistics.median(samples[system]),
                                 "samples_us": [round(s, 2) for s in samples[system]]})
    for row in rows:
        emit_on(rank, row)
    if tcp is not None:
        tcp.close()
    shmem.free(out_hps)
    handle.close()
    dist.destroy_process_group()
    return 0


# ---- the driver ----------------------------------------------------------------------------

def run_layout(netns_hosts, per_host: int, args) -> list:
    world = 2 * per_host
    argv = [sys.executable, os.path.abspath(__file__), "--pe", "--sizes",
            ",".join(map(str, args.sizes)), "--rounds", str(args.rounds), "--min-time-us",
            str(args.min_time_us), "--tcp-port", "29611" if per_host == 1 else "0",
            "--tests", ",".join(args.tests)]
    with netns_hosts.NetnsHosts(2) as hosts:
        processes = []
        for rank in range(world):
            env = base_env(rank, hosts, 29610, {
                "LOCAL_WORLD_SIZE": str(per_host), "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": LINK,
                "HYPER_PARALLEL_SHMEM_HEAP_SIZE": str(max(256 * MIB, 4 * world * max(args.sizes)))},
                world=world, per_host=per_host)
            env.pop("HYPER_PARALLEL_SHMEM_BACKEND", None)
            env.update(args.pe_env)
            processes.append(hosts.popen(rank // per_host, argv, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True))
        rows = []
        for rank, process in enumerate(processes):
            try:
                out, _ = process.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                for other in processes:
                    other.kill()
                raise SystemExit(f"{per_host} PEs per host: PE {rank} timed out")
            if process.returncode != 0:
                raise SystemExit(f"{per_host} PEs per host: PE {rank} exited "
                                 f"{process.returncode}:\n{out[-3000:]}")
            rows += records(out, "test")
    for row in rows:
        row["layout"] = f"2x{per_host}"
    return rows


def table(rows: list) -> str:
    keyed = {(r["layout"], r["test"], r["bytes"], r["system"]): r for r in rows}
    lines = []
    for layout, test, n in sorted({(r["layout"], r["test"], r["bytes"]) for r in rows}):
        ours = keyed[(layout, test, n, "hps")]["median_us"] / 1e3
        gloo = keyed[(layout, test, n, "gloo")]["median_us"] / 1e3
        tcp = keyed.get((layout, test, n, "tcp"))
        floor = [f"{tcp['median_us'] / 1e3:.3f}", f"{tcp['median_us'] / 1e3 / ours:.2f}x"] \
            if tcp else ["-", "-"]
        lines.append([layout, test, human(n), f"{ours:.3f}", f"{gloo:.3f}", f"{gloo / ours:.2f}x",
                      *floor])
    return markdown(["layout", "collective", "bytes per PE", "ours (ms)", "gloo (ms)",
                     "gloo/ours", "TCP floor (ms)", "floor/ours"], lines, "llrrrrrr")


def plot(rows: list, path: str) -> None:
    """Speed against gloo (gloo's time / ours) per layout, collective and size."""
    plt = pyplot()
    if plt is None:
        return
    keyed = {(r["layout"], r["test"], r["bytes"], r["system"]): r["median_us"] for r in rows}
    cases = sorted({(r["layout"], r["test"], r["bytes"]) for r in rows})
    labels, ratios, floors = [], [], []
    for layout, test, n in cases:
        ours = keyed[(layout, test, n, "hps")]
        labels.append(f"{layout}\n{test}\n{n // 1024} KiB")
        ratios.append(keyed[(layout, test, n, "gloo")] / ours)
        floors.append(keyed.get((layout, test, n, "tcp"), float("nan")) / ours)
    bars(plt, labels, [("gloo's time / ours", ratios),
                       ("one TCP socket pair's time / ours", floors)],
         "collectives across two namespace hosts, same processes, medians",
         "speed ratio (above 1: ours faster)", path, size=(10, 4), fontsize=7)
    print(f"wrote {path}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tcp-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default=f"{64 * 1024},{MIB}",
                        help="bytes each PE contributes, comma-separated")
    parser.add_argument("--layouts", default="2x1,2x2", help="hosts x PEs per host (2xP)")
    parser.add_argument("--tests", default="all_gather,all_to_all",
                        help="collectives, comma-separated: all_gather, all_to_all, "
                             "all_reduce, reduce_scatter, broadcast")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds per system")
    parser.add_argument("--min-time-us", type=float, default=20000,
                        help="the least time one round's loop takes")
    parser.add_argument("--out", default=os.path.join(RESULTS, "collectives_hosts.json"))
    parser.add_argument("--plot", help="the plot's file (default: --out's, ending .png)")
    parser.add_argument("--plot-only", metavar="JSON", help="redraw the plot from a result file")
    parser.add_argument("--pe-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for every PE (repeatable)")
    args = parser.parse_args()
    if args.plot is None:  # beside the results
        args.plot = os.path.splitext(args.out)[0] + ".png"
    args.sizes = ints(args.sizes)
    args.tests = str(args.tests).split(",")
    args.pe_env = dict(item.split("=", 1) for item in args.pe_env)
    if args.pe:
        return pe_main(args)
    if args.plot_only:
        with open(args.plot_only) as source:
            plot(json.load(source)["rows"], args.plot)
        return 0
    netns_hosts = import_netns_hosts()
    if netns_hosts.available() is not None:
        print(f"cannot make hosts here: {netns_hosts.available()}", file=sys.stderr)
        return 2
    rows = []
    layouts = [int(layout.split("x")[1]) for layout in args.layouts.split(",")]
    for index, per_host in enumerate(layouts, 1):
        step(index, len(layouts), f"2 hosts x {per_host} PEs")
        rows += run_layout(netns_hosts, per_host, args)
    write_json(args.out, {"when": when(), "rounds": args.rounds, "cores": os.cpu_count(),
                          "rows": rows})
    print(table(rows))
    print(f"written: {args.out}", file=sys.stderr)
    plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
