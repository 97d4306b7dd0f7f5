"""Dead peers from Python: with the default 120 s timeout, a PE that is killed, fails with an
exception, or returns without closing makes every survivor blocked on it raise PEER_LOST naming
it and its pid; the survivor's runtime is then terminal (every later call raises the same,
close() raises at once and closes the handle) and the survivor exits cleanly. After every case
no process, shared-memory segment or socket of the job is left.

Each case spawns its own PEs (a pool cannot survive a dead PE); the parent's deadline is far
below the 120 s timeout, so a survivor that waited for the timeout instead fails the test."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import time
import traceback
from datetime import timedelta

import pytest

_CONTEXT = multiprocessing.get_context("spawn")
_DEADLINE_S = 90.0


def _pe(rank, size, init_file, case, blocked_in, conn):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ.pop("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", None)  # the default 120 s
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=size, timeout=timedelta(seconds=60))
    from hyper_parallel.core.multicore import shmem

    result = {"rank": rank}
    try:
        handle = shmem.acquire_shmem()
        words = shmem.empty(3, 8, dtype=torch.int64)  # [0] pid, [1] armed, [2] never set
        words.zero_()
        words[0, 0] = os.getpid()
        spare = shmem.empty(16)
        out = shmem.empty(size * 4)
        shmem.barrier()
        victim = size - 1
        victim_pid = torch.zeros(1, dtype=torch.int64)
        shmem.get(victim_pid, words[0, :1], victim)
        shmem.barrier()
        if case == "normal":
            shmem.free(out)
            shmem.free(spare)
            shmem.free(words)
            handle.close()
            conn.send({"rank": rank, "closed": handle.closed})
            return
        if rank == victim:
            shmem.wait_signal(words[1, :1], size - 1, comparison="ge")
            time.sleep(0.1)
            if case == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if case == "raised":
                raise RuntimeError("the victim fails and its process exits without closing")
            conn.send({"rank": rank, "returned": True})
            return  # "returned": leaves without closing its handle
        shmem.signal(words[1, :1], 1, victim, operation="add")
        try:
            if blocked_in == "barrier":
                shmem.barrier()
            elif blocked_in == "wait_signal":
                shmem.wait_signal(words[2, :1], 1)
            elif blocked_in == "all_gather":
                shmem.all_gather(out, torch.ones(4))
            elif blocked_in == "close":
                shmem.free(out)
                shmem.free(spare)
                shmem.free(words)
                handle.close()
            raise AssertionError(f"{blocked_in} returned although PE {victim} is gone")
        except shmem.ShmemError as error:
            lost = error
        result["code"] = lost.error_code
        result["operation"] = lost.operation
        result["names_victim"] = (f"pe={victim}, pid={int(victim_pid)}" in str(lost))
        result["state"] = shmem.debug_state()["state"]
        result["terminal"] = shmem.debug_state()["terminal_failure"]
        message = str(lost).split(" phase=")[1].split(" ", 1)[1]
        try:
            shmem.empty(4)
        except shmem.ShmemError as later:
            result["later"] = (later.error_code, str(later).endswith(message))
        try:
            handle.close()
        except shmem.ShmemError as closing:
            result["close"] = closing.error_code
        result["closed"] = handle.closed
        try:
            shmem.acquire_shmem()
        except shmem.ShmemError as again:
            result["acquire"] = again.error_code
    except BaseException:
        if case == "raised" and rank == size - 1:
            raise
        result["error"] = traceback.format_exc()
    conn.send(result)


def _maps_of_job(pids: list) -> list:
    """Mappings of this library's segments created by `pids`, in any process of the machine."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as maps:
                for line in maps:
                    for pid in pids:
                        if "hyper_parallel_shmem.pe" in line and f".{pid} " in line + " ":
                            found.append(f"{entry}: {line.strip()}")
        except OSError:
            continue
    return found


def _run(size: int, case: str, blocked_in: str) -> tuple:
    workdir = tempfile.mkdtemp(prefix="hps-peer-loss-")
    init_file = os.path.join(workdir, "rendezvous")
    conns, procs = [], []
    try:
        for rank in range(size):
            parent, child = _CONTEXT.Pipe(duplex=False)
            proc = _CONTEXT.Process(target=_pe, args=(rank, size, init_file, case, blocked_in,
                                                      child))
            proc.start()
            child.close()
            conns.append(parent)
            procs.append(proc)
        deadline = time.monotonic() + _DEADLINE_S
        results = {}
        for rank, conn in enumerate(conns):
            if conn.poll(max(0.0, deadline - time.monotonic())):
                try:
                    results[rank] = conn.recv()
                except EOFError:
                    pass
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
        codes = [proc.exitcode for proc in procs]
        return results, codes, [proc.pid for proc in procs]
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("case,blocked_in", [
    ("killed", "barrier"),
    ("killed", "wait_signal"),
    ("raised", "all_gather"),
    ("returned", "close"),
])
def test_survivors_raise_peer_lost_and_exit_cleanly(case, blocked_in):
    size = 3
    results, codes, pids = _run(size, case, blocked_in)
    victim = size - 1
    expected_victim_code = {"killed": -signal.SIGKILL, "raised": 1, "returned": 0}[case]
    assert codes[victim] == expected_victim_code, (codes, results)
    for rank in range(size - 1):
        assert codes[rank] == 0, f"survivor {rank} did not exit cleanly: {codes} {results}"
        r = results.get(rank)
        assert r is not None and "error" not in r, r
        assert r["code"] == "PEER_LOST" and r["names_victim"], r
        if blocked_in != "close":
            assert r["operation"] == blocked_in, r
        assert r["state"] == "failed" and r["terminal"].startswith(
            "[HYPER_PARALLEL_SHMEM_ERROR] error_code=PEER_LOST"), r
        assert r["later"] == ("PEER_LOST", True), "every later call repeats the error"
        if blocked_in != "close":
            assert r["close"] == "PEER_LOST" and r["closed"], "close raises at once, handle closed"
        assert r["acquire"] == "PEER_LOST", "the process cannot start a new lifecycle"
    assert _maps_of_job(pids) == []
    assert not [p for p in multiprocessing.active_children() if p.pid in pids]


def test_nothing_is_left_after_a_normal_run():
    # The pool's PEs close cleanly in every other test; here a fresh job ends and its
    # processes exit, and nothing of it remains.
    results, codes, pids = _run(2, "normal", "none")
    assert codes == [0, 0], (codes, results)
    assert _maps_of_job(pids) == []
