"""The scale-out benchmark's native side (benchmarks/scale_out/scale_out.py): shmem_bench, the runtime from
C++ without Python, as one PE on each host over a TCP bootstrap, and the wire's own floor
(shmem_bench's tcp_pingpong: one TCP connection, no runtime); then the breakdown of a
cross-host ping-pong (docs/scale-out.md, "Where a ping-pong's time goes"): the same 8-byte
ping-pong measured layer by layer, from the kernel's TCP up to Python, and with the waiter
asleep, each stage the difference between two layers measured in the same run.
"""

from __future__ import annotations

import os
import subprocess

from common.build import build_native, native_binary as built_binary
from common.launch import wait_all
from common.report import failure
from common.results import records
from common.stats import record
from scale_out.pes import hps_env, run_pes


def native_binary(given: str | None) -> tuple:
    """(path of shmem_bench, problem): the one given (--native-bench), else the repository's,
    built into build/bench/ first."""
    if given:
        return (given, None) if os.access(given, os.X_OK) else (None, f"{given} is not executable")
    try:
        build_native()
    except subprocess.CalledProcessError as error:
        return None, f"building shmem_bench failed: {(error.stderr or b'')[-400:]!r}"
    return built_binary(), None


def run_native(hosts, binary: str, test: str, sizes: list, p: dict, port: int, env: dict,
               timeout_s: float = 300, extra: tuple = ()) -> tuple:
    """shmem_bench --test `test` as rank 0 on host 0 (the bootstrap listens there) and rank 1 on
    host 1: ({rank: [JSON lines]}, problem)."""
    processes = []
    for rank in range(2):
        argv = [binary, "--test", test, "--pes", "2", "--sizes", ",".join(map(str, sizes)),
                "--reps", str(p["reps"]), "--min-time-us", str(p["min_us"]),
                "--bootstrap", f"tcp:{hosts.address(0)}:{port}", "--rank", str(rank), *extra]
        processes.append(hosts.popen(rank, argv, env=dict(os.environ, **env),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = wait_all(processes, timeout_s)
    lines = {}
    for rank, (rc, out, err) in enumerate(results):
        if rc != 0:
            what = "timed out" if rc is None else f"exit code {rc}"
            return {}, f"rank {rank} {what}: " + " | ".join((err or out).strip().splitlines()[-3:])
        lines[rank] = records(out, "impl")
    return lines, None


def pingpong_row(system: str, test: str, lines: dict, **extra) -> dict | None:
    """A ping-pong row from shmem_bench's lines: samples_us (repetition means), round_trips
    (every half round trip: median is the typical value) and per_rank (send_us, one_way_us)."""
    summary = next((d for d in lines.get(0, []) if "samples_us" in d), None)
    traced = {rank: next((d for d in lines.get(rank, []) if "rank" in d), None) for rank in (0, 1)}
    if summary is None or traced[0] is None:
        return None
    row = record(system, test, summary["bytes"], summary["samples_us"], summary["iters"],
                 round_trips=traced[0]["half_rtt_us"],
                 per_rank=[{k: traced[r].get(k) for k in ("send_us", "one_way_us")}
                           if traced[r] else None for r in (0, 1)], **extra)
    row["median_us"] = row["round_trips"]["median"]
    row["mean_us"] = row["round_trips"]["mean"]
    return row


def tcp_rows(lines: dict) -> list:
    rows = []
    for data in lines.get(0, []):
        if data.get("impl") != "tcp":
            continue
        stats = data["half_rtt_us"]
        name = "pingpong" if data["test"] == "tcp_pingpong" else "pingpong_block"
        row = record("tcp", name, 8, [stats["median"]], data["iters"], round_trips=stats)
        row["mean_us"] = stats["mean"]
        rows.append(row)
    return rows


def measure_native(hosts, p: dict, port: int, extra_env: dict, binary: str | None) -> tuple:
    """Our 8-byte ping-pong from C++ across the hosts (system hps_native), and TCP's."""
    path, problem = native_binary(binary)
    if problem:
        return [], [failure("hps_native", "pingpong", [8], "unavailable", problem)], port
    rows, failures = [], []
    env = hps_env(p, extra_env)
    port += 1
    lines, problem = run_native(hosts, path, "pingpong_fused", [8], p, port, env)
    row = pingpong_row("hps_native", "pingpong", lines) if not problem else None
    if row:
        rows.append(row)
    else:
        failures.append(failure("hps_native", "pingpong", [8], "failed", problem or "no output"))
    port += 1
    lines, problem = run_native(hosts, path, "tcp_pingpong", [8], p, port, env)
    if problem:
        failures.append(failure("tcp", "pingpong", [8], "failed", problem))
    rows += tcp_rows(lines)
    return rows, failures, port


# How long PE 0 pauses before each round trip of the "asleep" variants: far longer than any
# spin, so PE 1's wait sleeps and its one-way time includes the wake-up.
GAP_US = 2000

# The breakdown's variants: (name, how it differs from the default, runner, test, settings).
BREAKDOWN = [
    ("C++ put_signal", "the default: one message; the waiter spins (it is answered in time)",
     "native", "pingpong_fused", {}),
    ("C++ put + signal", "two calls: two messages", "native", "pingpong", {}),
    ("C++ put_signal, rma path", "put, fence, atomic, each answered (UCX's emulated RMA)",
     "native", "pingpong_fused", {"HYPER_PARALLEL_SHMEM_REMOTE_PATH": "rma"}),
    ("C++ put_signal, waiter asleep", f"PE 0 pauses {GAP_US} us first: PE 1's wait sleeps",
     "native", "pingpong_fused", {"gap": GAP_US}),
    ("Python put_signal", "the default, from Python, every message stamped", "python",
     "hps_pingpong_trace", {}),
    ("Python put_signal, waiter asleep", f"PE 0 pauses {GAP_US} us first: PE 1's wait sleeps",
     "python", "hps_pingpong_trace", {"SCALE_OUT_GAP_US": str(GAP_US)}),
]


def measure_breakdown(hosts, p: dict, port: int, extra_env: dict, binary: str | None) -> tuple:
    """Every variant of BREAKDOWN as a row of system "breakdown" (test: its name)."""
    path, problem = native_binary(binary)
    rows, failures = [], []
    for name, note, runner, test, settings in BREAKDOWN:
        port += 1
        settings = dict(settings)
        gap = settings.pop("gap", 0)
        env = dict(extra_env, **settings)
        row = None
        if runner == "native":
            if problem:
                failures.append(failure("breakdown", name, [8], "unavailable", problem))
                continue
            lines, bad = run_native(hosts, path, test, [8], p, port, hps_env(p, env),
                                    extra=("--gap-us", str(gap)) if gap else ())
            row = pingpong_row("breakdown", name, lines, note=note) if not bad else None
        else:
            got, bad_rows = run_pes(hosts, test, [8], p, port, hps_env(p, env))
            bad = bad_rows[0]["message"] if bad_rows else None
            if got:
                row = dict(got[0], system="breakdown", test=name, note=note)
        if row:
            rows.append(row)
        else:
            failures.append(failure("breakdown", name, [8], "failed", bad or "no output"))
    return rows, failures, port


def breakdown_stages(rows: list) -> list:
    """Where a ping-pong's half round trip goes, each stage the difference of two medians
    measured in this run (a negative one says the layers overlap). Needs the tcp, ucx_perftest,
    hps_native and breakdown rows; stages whose rows are missing are left out."""
    def median(system, test):
        row = next((r for r in rows if r["system"] == system and r["test"] == test), None)
        return row["median_us"] if row else None

    tcp, tcp_block = median("tcp", "pingpong"), median("tcp", "pingpong_block")
    am, am_sleep = median("ucx_perftest", "am_lat"), median("ucx_perftest", "am_lat_sleep")
    cpp = median("breakdown", "C++ put_signal") or median("hps_native", "pingpong")
    two = median("breakdown", "C++ put + signal")
    rma = median("breakdown", "C++ put_signal, rma path")
    def delivery(test):
        """PE 0's message to PE 1, from PE 0's send call returning to PE 1's wait returning:
        PE 1's one-way median less PE 0's send call median (in the "asleep" variants PE 0's
        call comes straight out of a sleep and is slower, which is not PE 1's wake-up)."""
        row = next((r for r in rows if r["system"] == "breakdown" and r["test"] == test), None)
        pes = (row or {}).get("per_rank") or [None, None]
        arrived = ((pes[1] or {}).get("one_way_us") or {}).get("median")
        sent = ((pes[0] or {}).get("send_us") or {}).get("median")
        return None if arrived is None or sent is None else arrived - sent

    asleep, awake = delivery("C++ put_signal, waiter asleep"), delivery("C++ put_signal")
    py = median("breakdown", "Python put_signal")
    py_asleep = delivery("Python put_signal, waiter asleep")
    py_awake = delivery("Python put_signal")
    # (stage, the larger median, the smaller one, how): each stage their difference.
    layers = [
        ("the kernel's TCP over the link (polled)", tcp, 0.0,
         "tcp_pingpong: 8 B each way, busy recv"),
        ("UCX's active-message layer", am, tcp, "ucp_am_lat -E poll - tcp_pingpong"),
        ("the runtime's send, handler, signal and wait", cpp, am,
         "C++ put_signal ping-pong - ucp_am_lat"),
        ("Python: put_signal and wait_signal calls", py, cpp,
         "Python ping-pong (stamped) - C++ ping-pong"),
        ("a second message (put, then signal)", two, cpp, "C++ put + signal - put_signal"),
        ("UCX's emulated RMA instead (put, fence, atomic)", rma, cpp,
         "C++ rma path - messages path"),
        ("a sleeping waiter's wake-up, C++", asleep, awake,
         "delivery to a waiter asleep - to one spinning"),
        ("a sleeping waiter's wake-up, Python", py_asleep, py_awake,
         "delivery to a waiter asleep - to one spinning"),
        ("UCX's own wake-up from sleep", am_sleep, am, "ucp_am_lat -E sleep - -E poll"),
        ("the kernel's wake-up of a blocked recv", tcp_block, tcp,
         "tcp_pingpong blocking - polled"),
    ]
    # Only where both were measured.
    return [{"stage": stage, "us": more - less, "how": how} for stage, more, less, how in layers
            if more is not None and less is not None]
