"""Starting the PEs: the package's launcher (one process per PE on this host), the jobs of a
suite run in alternating rounds with a progress bar, a CPU hog beside a job, waiting for the
processes of several hosts, and the `--pe` entry that turns a driver script into its own PE.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from common import RESULTS, ROOT
from common.progress import progress
from common.results import parse

# The package's launcher: like torchrun, one process per PE on this host (docs/benchmarks.md).
LAUNCHER = [sys.executable, "-m", "hyper_parallel.core.multicore.shmem.launch"]


def pes_command(pes: int, timeout_s: int, program: list) -> list:
    """The launcher starting `pes` processes of program ([script, args...]), each given
    timeout_s seconds."""
    return LAUNCHER + ["--nproc", str(pes), "--timeout", str(timeout_s)] + list(program)


def bench_env(**extra) -> dict:
    """This process's environment for a benchmark job: one OpenMP thread (unless set), the
    runtime's log level left at its default; then `extra`."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("HYPER_PARALLEL_SHMEM_LOG_LEVEL", None)
    env.update(extra)
    return env


class CpuHog:
    """One CPU-bound process beside a job (like `yes > /dev/null`), for the contended scenario."""

    def __enter__(self) -> "CpuHog":
        self._process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc) -> None:
        self._process.kill()
        self._process.wait()


def run_capture(command: list, env: dict | None, timeout_s: float, hog: bool = False):
    """subprocess.run with the output captured, in the repository root; with `hog`, one CPU
    hog beside it for its whole length."""
    if hog:
        with CpuHog():
            return run_capture(command, env, timeout_s)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env,
                          cwd=ROOT)


def tail(done, lines: int = 5) -> str:
    """The last lines a failed process printed (stderr, else stdout), joined by ' | '."""
    return " | ".join((done.stderr or done.stdout or "").strip().splitlines()[-lines:])


def run_jobs(work: list, run_one) -> tuple:
    """Runs every job of `work` (tuples whose first item is a label) through run_one(*job) ->
    (records, problem or None), with a progress bar; (records, notes: the problems, started:
    monotonic time)."""
    records, notes, started = [], [], time.monotonic()
    for index, job in enumerate(work):
        progress(index, len(work), job[0], started)
        got, problem = run_one(*job)
        records += got
        if problem:
            notes.append(problem)
    progress(len(work), len(work), "done", started)
    return records, notes, started


def suite_job(env: dict, key: str, timeout_s: int):
    """run_one for run_jobs: a PE-side suite's launch (label, command), its result lines
    holding `key`; a problem where it timed out, failed or never printed "done"."""
    def run_one(label: str, command: list) -> tuple:
        try:
            done = run_capture(command, env, timeout_s)
        except subprocess.TimeoutExpired:
            return [], f"{label}: timed out after {timeout_s} s"
        got, finished = parse(done.stdout, key=key)
        if done.returncode != 0 or not finished:
            return got, f"{label}: exit code {done.returncode}: " + tail(done)
        return got, None

    return run_one


def run_pes(pes: int, program: list, key: str, timeout_s: int = 900) -> list:
    """One job of `pes` PEs through the launcher; the result lines holding `key`. A failed job,
    or one without results, ends the driver (its output on stderr)."""
    done = subprocess.run(pes_command(pes, timeout_s, program), capture_output=True, text=True,
                          timeout=2 * timeout_s)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"the {pes}-PE job failed (exit {done.returncode})")
    got = parse(done.stdout, key)[0]
    if not got:
        raise SystemExit(f"the {pes}-PE job printed no results")
    return got


def wait_all(processes: list, timeout_s: float) -> list:
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


def pe_or_drive(parser: argparse.ArgumentParser, pe, drive) -> int:
    """The main of a script that is both the driver and, started by the launcher with the
    hidden --pe, every PE: adds --out (default bench-results/) and --pe, then runs pe(args)
    or drive(args)."""
    parser.add_argument("--out", default=RESULTS,
                        help="folder for the results (default: bench-results/)")
    parser.add_argument("--pe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pe:
        pe(args)
        return 0
    return drive(args)


def start_pe(**init) -> tuple:
    """Inside a PE the launcher started: one torch intra-op thread, the process group from the
    launcher's environment (init: init_process_group_from_environment's arguments), the runtime
    acquired. (rank, size, the runtime's handle)."""
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)
    init_process_group_from_environment(**init)
    return dist.get_rank(), dist.get_world_size(), shmem.acquire_shmem()
