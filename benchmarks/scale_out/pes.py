"""The scale-out benchmark's Python PEs (benchmarks/scale_out/scale_out.py): gloo's collectives and ours
(put bandwidth, put_signal, ping-pong, all_gather, all_to_all).

run_pes starts one PE on each host as `scale_out.py --pe TEST ...` (SCRIPT, the entry point,
whose hidden --pe option calls pe_main here); pe_main is the code that runs inside each PE.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import subprocess
import sys
import time

from common.hosts import LINK, base_env
from common.launch import wait_all
from common.report import failure
from common.results import emit, emit_on, records
from common.stats import mean_us, percentiles, record
from common.units import MIB

HERE = os.path.dirname(os.path.abspath(__file__))

PE_TESTS = ("gloo_allgather", "gloo_alltoall", "hps_put_bw", "hps_put_signal", "hps_pingpong",
            "hps_pingpong_trace", "hps_allgather", "hps_alltoall")

# What run_pes starts on each host: the entry point; its --pe option runs pe_main.
SCRIPT = os.path.join(HERE, "scale_out.py")


def run_pes(hosts, test: str, sizes: list, p: dict, port: int, extra_env: dict,
            timeout_s: float = 600) -> tuple:
    """Starts `scale_out.py --pe test` on host 0 (rank 0) and host 1 (rank 1), the caller's
    environment plus extra_env passed through; (rows, failures). A PE that cannot run prints a
    JSON line with "error" (the ShmemError code) and exits 3."""
    argv = [sys.executable, SCRIPT, "--pe", test, "--sizes",
            ",".join(map(str, sizes)), "--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    processes = [hosts.popen(rank, argv, env=base_env(rank, hosts, port, extra_env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
    results = wait_all(processes, timeout_s)
    system, name = test.split("_", 1)
    rows, errors = [], []
    for rank, (rc, out, err) in enumerate(results):
        errors += [(rank, data["error"], data["message"]) for data in records(out, "error")]
        for data in (records(out) if rank == 0 else []):
            if "error" not in data:
                extra = {k: data[k] for k in ("round_trips", "per_rank") if k in data}
                rows.append(record(system, name, data["bytes"], data["samples_us"], data["iters"],
                                   **extra))
                if "round_trips" in data:  # a ping-pong: the typical round trip (its median)
                    rows[-1]["median_us"] = data["round_trips"]["median"]
                    rows[-1]["mean_us"] = data["round_trips"]["mean"]
        if rc != 0 and not errors:
            what = "timed out" if rc is None else f"exit code {rc}"
            errors.append((rank, what, " | ".join((err or out).strip().splitlines()[-4:])))
    if errors:
        rank, code, message = errors[0]
        return rows, [failure(system, name, [s for s in sizes if not any(
            r["bytes"] == s for r in rows)], code, f"PE {rank}: {message}")]
    return rows, []


def pingpong(shmem, dist, args, rank: int, dst, src, flag, trace: bool) -> None:
    """put_signal + wait_signal back and forth, every round trip timed (perf_counter_ns, which
    is CLOCK_MONOTONIC: the namespace hosts share it). With `trace`, each message carries its
    send time in its first 8 bytes, so the receiver also times the one-way trip, and the
    sender the put_signal call (docs/scale-out.md, "Where a ping-pong's time goes"). Rank 0
    emits one row: samples_us (per repetition: mean half round trip), round_trips (every half
    round trip) and per_rank (send_us, one_way_us of both PEs)."""
    import torch

    peer = 1 - rank
    clock = time.perf_counter_ns
    put_signal, wait_signal = shmem.put_signal, shmem.wait_signal
    # The stamp goes out from a local tensor; the peer's lands in the symmetric buffer, which
    # the protection chain does not export (numpy): read it through its address instead.
    stamp = src[:8].view(torch.int64).numpy() if trace else None
    landed = ctypes.c_int64.from_address(dst.data_ptr()) if trace else None
    value = [int(flag.item())]
    half, send, one_way = [], [], []

    gap = float(os.environ.get("SCALE_OUT_GAP_US", "0")) / 1e6  # PE 0's pause before each trip

    def run(count: int, keep: bool) -> float:
        start = clock()
        for _ in range(count):
            value[0] += 1
            v = value[0]
            if rank == 0:
                if gap:
                    time.sleep(gap)
                t0 = clock()
                if trace:
                    stamp[0] = t0
                put_signal(dst, src, flag, v, peer)
                t1 = clock()
                wait_signal(flag, v, comparison="ge")
                t2 = clock()
                if keep:
                    half.append((t2 - t0) / 2e3)
                    if trace:
                        send.append((t1 - t0) / 1e3)
                        one_way.append((t2 - landed.value) / 1e3)
            else:
                wait_signal(flag, v, comparison="ge")
                t2 = clock()
                if trace and keep:
                    one_way.append((t2 - landed.value) / 1e3)
                t0 = clock()
                if trace:
                    stamp[0] = t0
                put_signal(dst, src, flag, v, peer)
                if trace and keep:
                    send.append((clock() - t0) / 1e3)
        return (clock() - start) / count / 2e3

    run(1000, False)  # warm-up
    one = run(200, False)
    count = torch.tensor([max(100, min(1 << 20, int(args.min_time_us / max(2 * one, 0.01))))])
    dist.broadcast(count, 0)
    iters = int(count.item())
    samples, rep_medians = [], []
    for _ in range(args.reps):
        dist.barrier()
        before = len(half)
        samples.append(run(iters, True))
        if rank == 0:
            rep_medians.append(statistics.median(half[before:]))
    dist.barrier()
    mine = {"send_us": percentiles(send), "one_way_us": percentiles(one_way)}
    everyone = [None, None]
    dist.all_gather_object(everyone, mine)
    emit_on(rank, {"test": "pingpong_trace" if trace else "pingpong", "bytes": dst.numel(),
                   "iters": iters, "samples_us": samples, "round_trips": percentiles(half),
                   "rep_medians_us": rep_medians, "per_rank": everyone})


def pe_main(args) -> int:
    """One PE of a Python measurement (run on each host by run_pes)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    init_process_group_from_environment(timeout_s=120)
    rank = dist.get_rank()
    system, test = args.pe.split("_", 1)

    def emit_row(size, iters, samples):
        emit_on(rank, {"test": test, "bytes": size, "iters": iters, "samples_us": samples})

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
            emit_row(n, *measure(body))
        dist.destroy_process_group()
        return 0

    from hyper_parallel.core.multicore import shmem

    try:
        handle = shmem.acquire_shmem()
    except shmem.ShmemError as error:
        emit({"error": error.error_code, "message": str(error)})
        dist.destroy_process_group()
        return 3
    peer = 1 - rank
    try:
        if test in ("put_bw", "put_signal", "pingpong", "pingpong_trace"):
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
                    emit_row(n, *measure(body, finish=shmem.barrier))
                elif test == "put_signal":
                    # put + signal add, one call; the closing barrier makes the repetition
                    # count only delivered calls (its cost is spread over the iterations).
                    body = ((lambda: shmem.put_signal(dst, src, flag, 1, peer, operation="add"))
                            if rank == 0 else (lambda: None))
                    emit_row(n, *measure(body, finish=shmem.barrier))
                else:
                    pingpong(shmem, dist, args, rank, dst, src, flag, test == "pingpong_trace")
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
                emit_row(n, *measure(body))
            shmem.free(output)
    except shmem.ShmemError as error:
        emit({"error": error.error_code, "message": str(error)})
        return 3
    finally:
        try:
            handle.close()
        finally:
            dist.destroy_process_group()
    return 0


# ---- one system each: gloo and ours --------------------------------------------------------

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
