"""debug_state() and the debug log of every allocation and free."""

from __future__ import annotations

import os
import re

import pytest
import torch

from helpers import captured_stderr, device
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)

FIELDS = ["state", "reference_count", "lifecycle", "root_rank", "root_size", "global_ranks",
          "device", "backend", "config", "heap_base", "heap", "live_allocations", "leaks",
          "released", "collectives", "teams", "calls_in_flight", "host_synchronizations", "wait",
          "peers",
          "network", "blocked",
          "recent_ops",
          "latest_failure", "terminal_failure"]


def _eager_calls_are_profiler_ranges(rank, size):
    with shmem.acquire_shmem():
        data = shmem.empty(4, dtype=torch.float32)
        sig = shmem.empty(1, dtype=torch.int64)
        sig.zero_()
        gathered = shmem.empty(4 * size, dtype=torch.float32)
        exchanged = shmem.empty(4 * size, dtype=torch.float32)
        shmem.barrier()
        right = (rank + 1) % size
        dev = device()
        with torch.profiler.profile() as profile:
            shmem.put(data, torch.ones(4, device=dev), right)
            shmem.get(torch.empty(4, device=dev), data, right)
            shmem.signal(sig, 1, right, operation="add")
            shmem.put_signal(data, torch.ones(4, device=dev), sig, 1, right, operation="add")
            shmem.wait_signal(sig, 2, comparison="ge")
            shmem.barrier()
            shmem.all_gather(gathered, torch.ones(4, device=dev))
            shmem.all_to_all(exchanged, torch.ones(4 * size, device=dev))
        names = [event.name for event in profile.events() if event.name.startswith("hps::")]
        for tensor in (exchanged, gathered, sig, data):
            shmem.free(tensor)
    return names


def test_eager_calls_are_ranges_named_as_their_ops_under_the_profiler(pes):
    for names in pes(2).run(_eager_calls_are_profiler_ranges):
        assert sorted(names) == sorted(f"hps::{op}" for op in (
            "put", "get", "signal", "put_signal", "wait_signal", "barrier", "all_gather",
            "all_to_all")), names


def _fields_and_repr(rank, size):
    idle = shmem.debug_state()
    assert isinstance(idle, dict) and isinstance(idle, shmem.DebugState)
    assert idle["state"] == "uninitialized" and idle["reference_count"] == 0
    with shmem.acquire_shmem():
        t = shmem.empty(100, dtype=torch.uint8, alignment=256)
        state = shmem.debug_state()
        assert list(state) == FIELDS
        assert state["state"] == "ready" and state["reference_count"] == 1
        assert state["root_rank"] == rank and state["root_size"] == size
        assert state["device"] == "cpu:0" and state["backend"] == "host"
        assert state["config"] == {"heap_size": 268435456, "timeout_sec": 30, "log_level": 2,
                                   "backend": "auto", "wait": "auto",
                                   "quarantine_bytes": 268435456 // 8, "max_teams": 64,
                                   "max_pes": 4096}
        wait = state["wait"]
        assert wait["mode"] == "auto" and wait["sleeps"] is True and wait["yield_us"] == 100.0
        cores = os.cpu_count()
        if size <= cores:  # pinned to this rank's share of the cpus (the pool may use them all)
            base, extra = divmod(cores, size)
            first, count = rank * base + min(rank, extra), base + (rank < extra)
            share = f"cpu {first}" if count == 1 else f"cpus {first}-{first + count - 1}"
            assert wait["spin_us"] == 200.0, wait
            assert wait["pinned"] == share, wait
            assert os.sched_getaffinity(0) == set(range(first, first + count))
        else:
            assert wait["spin_us"] == 0.0 and wait["pinned"].startswith("none ("), wait
        heap = state["heap"]
        assert heap["heap_size"] == 268435456 and heap["allocated"] == 128
        assert heap["max_allocated"] == 128 and heap["remaining"] == 268435456 - 128
        assert state["live_allocations"] == [
            {"id": state["live_allocations"][0]["id"], "base": t.data_ptr(), "bytes": 100,
             "alignment": 256}]
        assert state["leaks"] == [] and state["latest_failure"] is None
        assert state["collectives"] == {"sequence": 1, "in_flight": 0, "stream": None}
        assert state["teams"] == [{"slot": 0, "pes": list(range(size)), "my_pe": rank,
                                   "predefined": True, "handles": 0, "sequence": 1,
                                   "first_sequence": 0, "in_flight": 0, "stream": None}]
        assert state["calls_in_flight"] == 0 and state["blocked"] == []
        # A device backend counts its waits for a stream; the host backend has none.
        assert isinstance(state["host_synchronizations"], int)
        if state["backend"] == "host":
            assert state["host_synchronizations"] == 0
        # One host: every peer mapped, no network transport (docs/scale-out.md).
        assert [peer["transport"] for peer in state["peers"]] == [
            "self" if pe == rank else "shared memory" for pe in range(size)]
        assert all(peer["path"] is None for peer in state["peers"]), state["peers"]
        assert len({peer["host"] for peer in state["peers"]}) == 1, state["peers"]
        assert state["network"] is None
        assert state["terminal_failure"] is None
        text = repr(state)
        lines = text.splitlines()
        assert lines[0] == "DebugState(" and lines[-1] == ")"
        assert len(lines) == len(FIELDS) + 2, "one field per line"
        assert f"  heap_base={hex(state['heap_base'])}" in lines
        assert f"base={hex(t.data_ptr())}" in text, "addresses in hex"
        assert "  state='ready'" in lines
        with pytest.raises(shmem.ShmemError):
            shmem.put(t, torch.zeros(3, dtype=torch.uint8), 0)
        failure = shmem.debug_state()["latest_failure"]
        assert failure.startswith("[HYPER_PARALLEL_SHMEM_ERROR] error_code=INVALID_ARGUMENT operation=put")
        shmem.free(t)
        assert shmem.debug_state()["heap"]["max_allocated"] == 128
        assert shmem.debug_state()["heap"]["allocated"] == 0
    assert len(os.sched_getaffinity(0)) == os.cpu_count(), "the close gave the affinity back"
    return True


@pytest.mark.host_only("the host backend's device, wait policy and pinning")
@pytest.mark.parametrize("size", [1, 2])
def test_debug_state_fields_and_repr(pes, size):
    assert all(pes(size).run(_fields_and_repr))


def _allocation_debug_log(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_LOG_LEVEL"] = "0"
    with captured_stderr() as lines:
        with shmem.acquire_shmem():
            t = shmem.empty(3, 4, dtype=torch.float16)  # the line this test looks for
            base = t.data_ptr()
            shmem.free(t)
    empty_lines = [line for line in lines if "op=Empty" in line]
    free_lines = [line for line in lines if "op=Free" in line]
    assert len(empty_lines) == 1 and len(free_lines) == 1, lines
    for line in empty_lines + free_lines:
        assert " level=DEBUG " in line and f" rank={rank} " in line, line
        assert f"base={hex(base)}" in line and "bytes=24" in line, line
        assert "shape=(3, 4) dtype=torch.float16" in line, line
        assert re.search(r"caller=\S*test_debug\.py:\d+ in _allocation_debug_log", line), line
        assert "hyper_parallel/core/multicore/shmem/" not in line.split("caller=")[1], line
    return True


def test_debug_log_of_every_empty_and_free(pes):
    assert all(pes(2).run(_allocation_debug_log))
