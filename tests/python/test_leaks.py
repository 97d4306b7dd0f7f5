"""Leak detection at the last reference, and the final close."""

from __future__ import annotations

import gc
import re

import pytest
import torch

from helpers import captured_stderr, expect_shmem_error
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _dropped_tensor_is_reported_at_once(rank, size):
    handle = shmem.acquire_shmem()
    kept = shmem.empty(4, dtype=torch.int32)
    dropped = shmem.empty(10, dtype=torch.float64)
    view = dropped[2:5]
    allocation = shmem.debug_state()["live_allocations"][1]
    with captured_stderr() as lines:
        del dropped
        gc.collect()
        assert not shmem.debug_state()["leaks"], "a live view still holds the storage"
        del view
    leak_lines = [line for line in lines if "lost its last reference without free" in line]
    assert len(leak_lines) == 1, lines
    line = leak_lines[0]
    assert " level=ERROR " in line and f" rank={rank} " in line, line
    assert f"id={allocation['id']}," in line, line
    assert f"base={hex(allocation['base'])}," in line, line
    assert "bytes=80," in line, line
    leaks = shmem.debug_state()["leaks"]
    assert [leak["id"] for leak in leaks] == [allocation["id"]]
    assert leaks[0]["bytes"] == 80 and leaks[0]["base"] == allocation["base"]
    # Every PE leaked the same allocation and holds nothing else once `kept` is freed: the last
    # close reclaims the leak collectively, with an ERROR line, instead of failing.
    shmem.free(kept)
    with captured_stderr() as lines:
        handle.close()
    assert handle.closed and shmem.debug_state()["state"] == "uninitialized"
    reclaimed = [line for line in lines if "reclaimed leaked allocations" in line]
    assert len(reclaimed) == 1 and f"ids=[{allocation['id']}]" in reclaimed[0], lines
    return True


@pytest.mark.parametrize("size", [1, 2, 4])
def test_dropped_tensor_is_reported_and_reclaimed_at_close(pes, size):
    assert all(pes(size).run(_dropped_tensor_is_reported_at_once))


def _leak_on_one_pe_fails_the_close(rank, size):
    handle = shmem.acquire_shmem()
    t = shmem.empty(16, dtype=torch.uint8)
    if rank == 0:
        with captured_stderr():
            del t
            gc.collect()
    # PE 0 leaked it, the others still hold it: nobody may reclaim it, every PE refuses.
    error = expect_shmem_error("INVALID_STATE", handle.close)
    message = str(error)
    assert "shutdown refused: live allocations remain" in message, message
    expected_holders = ",".join(str(pe) for pe in range(size))
    assert f"pes_with_live_allocations=[{expected_holders}]" in message, message
    assert re.search(r"live_ids=\[\d+\]", message), message
    assert not handle.closed and shmem.debug_state()["state"] == "ready"
    assert shmem.debug_state()["reference_count"] == 1
    # Once the others drop it too, every PE leaked the same allocation: the close reclaims it.
    if rank != 0:
        with captured_stderr():
            del t
            gc.collect()
    with captured_stderr():
        handle.close()
    assert handle.closed and shmem.debug_state()["state"] == "uninitialized"
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_leak_on_some_pes_only_refuses_the_close(pes, size):
    assert all(pes(size).run(_leak_on_one_pe_fails_the_close))
