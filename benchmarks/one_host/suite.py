"""The one-host suite of benchmarks/run.py: what it measures (plan, jobs) and the PE environment
its jobs share. docs/benchmarks.md describes the peers and the targets.
"""

from __future__ import annotations

import os

from common.build import native_binary, oshrun
from common.launch import bench_env, pes_command
from common.units import KIB, MIB
from common.units import csv as sizes

HERE = os.path.dirname(os.path.abspath(__file__))


def plan(quick: bool) -> dict:
    if quick:
        return {"rma": [8, 4 * KIB, MIB, 16 * MIB], "small": [8, 4 * KIB],
                "gather": [4 * KIB, MIB, 16 * MIB], "free": [4 * KIB, MIB, 16 * MIB], "reps": 5,
                "min_us": 4000, "gloo_min_us": 4000}
    return {"rma": [8, 64, 512, 4 * KIB, 32 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "small": [8, 64, 512, 4 * KIB],
            "gather": [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB],
            "free": [4 * KIB, 256 * KIB, 4 * MIB, 64 * MIB],
            "reps": 7, "min_us": 30000, "gloo_min_us": 30000}


def jobs(p: dict, oshmem: str | None, with_python: bool, contended: bool) -> list:
    """The measurements as (label, command, scenario), grouped by pattern so that each peer
    runs right beside ours."""
    native = native_binary()
    common = ["--reps", str(p["reps"]), "--min-time-us", str(p["min_us"])]
    script = os.path.join(HERE, "python_bench.py")

    def hps(test, pes, values):
        return (f"native {test} x{pes}", [native, "--test", test, "--pes", str(pes), "--sizes",
                                          sizes(values)] + common)

    def peer(test, pes, values):
        return [(f"oshmem {test} x{pes}", oshrun(pes) + [oshmem, "--test", test,
                                                         "--sizes", sizes(values)] + common)
                ] if oshmem else []

    def python(test, pes, values, min_us=None):
        if not with_python:
            return []
        return [(f"python {test} x{pes}",
                 pes_command(pes, 900, [script, "--test", test, "--sizes", sizes(values),
                                        "--reps", str(p["reps"]),
                                        "--min-time-us", str(min_us or p["min_us"])]))]

    cores = os.cpu_count() or 1
    out = [("memcpy", [native, "--test", "memcpy", "--pes", "1", "--sizes", sizes(p["rma"])] + common)]
    # Copies on every core at once: what the cores move together (all_gather's bound).
    if cores > 1:
        out.append((f"memcpy x{cores} at once", [native, "--test", "memcpy", "--pes", str(cores),
                                                 "--sizes", sizes(p["gather"])] + common))
    for test in ("put", "get"):
        out += [hps(test, 2, p["rma"])] + peer(test, 2, p["rma"]) + python(test, 2, p["rma"])
    out += python("gloo_sendrecv", 2, p["rma"], p["gloo_min_us"])
    out += [hps("pingpong", 2, p["small"]), hps("pingpong_fused", 2, p["small"])]
    out += peer("pingpong", 2, p["small"]) + python("pingpong", 2, p["small"])
    out += python("gloo_pingpong", 2, p["small"], p["gloo_min_us"])
    for pes in (2, 4):
        out += [hps("barrier", pes, [0])] + peer("barrier", pes, [0])
        out += python("barrier", pes, [0]) + python("gloo_barrier", pes, [0], p["gloo_min_us"])
    for pes in (2, 4):
        # Open MPI 4.1's shmem_malloc refuses the 256 MiB output of a 64 MiB x 4 fcollect,
        # whatever SHMEM_SYMMETRIC_SIZE says; the peer stops at 16 MiB per PE there.
        fcollect = [size for size in p["gather"] if pes * size <= 128 * MIB]
        out += [hps("allgather", pes, p["gather"])] + peer("fcollect", pes, fcollect)
        out += python("allgather", pes, p["gather"])
        out += python("gloo_allgather", pes, p["gather"], p["gloo_min_us"])
    for pes in (2, 4):
        out += python("alltoall", pes, p["gather"])
        out += python("gloo_alltoall", pes, p["gather"], p["gloo_min_us"])
    out += python("put_overhead", 2, [8]) + python("overlap", 2, [64 * MIB], 4 * p["min_us"])
    # What freeing costs now that free poisons the block: empty + free beside a fill.
    out += python("empty_free", 2, p["free"]) + python("fill", 2, p["free"])
    scenario = [(label, command, "idle") for label, command in out]
    if contended:
        busy = [hps("pingpong", 2, p["small"]), hps("pingpong_fused", 2, p["small"])]
        busy += peer("pingpong", 2, p["small"]) + python("pingpong", 2, p["small"])
        for pes in (2, 4):
            busy += [hps("barrier", pes, [0])] + peer("barrier", pes, [0])
        scenario += [(label + " (contended)", command, "contended") for label, command in busy]
    return scenario


def job_env(p: dict) -> dict:
    """The jobs' environment: a symmetric heap for the largest buffers, ours and OSHMEM's (which
    keeps its own bookkeeping in the heap: twice what the data needs)."""
    largest = max(p["gather"]) * 4 + max(p["rma"]) * 2
    env = bench_env()
    env.setdefault("HYPER_PARALLEL_SHMEM_HEAP_SIZE", str(max(largest + 64 * MIB, 256 * MIB)))
    env.setdefault("SHMEM_SYMMETRIC_SIZE", str(2 * max(largest + 64 * MIB, 256 * MIB)))
    return env
