"""Scale-out benchmark: two hosts, one PE on each, over a network link; the runtime beside its peers.

    sudo python benchmarks/scale_out.py [--quick] [--only SYSTEM,...] [--out DIR]
                                        [--pe-env KEY=VALUE ...] [--plots DIR]
    sudo python benchmarks/scale_out.py --smoke        # ucx_perftest across the link, seconds
    python benchmarks/scale_out.py --plot-only DIR/scale_out.json [--plots DIR]

The two hosts are Linux namespaces joined by a bridge (tests/python/netns_hosts.py): each has
its own network stack with one veth link, eth0, its own hostname, process ids and /dev/shm, so
every byte between the two PEs crosses eth0 over TCP. Needs root. The systems measured:

  oshmem        Open MPI's OSHMEM over UCX tcp (benchmarks/native/oshmem_bench.c), launched by
                oshrun from host 0 with a hostfile naming both hosts' addresses. oshrun starts
                the remote daemon (orted) through a launch agent (--mca plm_rsh_agent) instead
                of ssh: a small script that hands its argv and its stdin/stdout/stderr (as file
                descriptors over a Unix socket) to this process, which starts the command
                inside host 1's namespaces; see Relay.
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
  moe           the MegaMoE training step (benchmarks/moe_bench.py --test step: zero_grad,
                forward, backward, dense all-reduce, AdamW of the suite's small decoder;
                MegaMoE with EP over both PEs against AllToAllMoE, the same layer over gloo's
                all_to_all_single, built from the same seed, routers frozen, alternating
                order, one torch thread per PE, a step's time the slower PE's) on the suite's
                model sizes (benchmarks/moe.py SIZES): across the two hosts, and for reference
                on one host through the package's launcher, every peer through UCX over lo
                (HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) and over shared memory.

Every PE-side figure is the median of the repetitions (min and max kept); bandwidth is bytes
moved per second (GB = 1e9 B). Output: a table with ratios (peer time / our time: above 1, ours
is faster), the MoE steps and the scale-out targets (met or not) on stdout, DIR/scale_out.json,
and the plots scale_out_put_bw.png, scale_out_latency.png and scale_out_collectives.png
(all_gather and all_to_all against gloo, the MoE step) in --plots (default: docs/benchmarks).
The machine is shared by both hosts (same cores, same kernel): treat the figures as the link's software cost, not a NIC's; on a loaded
machine, busy-polling PEs wait for a scheduler tick (milliseconds) now and then.

Our side with settings of its own, e.g.:
    sudo python benchmarks/scale_out.py --only hps,moe --pe-env UCX_TLS=tcp,self
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build", "bench")
KIB, MIB = 1 << 10, 1 << 20
SYSTEMS = ("oshmem", "ucx_perftest", "gloo", "hps", "moe")
# The hosts' link, as the PEs see it; every system is told to use it and nothing else.
LINK = "eth0"


def plan(quick: bool) -> dict:
    if quick:
        return {"bw": [256 * KIB, 4 * MIB], "coll": [MIB], "reps": 3, "min_us": 50000,
                "perftest_bytes": 64 * MIB, "lat_iters": 5000,
                "moe": ["tiny", "small"], "moe_steps": 5}
    return {"bw": [64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "coll": [64 * KIB, MIB, 4 * MIB, 16 * MIB], "reps": 5, "min_us": 200000,
            "perftest_bytes": 256 * MIB, "lat_iters": 20000,
            "moe": ["tiny", "small", "medium"], "moe_steps": 9}


def human(size: int) -> str:
    for unit, scale in (("MiB", MIB), ("KiB", KIB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def record(system: str, test: str, size: int, samples_us: list, iters: int, **extra) -> dict:
    """One measured row: the time per operation (us) of each repetition."""
    row = {"system": system, "test": test, "bytes": size, "iters": iters,
           "median_us": statistics.median(samples_us), "min_us": min(samples_us),
           "max_us": max(samples_us), "samples_us": [round(s, 4) for s in samples_us]}
    if test == "put_bw":
        row["gbps"] = size / row["median_us"] / 1e3
    row.update(extra)
    return row


def failure(system: str, test: str, sizes: list, code: str, message: str) -> dict:
    return {"system": system, "test": test, "sizes": sizes, "error": code,
            "message": message.strip()[-600:]}


# ---- hosts ---------------------------------------------------------------------------------

def _netns():
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import netns_hosts

    return netns_hosts


def _base_env(rank: int, hosts, port: int, extra: dict) -> dict:
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0",
               MASTER_ADDR=hosts.address(0), MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=LINK,
               OMP_NUM_THREADS="1")
    env.pop("HYPER_PARALLEL_SHMEM_RENDEZVOUS_FILE", None)  # a one-host launcher's, not ours
    env.update(extra)
    return env


def _wait(processes: list, timeout_s: float) -> list:
    """communicate() on each; on a timeout every process is killed. [(rc, out, err)]."""
    deadline = time.monotonic() + timeout_s
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((process.returncode, out, err))
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            out, err = process.communicate()
            results.append((None, out, err))
    return results


# ---- OSHMEM across the two hosts -----------------------------------------------------------

class Relay:
    """The remote shell oshrun uses to start its daemon on the other host.

    oshrun (mpirun) starts one orted per remote host by running `<agent> <host> <command>`,
    normally `ssh`. Here the agent is a script written into a temporary folder: it connects to
    a Unix socket this object listens on and sends the host and the command together with its
    own stdin, stdout and stderr (SCM_RIGHTS), then waits for the exit status. This side starts
    `sh -c <command>` inside that host's namespaces (NetnsHosts.popen) on those descriptors, so
    orted talks to oshrun exactly as over ssh, and sends the status back when it exits. A path
    socket works from inside host 0's namespaces because the hosts share the file system (only
    /dev/shm is private), while host 1's namespaces cannot be entered from inside host 0.
    """

    def __init__(self, hosts, folder: str) -> None:
        self.hosts = hosts
        self.by_address = {hosts.address(i): i for i in range(hosts.count)}
        self.by_address.update({hosts.hostname(i): i for i in range(hosts.count)})
        self.path = os.path.join(folder, "agent.sock")
        self.agent = os.path.join(folder, "netns-agent")
        self.launched: list = []
        with open(self.agent, "w") as script:
            script.write(f"""#!{sys.executable}
import json, socket, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):  # options meant for ssh
    args.pop(0)
link = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
link.connect({self.path!r})
message = json.dumps({{"host": args[0], "command": " ".join(args[1:])}}).encode()
socket.send_fds(link, [message], [0, 1, 2])
reply = b""
while True:
    chunk = link.recv(64)
    if not chunk:
        break
    reply += chunk
sys.exit(int(reply or b"255"))
""")
        os.chmod(self.agent, 0o755)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(8)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                link, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(link,), daemon=True).start()

    def _serve(self, link) -> None:
        with link:
            try:
                message, fds, _, _ = socket.recv_fds(link, 1 << 16, 3)
                request = json.loads(message)
                host = self.by_address.get(request["host"])
                if host is None or len(fds) != 3:
                    link.sendall(b"255")
                    return
                try:
                    process = self.hosts.popen(host, ["sh", "-c", request["command"]],
                                               stdin=fds[0], stdout=fds[1], stderr=fds[2])
                finally:
                    for fd in fds:
                        os.close(fd)
                self.launched.append((request["host"], request["command"]))
                link.sendall(str(process.wait()).encode())
            except (OSError, ValueError):
                return

    def close(self) -> None:
        self._server.close()


def build_oshmem() -> tuple:
    if shutil.which("oshcc") is None or shutil.which("oshrun") is None:
        return None, ("OpenMPI's OSHMEM is not installed (oshcc/oshrun missing); install "
                      "Debian's openmpi-bin and libopenmpi-dev")
    os.makedirs(BUILD, exist_ok=True)
    binary = os.path.join(BUILD, "oshmem_bench")
    built = subprocess.run(["oshcc", "-O2", "-o", binary,
                            os.path.join(HERE, "native", "oshmem_bench.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, "building oshmem_bench failed: " + built.stderr.strip()[-300:]
    return binary, None


def write_hostfile(hosts, folder: str) -> str:
    """The hosts by their eth0 addresses, one slot each."""
    path = os.path.join(folder, "hostfile")
    with open(path, "w") as sink:
        sink.write("".join(f"{hosts.address(i)} slots=1\n" for i in range(hosts.count)))
    return path


def oshrun_command(hosts, relay: Relay, hostfile: str, program: list) -> list:
    """oshrun from host 0: one PE per host, the daemon on host 1 through the relay, MPI's own
    traffic and UCX's on eth0 over tcp (the settings of SCALE_OUT.md section 6 with the link
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
    rc, out, err = _wait([process], 900)[0]
    name = {"put": "put_bw"}.get(test, test)
    rows, finished = [], False
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        data = json.loads(line)
        if data.get("done"):
            finished = True
        elif "samples_us" in data:
            rows.append(record("oshmem", name, data["bytes"], data["samples_us"], data["iters"],
                               hosts=2))
    if rc == 0 or (finished and rc == 139):
        return rows, []
    what = "timed out" if rc is None else f"exit code {rc}"
    return rows, [failure("oshmem", name, sizes, what, (err or out)[-600:])]


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
    (crc, out, err), (src, sout, serr) = _wait([client, server], timeout_s)
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
    jobs += [("ucp_put_lat", "put_lat", 8, p["lat_iters"]),
             ("ucp_am_lat", "am_lat", 8, p["lat_iters"])]
    for test, name, size, iters in jobs:
        samples, extra = [], {}
        for rep in range(p["reps"] if name != "put_bw" else max(1, p["reps"] - 2)):
            port += 1
            # put_bw with one put in flight (-O 1), as OSHMEM's blocking putmem: with
            # unlimited outstanding puts (its default) UCX 1.13 over tcp fell to 25 MB/s
            # from 1 MiB up here, against 150-330 MB/s with -O 1.
            parsed, problem = perftest_once(hosts, test, size, iters, port,
                                            extra=("-O", "1") if name == "put_bw" else ())
            if problem:
                failures.append(failure("ucx_perftest", name, [size], "failed", problem))
                break
            if name == "put_bw":
                samples.append(size / (parsed["bw_avg_MBps"] * MIB) * 1e6)
            else:
                samples.append(parsed["lat_typical_us"])
                extra.setdefault("avg_us", []).append(parsed["lat_avg_us"])
        if samples:
            rows.append(record("ucx_perftest", name, size, samples, iters, tool_test=test,
                               **extra))
    return rows, failures, port


# ---- the Python PEs (gloo and ours) --------------------------------------------------------

PE_TESTS = ("gloo_allgather", "gloo_alltoall", "hps_put_bw", "hps_put_signal", "hps_pingpong",
            "hps_allgather", "hps_alltoall")


def run_pes(hosts, test: str, sizes: list, p: dict, port: int, extra_env: dict,
            timeout_s: float = 600) -> tuple:
    """Starts `scale_out.py --pe test` on host 0 (rank 0) and host 1 (rank 1), the caller's
    environment plus extra_env passed through; (rows, failures). A PE that cannot run prints a
    JSON line with "error" (the ShmemError code) and exits 3."""
    argv = [sys.executable, os.path.abspath(__file__), "--pe", test, "--sizes",
            ",".join(map(str, sizes)), "--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    processes = [hosts.popen(rank, argv, env=_base_env(rank, hosts, port, extra_env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
    results = _wait(processes, timeout_s)
    system, name = test.split("_", 1)
    rows, errors = [], []
    for rank, (rc, out, err) in enumerate(results):
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            data = json.loads(line)
            if "error" in data:
                errors.append((rank, data["error"], data["message"]))
            elif rank == 0 and "samples_us" in data:
                rows.append(record(system, name, data["bytes"], data["samples_us"], data["iters"]))
        if rc != 0 and not errors:
            what = "timed out" if rc is None else f"exit code {rc}"
            errors.append((rank, what, " | ".join((err or out).strip().splitlines()[-4:])))
    if errors:
        rank, code, message = errors[0]
        return rows, [failure(system, name, [s for s in sizes if not any(
            r["bytes"] == s for r in rows)], code, f"PE {rank}: {message}")]
    return rows, []


def pe_main(args) -> int:
    """One PE of a Python measurement (run on each host by run_pes)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    init_process_group_from_environment(timeout_s=120)
    rank = dist.get_rank()
    system, test = args.pe.split("_", 1)

    def emit(size, iters, samples):
        if rank == 0:
            print(json.dumps({"test": test, "bytes": size, "iters": iters,
                              "samples_us": samples}), flush=True)

    def mean_us(body, iters, finish=None):
        start = time.perf_counter()
        for _ in range(iters):
            body()
        if finish is not None:
            finish()
        return (time.perf_counter() - start) / iters * 1e6

    def measure(body, finish=None, scale=1.0):
        """Warm-up, an iteration count from PE 0's probe (every PE runs the probe, so the
        patterns that need both PEs work), args.reps timed repetitions."""
        for _ in range(3):
            body()
        if finish is not None:
            finish()
        one = mean_us(body, 4, finish)
        count = torch.tensor([max(4, min(1 << 20, int(args.min_time_us / max(one, 0.01))))])
        dist.broadcast(count, 0)
        iters = int(count.item())
        samples = []
        for _ in range(args.reps):
            dist.barrier()
            samples.append(mean_us(body, iters, finish) / scale)
        dist.barrier()
        return iters, samples

    largest = max(args.sizes)
    if system == "gloo":
        for n in args.sizes:
            source = torch.full((n,), rank, dtype=torch.uint8)
            if test == "allgather":
                output = torch.empty(2 * n, dtype=torch.uint8)
                body = lambda: dist.all_gather_into_tensor(output, source)  # noqa: E731
            else:
                output = torch.empty(n, dtype=torch.uint8)
                body = lambda: dist.all_to_all_single(output, source)  # noqa: E731
            emit(n, *measure(body))
        dist.destroy_process_group()
        return 0

    from hyper_parallel.core.multicore import shmem

    try:
        handle = shmem.acquire_shmem()
    except shmem.ShmemError as error:
        print(json.dumps({"error": error.error_code, "message": str(error)}), flush=True)
        dist.destroy_process_group()
        return 3
    peer = 1 - rank
    try:
        if test in ("put_bw", "put_signal", "pingpong"):
            buffer = shmem.empty(max(largest, 8), dtype=torch.uint8)
            flag = shmem.empty(1, dtype=torch.int64)
            flag.zero_()
            local = torch.ones(max(largest, 8), dtype=torch.uint8)
            shmem.barrier()
            for n in args.sizes:
                dst, src = buffer[:n], local[:n]
                if test == "put_bw":
                    # PE 0 puts, then the barrier: every put has landed on PE 1.
                    body = (lambda: shmem.put(dst, src, peer)) if rank == 0 else (lambda: None)
                    emit(n, *measure(body, finish=shmem.barrier))
                elif test == "put_signal":
                    # put + signal add, one call; the closing barrier makes the repetition
                    # count only delivered calls (its cost is spread over the iterations).
                    body = ((lambda: shmem.put_signal(dst, src, flag, 1, peer, operation="add"))
                            if rank == 0 else (lambda: None))
                    emit(n, *measure(body, finish=shmem.barrier))
                else:
                    counter = [0]

                    def body():
                        counter[0] += 1
                        if rank == 0:
                            shmem.put_signal(dst, src, flag, counter[0], peer)
                            shmem.wait_signal(flag, counter[0], comparison="ge")
                        else:
                            shmem.wait_signal(flag, counter[0], comparison="ge")
                            shmem.put_signal(dst, src, flag, counter[0], peer)

                    emit(n, *measure(body, scale=2.0))
            shmem.free(flag)
            shmem.free(buffer)
        else:
            output = shmem.empty(2 * largest, dtype=torch.uint8)
            source = torch.full((largest,), rank, dtype=torch.uint8)
            for n in args.sizes:
                if test == "allgather":
                    out, inp = output[: 2 * n], source[:n]
                    body = lambda: shmem.all_gather(out, inp)  # noqa: E731
                else:
                    out, inp = output[:n], source[:n]
                    body = lambda: shmem.all_to_all(out, inp)  # noqa: E731
                emit(n, *measure(body))
            shmem.free(output)
    except shmem.ShmemError as error:
        print(json.dumps({"error": error.error_code, "message": str(error)}), flush=True)
        return 3
    finally:
        try:
            handle.close()
        finally:
            dist.destroy_process_group()
    return 0


# ---- one system each: the measurement functions -------------------------------------------

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


def measure_gloo(hosts, p: dict, port: int, extra_env: dict) -> tuple:
    rows, failures = [], []
    for test in ("gloo_allgather", "gloo_alltoall"):
        port += 1
        got, bad = run_pes(hosts, test, p["coll"], p, port, extra_env)
        rows += got
        failures += bad
    return rows, failures, port


def hps_env(p: dict, extra_env: dict) -> dict:
    """Our PEs' settings: a heap for the largest buffers, UCX on the link (read by the runtime's
    network transport once it has one), then the caller's --pe-env on top."""
    largest = max(max(p["bw"]), 2 * max(p["coll"]))
    env = {"HYPER_PARALLEL_SHMEM_HEAP_SIZE": str(max(256 * MIB, 2 * largest + 64 * MIB)),
           "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": LINK}
    env.update(extra_env)
    return env


def measure_hps(hosts, p: dict, port: int, extra_env: dict) -> tuple:
    """Our side: put bandwidth, put_signal latency, ping-pong, all_gather, all_to_all; a
    failing measurement (today: UNSUPPORTED_CAPABILITY at init) becomes a failure row."""
    env = hps_env(p, extra_env)
    rows, failures = [], []
    for test, sizes in (("hps_put_bw", p["bw"]), ("hps_put_signal", [8]), ("hps_pingpong", [8]),
                        ("hps_allgather", p["coll"]), ("hps_alltoall", p["coll"])):
        port += 1
        got, bad = run_pes(hosts, test, sizes, p, port, env)
        rows += got
        failures += bad
    return rows, failures, port


# ---- MegaMoE: the training step across the hosts -------------------------------------------

# Where the two PEs of the MoE step run: both hosts (one PE each, every byte over eth0), and
# for reference on this machine alone, through the package's launcher: every peer through UCX
# over lo (HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all), and the plain shared-memory path.
MOE_PLACEMENTS = ("2 hosts", "1 host, UCX loopback", "1 host, shared memory")
MOE_LOOPBACK_ENV = {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", "UCX_TLS": "tcp,self",
                    "UCX_NET_DEVICES": "lo"}


def _moe():
    sys.path.insert(0, HERE)
    import moe

    return moe


def moe_program(p: dict) -> list:
    """benchmarks/moe_bench.py --test step (the suite's MoE step: zero_grad, forward,
    backward, dense all-reduce, AdamW of the small decoder, MegaMoE on SHMEM and AllToAllMoE on
    gloo's all_to_all_single built from the same seed, routers frozen, alternating order, one
    torch thread per PE, rank max) on the suite's model sizes (benchmarks/moe.py SIZES)."""
    moe = _moe()
    configs = ",".join(moe._config(name, moe.SIZES[name]) for name in p["moe"])
    return [os.path.join(HERE, "moe_bench.py"), "--test", "step", "--configs", configs,
            "--warmup", "3", "--steps", str(p["moe_steps"])]


def moe_rows(stdout: str, placement: str) -> tuple:
    """(rows, finished) from PE 0's output of moe_bench.py: one row per model size."""
    moe = _moe()
    records, finished = moe.parse(stdout)
    rows = []
    for r in moe.summarise(records):
        if r["test"] != "step":
            continue
        rows.append({key: r[key] for key in (
            "config", "pes", "shape", "parameters", "steps", "a2a_step_us", "shmem_step_us",
            "step_ratio", "a2a_comm_us", "shmem_comm_us", "comm_share", "a2a_cpu_floor_us",
            "shmem_cpu_floor_us", "started_early", "experts", "step_samples_us")}
                    | {"placement": placement})
    return rows, finished


def _moe_failure(placement: str, rc, out: str, err: str) -> dict:
    what = "timed out" if rc is None else f"exit code {rc}"
    return failure("moe", f"step ({placement})", [], what,
                   " | ".join((err or out).strip().splitlines()[-6:]))


def measure_moe(hosts, p: dict, port: int, extra_env: dict) -> tuple:
    """The MoE training step in each placement (MOE_PLACEMENTS): (rows, failures, port)."""
    program = moe_program(p)
    rows, failures = [], []
    port += 1
    env = hps_env(p, extra_env)
    processes = [hosts.popen(rank, [sys.executable, *program],
                             env=_base_env(rank, hosts, port, env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
    results = _wait(processes, 1800)
    got, finished = moe_rows(results[0][1], MOE_PLACEMENTS[0])
    rows += got
    bad = [(rc, out, err) for rc, out, err in results if rc != 0]
    if bad or not finished:
        rc, out, err = bad[0] if bad else results[0]
        failures.append(_moe_failure(MOE_PLACEMENTS[0], rc, out, err))
    launch = [sys.executable, "-m", "hyper_parallel.core.multicore.shmem.launch", "--nproc",
              "2", "--timeout", "1500"]
    for placement, knob in ((MOE_PLACEMENTS[1], MOE_LOOPBACK_ENV), (MOE_PLACEMENTS[2], {})):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for key in ("HYPER_PARALLEL_SHMEM_REMOTE_PEERS", "UCX_TLS", "UCX_NET_DEVICES", "RANK",
                    "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
            env.pop(key, None)
        env.update(knob)
        try:
            done = subprocess.run(launch + program, env=env, capture_output=True, text=True,
                                  timeout=1600)
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            rc, out, err = None, expired.stdout or "", expired.stderr or ""
            out, err = (x.decode() if isinstance(x, bytes) else x for x in (out, err))
        got, finished = moe_rows(out, placement)
        rows += got
        if rc != 0 or not finished:
            failures.append(_moe_failure(placement, rc, out, err))
    return rows, failures, port


# ---- results -------------------------------------------------------------------------------

# What our rows are compared with: (our test, peer system, peer test, label).
COMPARISONS = [
    ("put_bw", "oshmem", "put_bw", "put bandwidth vs OSHMEM putmem + quiet"),
    ("put_bw", "ucx_perftest", "put_bw", "put bandwidth vs ucx_perftest ucp_put_bw"),
    ("put_signal", "oshmem", "put_signal", "8 B put_signal vs OSHMEM put+fence+add+quiet"),
    ("put_signal", "ucx_perftest", "put_lat", "8 B put_signal vs ucx_perftest ucp_put_lat"),
    ("pingpong", "oshmem", "pingpong", "ping-pong 1/2 RTT vs OSHMEM (wait_until)"),
    ("allgather", "gloo", "allgather", "all_gather vs gloo all_gather_into_tensor"),
    ("alltoall", "gloo", "alltoall", "all_to_all vs gloo all_to_all_single"),
]


def find(rows: list, system: str, test: str, size: int) -> dict | None:
    for row in rows:
        if (row["system"], row["test"], row["bytes"]) == (system, test, size):
            return row
    return None


def ratios(rows: list) -> list:
    """peer time / our time for every size both have (above 1: ours is faster)."""
    out = []
    for ours, peer, peer_test, label in COMPARISONS:
        for row in rows:
            if row["system"] != "hps" or row["test"] != ours:
                continue
            other = find(rows, peer, peer_test, row["bytes"])
            if other:
                out.append({"comparison": label, "bytes": row["bytes"],
                            "hps_us": row["median_us"], "peer_us": other["median_us"],
                            "speedup": other["median_us"] / row["median_us"]})
    return out


def table(rows: list, failures: list) -> str:
    columns = [("oshmem", None), ("ucx_perftest", None), ("gloo", None), ("hps", None)]
    tests = [("put_bw", "put bandwidth"), ("put_signal", "8 B put + signal"),
             ("put_lat", "8 B put latency"), ("am_lat", "8 B AM latency"),
             ("pingpong", "ping-pong 1/2 RTT"), ("allgather", "all_gather / PE"),
             ("alltoall", "all_to_all / PE")]
    failed = {}
    for bad in failures:
        for size in bad["sizes"] or [None]:
            failed[(bad["system"], bad["test"], size)] = bad["error"]
    keys = sorted({(r["test"], r["bytes"]) for r in rows}
                  | {(f["test"], s) for f in failures for s in f["sizes"]},
                  key=lambda k: ([t for t, _ in tests].index(k[0]) if k[0] in dict(tests) else 99,
                                 k[1]))
    header = f"{'measurement':<22}{'size':>9}" + "".join(f" {c:>16}" for c, _ in columns)
    header += f"{'peer/hps':>12}"
    lines = [header, "-" * len(header)]
    for test, size in keys:
        cells = []
        for system, _ in columns:
            row = find(rows, system, test, size)
            if row and test == "put_bw":
                cells.append(f"{row['gbps']:>11.3f} GB/s")
            elif row:
                cells.append(f"{row['median_us']:>13.2f} us")
            elif (system, test, size) in failed:
                cells.append(f"{'FAIL ' + failed[(system, test, size)][:11]:>16}")
            else:
                cells.append(f"{'-':>16}")
        ours = find(rows, "hps", test, size)
        peers = [find(rows, s, t, size) for o, s, t, _ in COMPARISONS if o == test]
        peers = [r for r in peers if r]
        ratio = (f"{min(r['median_us'] for r in peers) / ours['median_us']:>11.2f}x"
                 if ours and peers else f"{'-':>12}")
        name = dict(tests).get(test, test)
        lines.append(f"{name:<22}{human(size):>9}" + "".join(" " + c for c in cells) + ratio)
    return "\n".join(lines)


def targets(results: dict) -> list:
    """The scale-out targets, each with what this run measured and whether it is met; a
    target whose figures are missing (a system not run, or failed) is left out."""
    rows, out = results["rows"], []

    def per_size(ours_test, peer, peer_test, sizes=None):
        pairs = []
        for row in sorted((r for r in rows if r["system"] == "hps" and r["test"] == ours_test),
                          key=lambda r: r["bytes"]):
            other = find(rows, peer, peer_test, row["bytes"])
            if other and (sizes is None or row["bytes"] in sizes):
                pairs.append((row, other))
        return pairs

    def add(target, goal, pairs, value, test, fmt):
        if not pairs:
            return
        values = [(mine["bytes"], value(mine, other)) for mine, other in pairs]
        met = [ok for ok in (test(v) for _, v in values)]
        out.append({"target": target, "goal": goal,
                    "measured": ", ".join(f"{human(b)}: {fmt(v)}" for b, v in values),
                    "values": {str(b): v for b, v in values},
                    "met": all(met), "met_at": f"{sum(met)} of {len(met)}"})

    # Bandwidth ratios are our GB/s over theirs, the same as their time over ours.
    speedup = lambda mine, other: other["median_us"] / mine["median_us"]  # noqa: E731
    slowdown = lambda mine, other: mine["median_us"] / other["median_us"]  # noqa: E731
    add("put bandwidth vs OSHMEM putmem + quiet", ">= 1.0x",
        per_size("put_bw", "oshmem", "put_bw"), speedup, lambda v: v >= 1.0, "{:.2f}x".format)
    add("put bandwidth vs ucx_perftest ucp_put_bw (-O 1)", ">= 0.8x",
        per_size("put_bw", "ucx_perftest", "put_bw"), speedup, lambda v: v >= 0.8,
        "{:.2f}x".format)
    add("8 B put + signal latency vs OSHMEM put + fence + add + quiet", "<= 1.0x",
        per_size("put_signal", "oshmem", "put_signal"), slowdown, lambda v: v <= 1.0,
        "{:.2f}x".format)
    add("8 B ping-pong half round trip vs OSHMEM", "<= 1.0x",
        per_size("pingpong", "oshmem", "pingpong"), slowdown, lambda v: v <= 1.0,
        "{:.2f}x".format)
    add("all_gather vs gloo all_gather_into_tensor, 1 MiB per PE", ">= 1.5x",
        per_size("allgather", "gloo", "allgather", {MIB}), speedup, lambda v: v >= 1.5,
        "{:.2f}x".format)
    add("all_to_all vs gloo all_to_all_single, 1 MiB per PE", ">= 1.5x",
        per_size("alltoall", "gloo", "alltoall", {MIB}), speedup, lambda v: v >= 1.5,
        "{:.2f}x".format)
    steps = [r for r in results.get("moe", []) if r["placement"] == MOE_PLACEMENTS[0]]
    if steps:
        met = [r["step_ratio"] <= 0.8 for r in steps]
        out.append({"target": "MoE training step across the hosts: MegaMoE / AllToAllMoE (gloo)",
                    "goal": "<= 0.8x",
                    "measured": ", ".join(f"{r['config']}: {r['step_ratio']:.2f}x" for r in steps),
                    "values": {r["config"]: r["step_ratio"] for r in steps},
                    "met": all(met), "met_at": f"{sum(met)} of {len(met)}"})
    return out


def moe_table(steps: list) -> str:
    lines = [f"{'MoE training step (rank-max median)':<36}{'config':>8}{'a2a ms':>9}"
             f"{'MegaMoE ms':>12}{'ratio':>7}{'a2a comm':>10}{'share':>7}"]
    for r in steps:
        lines.append(f"{r['placement']:<36}{r['config']:>8}{r['a2a_step_us'] / 1e3:>9.1f}"
                     f"{r['shmem_step_us'] / 1e3:>12.1f}{r['step_ratio']:>6.2f}x"
                     f"{r['a2a_comm_us'] / 1e3:>8.1f}ms{100 * r['comm_share']:>6.0f}%")
    return "\n".join(lines)


STYLE = {"oshmem": ("OSHMEM (UCX tcp)", "tab:red"), "ucx_perftest": ("ucx_perftest", "tab:orange"),
         "gloo": ("gloo", "tab:green"), "hps": ("Hyper-Parallel SHMEM", "tab:blue")}


def plots(results: dict, folder: str) -> list:
    """scale_out_put_bw.png (bandwidth vs size, a line per system) and scale_out_latency.png
    (a bar per system and latency pattern) into `folder`; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = results["rows"]
    os.makedirs(folder, exist_ok=True)
    written = []
    if any(r["test"] == "put_bw" for r in rows):
        written.append(_plot_put_bw(plt, rows, folder))
    path = _plot_latency(plt, rows, folder)
    if path:
        written.append(path)
    path = _plot_collectives(plt, results, folder)
    if path:
        written.append(path)
    return written


def _plot_put_bw(plt, rows: list, folder: str) -> str:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for system, (label, color) in STYLE.items():
        points = sorted((r["bytes"], r) for r in rows
                        if r["system"] == system and r["test"] == "put_bw")
        if not points:
            continue
        xs = [x for x, _ in points]
        ax.plot(xs, [r["gbps"] for _, r in points], "-o", color=color, label=label)
        ax.fill_between(xs, [x / r["max_us"] / 1e3 for x, r in points],
                        [x / r["min_us"] / 1e3 for x, r in points], color=color, alpha=0.15)
    ax.set(title="put bandwidth, 2 hosts (namespaces), 1 PE each, tcp over veth",
           xscale="log", xlabel="bytes per put", ylabel="GB/s")
    ax.set_xticks(sorted({r["bytes"] for r in rows if r["test"] == "put_bw"}) or [1])
    ax.set_xticklabels([human(x) for x in ax.get_xticks()], fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(folder, "scale_out_put_bw.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_latency(plt, rows: list, folder: str) -> str | None:
    bars = [("put_signal", "oshmem", "OSHMEM put+fence+add+quiet"),
            ("put_signal", "hps", "hps put_signal"),
            ("put_lat", "ucx_perftest", "ucx_perftest ucp_put_lat"),
            ("am_lat", "ucx_perftest", "ucx_perftest ucp_am_lat"),
            ("pingpong", "oshmem", "OSHMEM ping-pong 1/2 RTT"),
            ("pingpong", "hps", "hps ping-pong 1/2 RTT")]
    present = [(find(rows, system, test, 8), system, label) for test, system, label in bars]
    present = [item for item in present if item[0]]
    if present:
        fig, ax = plt.subplots(figsize=(8.5, 4.8))
        for i, (row, system, label) in enumerate(present):
            ax.bar(i, row["median_us"], color=STYLE[system][1],
                   yerr=[[row["median_us"] - row["min_us"]], [row["max_us"] - row["median_us"]]],
                   capsize=3)
            ax.text(i, row["median_us"], f"{row['median_us']:.1f}", ha="center", va="bottom",
                    fontsize=8)
        ax.set_xticks(range(len(present)))
        ax.set_xticklabels([label for _, _, label in present], rotation=20, ha="right",
                           fontsize=8)
        ax.set(title="8-byte latency, 2 hosts (namespaces), tcp over veth (median, min-max)",
               ylabel="us")
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(folder, "scale_out_latency.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
    return None


def _plot_collectives(plt, results: dict, folder: str) -> str | None:
    """scale_out_collectives.png: all_gather and all_to_all against gloo (time per call by
    bytes per PE) and the MoE training step of both layers in each placement."""
    rows, steps = results["rows"], results.get("moe", [])
    panels = [test for test in ("allgather", "alltoall")
              if any(r["test"] == test for r in rows)] + (["moe"] if steps else [])
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel == "moe":
            short = {MOE_PLACEMENTS[0]: "2 hosts", MOE_PLACEMENTS[1]: "1 host\nUCX lo",
                     MOE_PLACEMENTS[2]: "1 host\nshm"}
            labels = [f"{r['config']}\n{short.get(r['placement'], r['placement'])}"
                      for r in steps]
            xs = range(len(steps))
            for offset, path, label, color in ((-0.2, "a2a", "AllToAllMoE (gloo)", "tab:green"),
                                               (0.2, "shmem", "MegaMoE (SHMEM)", "tab:blue")):
                ax.bar([x + offset for x in xs], [r[f"{path}_step_us"] / 1e3 for r in steps], 0.4,
                       color=color, label=label)
            for x, r in zip(xs, steps):
                ax.annotate(f"{r['step_ratio']:.2f}x",
                            (x, max(r["a2a_step_us"], r["shmem_step_us"]) / 1e3),
                            ha="center", va="bottom", fontsize=8)
            ax.set_xticks(list(xs))
            ax.set_xticklabels(labels, fontsize=7)
            ax.set(title="MoE training step, 2 PEs (ms; label: MegaMoE / a2a)", ylabel="ms")
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=8)
            continue
        name = {"allgather": "all_gather", "alltoall": "all_to_all"}[panel]
        for system in ("gloo", "hps"):
            points = sorted((r["bytes"], r) for r in rows
                            if r["system"] == system and r["test"] == panel)
            if not points:
                continue
            label, color = STYLE[system]
            xs = [x for x, _ in points]
            ax.plot(xs, [r["median_us"] / 1e3 for _, r in points], "-o", color=color,
                    label=label)
            ax.fill_between(xs, [r["min_us"] / 1e3 for _, r in points],
                            [r["max_us"] / 1e3 for _, r in points], color=color, alpha=0.15)
            if system == "hps":
                for x, r in points:
                    peer = find(rows, "gloo", panel, x)
                    if peer:
                        ax.annotate(f"{peer['median_us'] / r['median_us']:.2f}x",
                                    (x, r["median_us"] / 1e3), textcoords="offset points",
                                    xytext=(0, -12), ha="center", fontsize=8)
        ax.set(title=f"{name}, 2 hosts, 1 PE each (label: gloo / ours)", xscale="log",
               yscale="log", xlabel="bytes per PE", ylabel="ms per call")
        ticks = sorted({r["bytes"] for r in rows if r["test"] == panel})
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(x) for x in ticks], fontsize=8)
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(folder, "scale_out_collectives.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- driver --------------------------------------------------------------------------------

def smoke() -> int:
    """ucx_perftest across the two hosts, small: the link and UCX tcp work (seconds)."""
    netns_hosts = _netns()
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


def machine(started: float, quick: bool) -> dict:
    processor = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as info:
            processor = next(line.split(":", 1)[1].strip() for line in info
                             if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "processor": processor, "system": platform.platform(),
            "python": platform.python_version(), "quick": quick,
            "seconds": round(time.monotonic() - started, 1)}


def report(results: dict) -> None:
    print(table(results["rows"], results["failures"]))
    if results.get("moe"):
        print()
        print(moe_table(results["moe"]))
    if results["ratios"]:
        print()
        print(f"{'comparison (peer time / our time; above 1: ours is faster)':<62}{'size':>9}"
              f"{'ratio':>9}")
        for r in results["ratios"]:
            print(f"{r['comparison']:<62}{human(r['bytes']):>9}{r['speedup']:>8.2f}x")
    if results.get("targets"):
        print()
        print(f"{'target':<64}{'goal':>9}  {'met':<14}measured")
        for t in results["targets"]:
            met = ("yes" if t["met"] else "no") + f" ({t['met_at']})"
            print(f"{t['target']:<64}{t['goal']:>9}  {met:<14}{t['measured']}")
    if results["failures"]:
        print()
        for bad in results["failures"]:
            sizes = ",".join(human(s) for s in bad["sizes"]) or "-"
            print(f"failed: {bad['system']} {bad['test']} [{sizes}]: {bad['error']}: "
                  f"{bad['message'][:300]}")
    for note in results.get("notes", []):
        print(f"note: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, fewer repetitions")
    parser.add_argument("--smoke", action="store_true",
                        help="only a small ucx_perftest across the two hosts (seconds)")
    parser.add_argument("--only", default=",".join(SYSTEMS),
                        help=f"comma list of systems to run (default: {','.join(SYSTEMS)})")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench-results"),
                        help="folder for scale_out.json (default: bench-results/)")
    parser.add_argument("--plots", default=os.path.join(ROOT, "docs", "benchmarks"),
                        help="folder for the PNGs (default: docs/benchmarks/)")
    parser.add_argument("--plot-only", metavar="JSON", help="redraw the plots from a result file")
    parser.add_argument("--pe-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the Python PEs (ours and gloo's)")
    parser.add_argument("--pe", choices=PE_TESTS, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=lambda t: [int(v) for v in t.split(",")],
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
        written = plots(results, args.plots)
        print("wrote " + ", ".join(written) if written else "no plots: matplotlib is missing")
        return 0 if written else 1
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS}")
    extra_env = dict(item.split("=", 1) for item in args.pe_env)
    netns_hosts = _netns()
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
            else:
                got, bad, port = measure_hps(hosts, p, port, extra_env)
            rows += got
            failures += bad
        residue = hosts
    if residue.residue():
        notes.append(f"namespaces left behind: {residue.residue()}")
    results = {"machine": machine(started, args.quick), "hosts": 2, "pes_per_host": 1,
               "link": f"{LINK} (veth pair through a bridge, tcp)", "rows": rows,
               "failures": failures, "ratios": ratios(rows), "moe": moe_steps, "notes": notes,
               **info}
    results["targets"] = targets(results)
    path = os.path.join(args.out, "scale_out.json")
    with open(path, "w") as sink:
        json.dump(results, sink, indent=1)
    written = plots(results, args.plots)
    report(results)
    print(f"wrote {path}" + "".join(f", {w}" for w in written)
          + ("" if written else " (no plots: matplotlib is missing)"))
    return 0 if rows or moe_steps else 1


if __name__ == "__main__":
    sys.exit(main())
