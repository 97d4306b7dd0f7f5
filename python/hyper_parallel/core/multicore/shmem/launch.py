"""A small launcher: runs N PE processes of one program on this machine.

    python -m hyper_parallel.core.multicore.shmem.launch --nproc 4 -m package.module [args...]
    python -m hyper_parallel.core.multicore.shmem.launch --nproc 4 script.py [args...]

Each PE gets, in its environment, RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (as
torchrun sets them), MASTER_ADDR and MASTER_PORT (127.0.0.1 and a free port, unless the caller
set them), a rendezvous file (HYPER_PARALLEL_SHMEM_RENDEZVOUS_FILE), GLOO_SOCKET_IFNAME=lo and
OMP_NUM_THREADS=1 (unless set). So the program joins the process group either with a plain
torch.distributed.init_process_group("gloo") (env://) or with
init_process_group_from_environment() (the rendezvous file; it also understands torchrun's
variables). The launcher waits for every PE with a deadline, kills the rest when one fails or
the deadline passes, and exits non-zero if any PE did (docs/api.md, "Starting the PEs").
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

from .errors import value_error

ENV_RENDEZVOUS = "HYPER_PARALLEL_SHMEM_RENDEZVOUS_FILE"


def init_process_group_from_environment(timeout_s: float = 300.0, backend: str = "gloo") -> bool:
    """Joins the process group this PE was launched into (by this launcher or torchrun), with
    torch.distributed's `backend` string: "gloo" by default; "cpu:gloo,cuda:nccl" keeps gloo
    for CPU tensors (and the SHMEM bootstrap) and puts CUDA tensors on NCCL, which needs a GPU
    per PE. Returns False when the process was started alone (no launcher variables); True,
    doing nothing, when a process group already exists."""
    import torch.distributed as dist

    if dist.is_initialized():
        return True
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        return False
    rendezvous = os.environ.get(ENV_RENDEZVOUS)
    init_method = f"file://{rendezvous}" if rendezvous else "env://"
    if os.environ.get("MASTER_ADDR", "127.0.0.1") in ("127.0.0.1", "localhost", "::1"):
        # One host: gloo on loopback (it otherwise picks the interface its hostname resolves
        # to, which fails where the hostname does not resolve). With PEs on several hosts the
        # user names the interface (GLOO_SOCKET_IFNAME), as for any gloo job.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(backend, init_method=init_method, rank=int(rank),
                            world_size=int(world), timeout=timedelta(seconds=timeout_s))
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SKIPPED = 77  # a PE's exit status for "this machine cannot run it" (as automake and ctest use)


def run_pes(nproc: int, command: list, timeout_s: float = 600.0, env: dict | None = None) -> int:
    """Runs `command` as nproc PEs; returns 0 when every PE exited with 0, SKIPPED (77) when the
    first PE to fail exited with 77, else 1."""
    if nproc < 1:
        raise value_error("run_pes", "nproc", "at least 1", nproc)
    workdir = tempfile.mkdtemp(prefix="hps-launch-")
    rendezvous = os.path.join(workdir, "rendezvous")
    processes = []
    base_env = dict(os.environ)
    base_env.update(env or {})
    # torch's env:// rendezvous (a plain init_process_group): rank 0 listens on MASTER_PORT.
    base_env.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in base_env:
        base_env["MASTER_PORT"] = str(free_port())
    try:
        for rank in range(nproc):
            child_env = dict(base_env)
            child_env.update({"RANK": str(rank), "WORLD_SIZE": str(nproc),
                              "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(nproc),
                              ENV_RENDEZVOUS: rendezvous, "GLOO_SOCKET_IFNAME": "lo",
                              "OMP_NUM_THREADS": child_env.get("OMP_NUM_THREADS", "1")})
            processes.append(subprocess.Popen(command, env=child_env))
        deadline = time.monotonic() + timeout_s
        codes: list = [None] * nproc
        while any(code is None for code in codes):
            for rank, process in enumerate(processes):
                if codes[rank] is None:
                    codes[rank] = process.poll()
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed or time.monotonic() > deadline:
                reason = (f"PE {failed[0]} exited with {codes[failed[0]]}" if failed
                          else f"the {timeout_s} s deadline passed")
                print(f"launch: {reason}; stopping the other PEs", file=sys.stderr)
                for process in processes:
                    if process.poll() is None:
                        process.kill()
                for process in processes:
                    process.wait()
                return SKIPPED if failed and codes[failed[0]] == SKIPPED else 1
            time.sleep(0.02)
        return 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hyper_parallel.core.multicore.shmem.launch",
        description="Run N PE processes of a program on this machine (gloo on loopback).",
        epilog="Exit status: 0 when every PE exits 0; 77 when the first PE to fail exits 77 "
               "(this machine cannot run the program); 1 otherwise.")
    parser.add_argument("--nproc", type=int, default=2, help="number of PEs (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before every PE is killed (default 600)")
    parser.add_argument("-m", dest="module", help="run a module, like python -m")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="script and its arguments")
    args = parser.parse_args(argv)
    if args.module:
        command = [sys.executable, "-m", args.module] + args.program
    elif args.program:
        command = [sys.executable] + args.program
    else:
        parser.error("give a script or -m module")
    if args.nproc < 1:
        parser.error(f"--nproc must be at least 1, but got {args.nproc}")
    return run_pes(args.nproc, command, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
