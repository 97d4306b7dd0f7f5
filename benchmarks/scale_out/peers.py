"""The scale-out benchmark's peers (benchmarks/scale_out/scale_out.py): OSHMEM, built with oshcc and
launched by oshrun across the two hosts, and UCX's ucx_perftest, server on host 1 and client on
host 0.
"""

from __future__ import annotations

import os
import subprocess
import time

from common.build import build_oshmem
from common.hosts import LINK, Relay, write_hostfile
from common.launch import wait_all
from common.report import failure
from common.results import parse
from common.stats import record
from common.units import MIB


# ---- OSHMEM across the two hosts -----------------------------------------------------------

def oshrun_command(hosts, relay: Relay, hostfile: str, program: list) -> list:
    """oshrun from host 0: one PE per host, the daemon on host 1 through the relay, MPI's own
    traffic and UCX's on eth0 over tcp (the settings of docs/scale-out.md with the link
    in place of lo)."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # --bind-to none: each host's daemon would bind its PE to core 0 of the (shared) machine,
    # both PEs on one core, and every wait would last a scheduler tick (4 ms measured).
    return (["oshrun", *root, "-np", "2", "--hostfile", hostfile, "--map-by", "node",
             "--bind-to", "none",
             "--mca", "plm_rsh_agent", relay.agent, "--mca", "plm_rsh_no_tree_spawn", "1",
             "--mca", "oob_tcp_if_include", LINK, "--mca", "btl_tcp_if_include", LINK,
             "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "spml", "ucx",
             "-x", "UCX_TLS=tcp,self", "-x", f"UCX_NET_DEVICES={LINK}",
             "-x", "SHMEM_SYMMETRIC_HEAP_SIZE=1G"] + program)


def run_oshmem(hosts, relay: Relay, binary: str, folder: str, test: str, sizes: list,
               p: dict) -> tuple:
    """(rows, failures). A crash (rc 139) after the program's "done" line is Open MPI 4.1.4's
    shmem_finalize bug (ompi #11604) and does not count."""
    hostfile = write_hostfile(hosts, folder)
    program = [binary, "--test", test, "--sizes", ",".join(map(str, sizes)),
               "--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    process = hosts.popen(0, oshrun_command(hosts, relay, hostfile, program),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    rc, out, err = wait_all([process], 900)[0]
    name = {"put": "put_bw"}.get(test, test)
    got, finished = parse(out)
    rows = [record("oshmem", name, data["bytes"], data["samples_us"], data["iters"], hosts=2)
            for data in got]
    if rc == 0 or (finished and rc == 139):
        return rows, []
    what = "timed out" if rc is None else f"exit code {rc}"
    return rows, [failure("oshmem", name, sizes, what, (err or out)[-600:])]


def measure_oshmem(hosts, folder: str, p: dict) -> tuple:
    binary, problem = build_oshmem()
    if problem:
        return [], [failure("oshmem", "all", [], "unavailable", problem)], {}
    relay = Relay(hosts, folder)
    rows, failures, info = [], [], {}
    try:
        # Where oshrun put the PEs: one on each host, or the run is not a scale-out one.
        placed = hosts.run(0, oshrun_command(hosts, relay, write_hostfile(hosts, folder),
                                             ["hostname"]), timeout=120)
        info["oshmem_pe_hosts"] = sorted(placed.stdout.split())
        if placed.returncode != 0 or info["oshmem_pe_hosts"] != ["host0", "host1"]:
            return [], [failure("oshmem", "all", [], "launch failed",
                                f"oshrun hostname gave {info['oshmem_pe_hosts']} (exit "
                                f"{placed.returncode}): {placed.stderr[-400:]}")], info
        for test, sizes in (("put", p["bw"]), ("put_signal", [8]), ("pingpong", [8])):
            got, bad = run_oshmem(hosts, relay, binary, folder, test, sizes, p)
            rows += got
            failures += bad
    finally:
        relay.close()
    info["oshmem_remote_command"] = relay.launched[0][1] if relay.launched else None
    return rows, failures, info


# ---- ucx_perftest --------------------------------------------------------------------------

def parse_perftest(text: str) -> dict | None:
    """The final line of ucx_perftest's report: latency (typical = median, average, overall,
    in us), bandwidth (average, overall, MB/s = 2^20 B/s) and message rate. None if absent."""
    numbers = None
    for line in text.splitlines():
        fields = line.replace("|", " ").split()
        if fields and fields[0] == "Final:":
            fields = fields[1:]
        try:
            values = [float(f) for f in fields]
        except ValueError:
            continue
        if len(values) == 8:  # iterations, 3 latencies, 2 bandwidths, 2 message rates
            numbers = values
    if numbers is None:
        return None
    return {"iters": int(numbers[0]), "lat_typical_us": numbers[1], "lat_avg_us": numbers[2],
            "lat_overall_us": numbers[3], "bw_avg_MBps": numbers[4], "bw_overall_MBps": numbers[5],
            "msgrate_avg": numbers[6], "msgrate_overall": numbers[7]}


def perftest_once(hosts, test: str, size: int, iters: int, port: int,
                  timeout_s: float = 300, extra: tuple = ()) -> tuple:
    """One ucx_perftest run (server on host 1, client on host 0): (parsed, problem)."""
    env = dict(os.environ, UCX_TLS="tcp,self", UCX_NET_DEVICES=LINK)
    common = ["-t", test, "-s", str(size), "-n", str(iters), "-w", str(max(1, iters // 10)),
              "-p", str(port), "-f", *extra]
    server = hosts.popen(1, ["ucx_perftest", *common], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    client = None
    deadline = time.monotonic() + 10
    while True:  # the server may not be listening yet
        client = hosts.popen(0, ["ucx_perftest", hosts.address(1), *common], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            client.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            break  # connected and running
        if client.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    (crc, out, err), (src, sout, serr) = wait_all([client, server], timeout_s)
    parsed = parse_perftest(out)
    if crc != 0 or parsed is None:
        return None, (f"client exit {crc}, server exit {src}: "
                      + " | ".join((err or out or serr).strip().splitlines()[-4:]))
    return parsed, None


def run_perftest(hosts, p: dict, port: int) -> tuple:
    rows, failures = [], []
    # ucp_put_bw: perftest_bytes per run (at least 4 puts); it gives one average per run.
    jobs = [("ucp_put_bw", "put_bw", size, max(4, p["perftest_bytes"] // size))
            for size in p["bw"]]
    # ucp_am_bw: active messages with its defaults (eager, then rendezvous into the
    # receiver's buffer), what the messages path's bulk puts are (docs/scale-out.md).
    jobs += [("ucp_am_bw", "am_bw", size, max(4, p["perftest_bytes"] // size))
             for size in p["bw"]]
    # ... and with one message in flight (-O 1): what a put that returns when its source may be
    # reused can reach, one after the other (the bound at sizes where am_bw's window wins).
    jobs += [("ucp_am_bw", "am_bw_one", size, max(4, p["perftest_bytes"] // size))
             for size in p["bw"]]
    jobs += [("ucp_put_lat", "put_lat", 8, p["lat_iters"]),
             ("ucp_am_lat", "am_lat", 8, p["lat_iters"]),
             ("ucp_am_lat", "am_lat_sleep", 8, p["lat_iters"] // 2)]
    extras = {"put_bw": ("-O", "1"), "am_bw_one": ("-O", "1"), "am_lat_sleep": ("-E", "sleep")}
    for test, name, size, iters in jobs:
        samples, extra = [], {}
        bandwidth = name in ("put_bw", "am_bw", "am_bw_one")
        for rep in range(p["reps"] if not bandwidth else max(1, p["reps"] - 2)):
            port += 1
            # put_bw with one put in flight (-O 1), as OSHMEM's blocking putmem: with
            # unlimited outstanding puts (its default) UCX 1.13 over tcp fell to 25 MB/s
            # from 1 MiB up here, against 150-330 MB/s with -O 1.
            parsed, problem = perftest_once(hosts, test, size, iters, port,
                                            extra=extras.get(name, ()))
            if problem:
                failures.append(failure("ucx_perftest", name, [size], "failed", problem))
                break
            if bandwidth:
                samples.append(size / (parsed["bw_avg_MBps"] * MIB) * 1e6)
            else:
                samples.append(parsed["lat_typical_us"])
                extra.setdefault("avg_us", []).append(parsed["lat_avg_us"])
        if samples:
            rows.append(record("ucx_perftest", name, size, samples, iters, tool_test=test,
                               **extra))
            if bandwidth:
                rows[-1]["gbps"] = size / rows[-1]["median_us"] / 1e3
    return rows, failures, port
