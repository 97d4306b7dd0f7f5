"""PE pools for the system tests: N processes joined by a gloo process group on loopback.

Each test sends a module-level function to every PE with PePool.run(fn, *args); it runs as
fn(rank, size, *args) in each PE and its return values come back in rank order. A PE that
raises fails the call with its traceback; a PE that does not answer within the deadline gets
the whole pool killed (no hang). After each call every PE checks that the test left no
Runtime behind; a pool whose PEs are not clean is replaced before the next test.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
import traceback
from datetime import timedelta

_CONTEXT = multiprocessing.get_context("spawn")


class PeFailure(AssertionError):
    """One or more PEs raised, hung or crashed."""


# The tests' stand-in torch_npu (tests/fake_npu); scripts/test.sh runs the cann_fake tests with
# HPS_TEST_FAKE_NPU=1, so every PE imports it and takes NPU rank % device count first, and
# shmem.empty returns NPU tensors (docs/backends.md, "NPU tensors and streams from Python").
FAKE_NPU = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fake_npu")


def use_fake_npu(rank: int) -> int:
    """Imports the fake torch_npu and makes NPU rank % device count current; returns it."""
    import sys

    if FAKE_NPU not in sys.path:  # a pool's PYTHONPATH comes after its PEs started
        sys.path.insert(0, FAKE_NPU)
    import torch
    import torch_npu  # noqa: F401  (registers torch.npu)

    index = rank % torch.npu.device_count()
    torch.npu.set_device(index)
    return index


def _worker(rank: int, size: int, init_file: str, conn, env: dict) -> None:
    os.environ.update(env)
    if os.environ.get("HPS_TEST_FAKE_NPU") == "1":
        use_fake_npu(rank)
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=size, timeout=timedelta(seconds=120))
    from hyper_parallel.core.multicore import shmem

    conn.send(("ready", None))
    while True:
        message = conn.recv()
        if message is None:
            break
        fn, args, kwargs = message
        saved_env = dict(os.environ)
        try:
            outcome = ("ok", fn(rank, size, *args, **kwargs))
        except BaseException as error:  # reported to the parent, never swallowed
            outcome = ("error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        state = shmem.debug_state()
        clean = state["state"] == "uninitialized" and state["reference_count"] == 0
        conn.send(outcome + (clean,))
    dist.destroy_process_group()


class PePool:
    def __init__(self, size: int, env: dict | None = None, start_timeout: float = 180.0) -> None:
        self.size = size
        self.clean = True
        self._dir = tempfile.mkdtemp(prefix="hps-pes-")
        init_file = os.path.join(self._dir, "rendezvous")
        base_env = {"GLOO_SOCKET_IFNAME": "lo", "HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "30",
                    "OMP_NUM_THREADS": "1"}
        base_env.update(env or {})
        self._conns, self._procs = [], []
        for rank in range(size):
            parent, child = _CONTEXT.Pipe()
            process = _CONTEXT.Process(target=_worker, args=(rank, size, init_file, child, base_env),
                                       daemon=True)
            process.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(process)
        deadline = time.monotonic() + start_timeout
        for rank, conn in enumerate(self._conns):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                raise PeFailure(f"PE {rank} of {size} did not start within {start_timeout} s")
            conn.recv()

    @property
    def pids(self) -> list:
        return [process.pid for process in self._procs]

    def run(self, fn, *args, timeout: float = 120.0, **kwargs) -> list:
        """Runs fn(rank, size, *args, **kwargs) on every PE; returns the results by rank."""
        for conn in self._conns:
            conn.send((fn, args, kwargs))
        deadline = time.monotonic() + timeout
        results, failures = [None] * self.size, []
        for rank, conn in enumerate(self._conns):
            try:
                ready = conn.poll(max(0.0, deadline - time.monotonic()))
                message = conn.recv() if ready else None
            except (EOFError, OSError):
                message = ("error", f"PE {rank} died (exit code {self._procs[rank].exitcode})", False)
            if message is None:
                self.kill()
                raise PeFailure(f"{fn.__name__}: PE {rank} of {self.size} did not finish within "
                                f"{timeout} s; the pool was killed")
            status, value, clean = message
            self.clean = self.clean and clean
            if status == "ok":
                results[rank] = value
            else:
                failures.append(f"--- PE {rank} ---\n{value}")
        if failures:
            raise PeFailure(f"{fn.__name__} failed on {len(failures)} of {self.size} PEs:\n"
                            + "\n".join(failures))
        if not self.clean:
            raise PeFailure(f"{fn.__name__} left a live Runtime or open handles behind")
        return results

    def close(self, timeout: float = 30.0) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + timeout
        for process in self._procs:
            process.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        for process in self._procs:
            if process.is_alive():
                process.kill()
            process.join(5)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        shutil.rmtree(self._dir, ignore_errors=True)
        self.clean = False
