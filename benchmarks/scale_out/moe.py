"""The scale-out benchmark's MegaMoE rows (benchmarks/scale_out/scale_out.py): the training step
of benchmarks/moe/moe_bench.py across the two hosts, and for reference on one host over UCX loopback
and over shared memory.
"""

from __future__ import annotations

import os
import subprocess
import sys

from common.hosts import base_env
from common.launch import pes_command, wait_all
from common.report import failure
from common.results import parse
from moe import suite as moe
from scale_out.pes import hps_env

# Where the two PEs of the MoE step run: both hosts (one PE each, every byte over eth0), and
# for reference on this machine alone, through the package's launcher: every peer through UCX
# over lo (HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all), and the plain shared-memory path.
MOE_PLACEMENTS = ("2 hosts", "1 host, UCX loopback", "1 host, shared memory")
MOE_LOOPBACK_ENV = {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", "UCX_TLS": "tcp,self",
                    "UCX_NET_DEVICES": "lo"}


def moe_program(p: dict) -> list:
    """benchmarks/moe/moe_bench.py --test step (the suite's MoE step: zero_grad, forward,
    backward, dense all-reduce, AdamW of the small decoder, MegaMoE on SHMEM and AllToAllMoE on
    gloo's all_to_all_single built from the same seed, routers frozen, alternating order, one
    torch thread per PE, rank max) on the suite's model sizes (benchmarks/moe/suite.py SIZES)."""
    configs = ",".join(moe._config(name, moe.SIZES[name]) for name in p["moe"])
    return [moe.SCRIPT, "--test", "step", "--configs", configs,
            "--warmup", "3", "--steps", str(p["moe_steps"])]


def moe_rows(stdout: str, placement: str) -> tuple:
    """(rows, finished) from PE 0's output of moe_bench.py: one row per model size."""
    records, finished = parse(stdout, "moe")
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
                             env=base_env(rank, hosts, port, env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
    results = wait_all(processes, 1800)
    got, finished = moe_rows(results[0][1], MOE_PLACEMENTS[0])
    rows += got
    bad = [(rc, out, err) for rc, out, err in results if rc != 0]
    if bad or not finished:
        rc, out, err = bad[0] if bad else results[0]
        failures.append(_moe_failure(MOE_PLACEMENTS[0], rc, out, err))
    for placement, knob in ((MOE_PLACEMENTS[1], MOE_LOOPBACK_ENV), (MOE_PLACEMENTS[2], {})):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for key in ("HYPER_PARALLEL_SHMEM_REMOTE_PEERS", "UCX_TLS", "UCX_NET_DEVICES", "RANK",
                    "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
            env.pop(key, None)
        env.update(knob)
        try:
            done = subprocess.run(pes_command(2, 1500, program), env=env, capture_output=True, text=True,
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
