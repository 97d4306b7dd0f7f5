"""The CANN backend from Python with NPU tensors, on the fake NPU device (tests/fake_npu: a
stand-in torch_npu over the fake ACL runtime, whose streams run their work asynchronously on
worker threads of their own).

Each PE imports torch_npu, takes NPU rank % device count and acquires the Runtime: shmem.empty
then returns tensors on npu:rank and every operation is enqueued on torch.npu.current_stream()
without the host waiting (debug_state()["host_synchronizations"] stays where it was). The pools
here run with their own environment (the CANN backend over the fake library, v1.5 and v1.0), so
this file runs in the ordinary test run.
"""

from __future__ import annotations

import sys

import pytest

import npu_pool
from helpers import expect_shmem_error
from pe_pool import PePool, use_fake_npu


@pytest.fixture(scope="module")
def npu_pes():
    """npu_pes(n, generation="v1.5") -> a PePool of n PEs on the fake NPU device."""
    yield from npu_pool.pools()


# ---- what every PE body starts with ----------------------------------------------------------

def _start(rank: int):
    use_fake_npu(rank)
    import torch
    from hyper_parallel.core.multicore import shmem

    torch.set_num_threads(1)
    return torch, shmem, shmem.acquire_shmem()


def _syncs(shmem) -> int:
    return shmem.debug_state()["host_synchronizations"]


# ---- tensors and the protection chain --------------------------------------------------------

def _tensors_and_protection(rank, size):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        t = shmem.empty(4, 8, dtype=torch.float32)
        assert t.device == device, t.device
        assert str(shmem.debug_state()["device"]) == f"npu:{device.index}"
        t.fill_(float(rank))
        view = t[1:3]
        assert view.device == device
        assert torch.equal(view.cpu(), torch.full((2, 8), float(rank)))
        expect_shmem_error("INVALID_ARGUMENT", shmem.free, view)  # a view frees nothing
        live = shmem.debug_state()["live_allocations"]
        assert [entry["bytes"] for entry in live] == [128]
        shmem.free(t)
        assert shmem.debug_state()["live_allocations"] == []
        # The freed tensor and its view fail, in SHMEM and in torch, and the process lives on.
        expect_shmem_error("DOUBLE_FREE", shmem.free, t)
        expect_shmem_error("USE_AFTER_FREE", shmem.put, view, torch.zeros(2, 8, device=device), 0)
        with pytest.raises(RuntimeError, match="USE_AFTER_FREE"):
            view.add_(1)
        # Dropped without free: a leak, reported at once.
        leaked = shmem.empty(16, dtype=torch.int32)
        del leaked
        assert [entry["bytes"] for entry in shmem.debug_state()["leaks"]] == [64]
        return True
    finally:
        handle.close()


@pytest.mark.parametrize("size", [2])
def test_empty_returns_npu_tensors_and_the_protection_chain_holds(npu_pes, size):
    assert all(npu_pes(size).run(_tensors_and_protection))


def _lifecycle_and_drift(rank, size):
    torch, shmem, handle = _start(rank)
    mine = rank % torch.npu.device_count()
    other = (mine + 1) % torch.npu.device_count()
    second = shmem.acquire_shmem()
    assert shmem.debug_state()["reference_count"] == 2
    t = shmem.empty(8, dtype=torch.float32)
    t.zero_()
    shmem.barrier()
    before = shmem.debug_state()["recent_ops"][-1:]
    torch.npu.set_device(other)
    error = expect_shmem_error("DEVICE_MISMATCH", shmem.put, t, torch.ones(8), (rank + 1) % size)
    assert f"device must be npu:{mine}, but got npu:{other}" in str(error), str(error)
    expect_shmem_error("DEVICE_MISMATCH", shmem.barrier)
    assert shmem.debug_state()["recent_ops"][-1:] == before  # nothing was enqueued
    torch.npu.set_device(mine)
    shmem.barrier()
    second.close()
    assert not handle.closed
    shmem.free(t)
    handle.close()
    # A tensor of an ended lifecycle is recognised in the next one.
    handle = shmem.acquire_shmem()
    try:
        expect_shmem_error("STALE_LIFECYCLE", shmem.put, t, torch.ones(8), 0)
    finally:
        handle.close()
    return True


@pytest.mark.parametrize("size", [2])
def test_lifecycle_refcounts_device_drift_and_stale_tensors(npu_pes, size):
    assert all(npu_pes(size).run(_lifecycle_and_drift))


# ---- the current stream: no host synchronisation ------------------------------------------------

def _no_host_synchronization(rank, size, rounds):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        inbox = shmem.empty(size, 64, dtype=torch.float32)
        sig32 = shmem.empty(16, dtype=torch.int32)   # 64 bytes apart: one word per line
        sig64 = shmem.empty(8, dtype=torch.int64)
        out = shmem.empty(size * 64, dtype=torch.float32)
        inbox.zero_(); sig32.zero_(); sig64.zero_()
        shmem.barrier()
        start = _syncs(shmem)
        right = (rank + 1) % size
        for step in range(1, rounds + 1):
            row = torch.arange(64, dtype=torch.float32, device=device) + 1000 * rank + step
            shmem.put(inbox[rank], row, right)
            shmem.signal(sig32[0:1], 1, right, operation="add")
            shmem.signal(sig64[0:1], -step, right, operation="set")   # the upper half staged
            shmem.signal(sig32[8:9], step, right, operation="set")
            shmem.wait_signal(sig32[0:1], step, comparison="ge")
            shmem.wait_signal(sig32[8:9], step, comparison="eq")
            shmem.barrier()
            shmem.all_gather(out, row)
        # Every call above returned without the host waiting for the NPU.
        assert _syncs(shmem) == start, (start, _syncs(shmem))
        torch.npu.current_stream().synchronize()   # torch's own wait, not the backend's
        left = (rank - 1) % size
        expected = torch.arange(64, dtype=torch.float32) + 1000 * left + rounds
        assert torch.equal(inbox[left].cpu(), expected)
        assert sig32[0].item() == rounds and sig32[8].item() == rounds
        assert sig64[0].item() == -rounds
        gathered = out.cpu().view(size, 64)
        for pe in range(size):
            assert torch.equal(gathered[pe], torch.arange(64, dtype=torch.float32) + 1000 * pe
                               + rounds), pe
        assert _syncs(shmem) == start
        shmem.free(out); shmem.free(sig64); shmem.free(sig32); shmem.free(inbox)
        return True
    finally:
        handle.close()


@pytest.mark.parametrize("size", [2, 4, 8])
def test_put_signal_wait_barrier_all_gather_enqueue_with_zero_host_synchronizations(npu_pes, size):
    assert all(npu_pes(size).run(_no_host_synchronization, 3, timeout=300))


@pytest.mark.parametrize("generation", ["v1.0"])
def test_zero_host_synchronizations_on_cann_v1_0(npu_pes, generation):
    assert all(npu_pes(2, generation).run(_no_host_synchronization, 2, timeout=300))


def _non_default_stream(rank, size):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        dst = shmem.empty(size, 256, dtype=torch.float32)
        got = torch.zeros(256, device=device)
        dst.zero_()
        shmem.barrier()
        src = torch.randn(256, generator=torch.Generator().manual_seed(rank)).to(device) * 3
        s = torch.npu.Stream()
        s.wait_stream(torch.npu.current_stream())   # src is computed on the current stream
        with torch.npu.stream(s):
            for pe in range(size):
                shmem.put(dst[rank], src, pe)
            shmem.barrier()
            shmem.get(got, dst[(rank + 1) % size], rank)
        torch.npu.current_stream().wait_stream(s)
        expected = torch.randn(256, generator=torch.Generator().manual_seed((rank + 1) % size)) * 3
        assert torch.equal(got.cpu(), expected)
        shmem.barrier()
        shmem.free(dst)
        return True
    finally:
        handle.close()


@pytest.mark.parametrize("size", [2, 4])
def test_put_get_on_a_non_default_stream_ordered_by_wait_stream(npu_pes, size):
    assert all(npu_pes(size).run(_non_default_stream))


def _wrong_stream_is_caught(rank, size):
    """The fake's streams are asynchronous: a put enqueued on a stream that does not wait for
    the stream that computes its source reads the source too early. Its current stream is held
    at a wait on this PE's own flag, so the outcome is certain."""
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        flag = shmem.empty(1, dtype=torch.int32)
        dst = shmem.empty(2, 32, dtype=torch.float32)
        flag.zero_(); dst.zero_()
        shmem.barrier()
        src = torch.zeros(32, device=device)
        current = torch.npu.current_stream()
        current.synchronize()   # src's zeros written before the stream is held below
        other, side = torch.npu.Stream(), torch.npu.Stream()
        # Unordered: the put on `other` does not wait for fill_ on the current stream, which
        # is held at a wait until the put's own stream raises the flag.
        shmem.wait_signal(flag, 1, comparison="ge")
        src.fill_(7.0)
        with torch.npu.stream(other):
            shmem.put(dst[0], src, rank)
            shmem.signal(flag, 1, rank, operation="add")
        torch.npu.synchronize()
        # Ordered: `other` waits for the current stream; a third stream releases it.
        shmem.wait_signal(flag, 2, comparison="ge")
        src.fill_(8.0)
        other.wait_stream(current)
        with torch.npu.stream(other):
            shmem.put(dst[1], src, rank)
        with torch.npu.stream(side):
            shmem.signal(flag, 1, rank, operation="add")
        torch.npu.synchronize()
        results = [dst[0].cpu().clone(), dst[1].cpu().clone()]
        shmem.barrier()
        shmem.free(dst); shmem.free(flag)
        # Unordered: the put read src before fill_ ran (zeros); ordered: fill_'s value.
        assert torch.equal(results[0], torch.zeros(32)), results[0]
        assert torch.equal(results[1], torch.full((32,), 8.0)), results[1]
        return True
    finally:
        handle.close()


def test_a_put_on_the_wrong_stream_reads_its_source_too_early(npu_pes):
    assert all(npu_pes(2).run(_wrong_stream_is_caught))


# ---- collectives ---------------------------------------------------------------------------------

def _all_gather_bytes(rank, size, byte_counts):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        for count in byte_counts:
            out = shmem.empty(max(1, size * count), dtype=torch.uint8)
            mine = ((torch.arange(count, dtype=torch.int64) * 7 + rank * 13) % 251).to(
                torch.uint8).to(device)
            shmem.all_gather(out[:size * count], mine)
            got = out[:size * count].cpu().view(size, count) if count else None
            for pe in range(size if count else 0):
                expected = ((torch.arange(count, dtype=torch.int64) * 7 + pe * 13) % 251).to(
                    torch.uint8)
                assert torch.equal(got[pe], expected), (count, pe)
            shmem.barrier()
            shmem.free(out)
        return True
    finally:
        handle.close()


@pytest.mark.parametrize("size", [2, 4])
def test_all_gather_byte_boundaries(npu_pes, size):
    counts = [0, 1, 3, 7, 63, 64, 65, 1000, 4097, (64 << 10) + 5]
    assert all(npu_pes(size).run(_all_gather_bytes, counts, timeout=300))


def _all_to_all_broadcast_reductions(rank, size):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        block = 5
        out = shmem.empty(size * block, dtype=torch.float32)
        mine = (torch.arange(size * block, dtype=torch.float32) + 100 * rank).to(device)
        start = _syncs(shmem)
        shmem.all_to_all(out, mine)
        got = out.cpu().view(size, block)
        for pe in range(size):
            expected = torch.arange(rank * block, (rank + 1) * block, dtype=torch.float32) + 100 * pe
            assert torch.equal(got[pe], expected), pe
        shmem.broadcast(out, mine, 1 % size)   # enqueued like all_gather
        assert _syncs(shmem) == start   # all_to_all and broadcast: enqueued only
        assert torch.equal(out.cpu(), torch.arange(size * block, dtype=torch.float32)
                           + 100 * (1 % size))
        # Reductions combine on the CPU through host memory on CANN (docs/backends.md):
        # they synchronise, and say so in the count.
        total = shmem.empty(size * block, dtype=torch.float32)
        shmem.all_reduce(total, mine, op="sum")
        assert _syncs(shmem) > start
        expected = sum(torch.arange(size * block, dtype=torch.float32) + 100 * pe
                       for pe in range(size))
        assert torch.equal(total.cpu(), expected)
        part = shmem.empty(block, dtype=torch.float32)
        shmem.reduce_scatter(part, mine, op="max")
        assert torch.equal(part.cpu(), torch.arange(rank * block, (rank + 1) * block,
                                                    dtype=torch.float32) + 100 * (size - 1))
        shmem.barrier()
        for t in (part, total, out):
            shmem.free(t)
        return True
    finally:
        handle.close()


@pytest.mark.parametrize("size", [2, 4])
def test_all_to_all_broadcast_and_reductions_on_npu_tensors(npu_pes, size):
    assert all(npu_pes(size).run(_all_to_all_broadcast_reductions, timeout=300))


def _mismatch_on_a_stream(rank, size):
    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        out = shmem.empty(size * 8, dtype=torch.float32)
        start = _syncs(shmem)
        if rank == 0:
            expect_shmem_error("COLLECTIVE_MISMATCH", shmem.barrier)
        else:
            expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, out,
                               torch.ones(8, device=device))
        assert _syncs(shmem) == start   # refused at the call, on the host
        shmem.all_gather(out, torch.full((8,), float(rank), device=device))
        assert torch.equal(out.cpu().view(size, 8)[:, 0], torch.arange(size, dtype=torch.float32))
        shmem.barrier()
        shmem.free(out)
        return True
    finally:
        handle.close()


def test_a_collective_mismatch_on_the_stream_fails_every_pe_at_the_call(npu_pes):
    assert all(npu_pes(2).run(_mismatch_on_a_stream))


# ---- operands of queued work -------------------------------------------------------------------

def _operands_outlive_the_call(rank, size):
    """A local operand dropped right after the call stays alive until its stream ran the put:
    `src` is freed on the current stream (which runs on) while the put waits on another."""
    import gc

    torch, shmem, handle = _start(rank)
    try:
        device = torch.device("npu", rank % torch.npu.device_count())
        flag = shmem.empty(1, dtype=torch.int32)
        dst = shmem.empty(64, dtype=torch.float32)
        flag.zero_(); dst.zero_()
        shmem.barrier()
        current, other, side = torch.npu.current_stream(), torch.npu.Stream(), torch.npu.Stream()
        other.wait_stream(current)
        with torch.npu.stream(other):
            shmem.wait_signal(flag, 1, comparison="ge")   # holds `other`
        src = torch.full((64,), 5.0, device=device)
        other.wait_stream(current)
        with torch.npu.stream(other):
            shmem.put(dst, src, rank)
        del src
        gc.collect()
        junk = torch.full((64,), -1.0, device=device)   # would take a released block
        current.synchronize()
        with torch.npu.stream(side):
            shmem.signal(flag, 1, rank, operation="add")
        other.synchronize()
        assert torch.equal(dst.cpu(), torch.full((64,), 5.0)), dst.cpu()
        del junk
        shmem.barrier()
        shmem.free(dst); shmem.free(flag)
        return True
    finally:
        handle.close()


def test_a_local_operand_stays_alive_until_its_stream_ran_the_operation(npu_pes):
    assert all(npu_pes(2).run(_operands_outlive_the_call))


def _cpu_tensors_without_torch_npu(rank, size):
    import torch
    from hyper_parallel.core.multicore import shmem

    assert "torch_npu" not in sys.modules
    with shmem.acquire_shmem():
        t = shmem.empty(8, dtype=torch.float32)
        assert t.device == torch.device("cpu"), t.device   # the fake's heap is host memory
        assert shmem.debug_state()["backend"] == "cann"
        before = shmem.debug_state()["host_synchronizations"]
        shmem.put(t, torch.full((8,), float(rank)), (rank + 1) % size)
        # Without torch_npu every call runs on a stream of the thread's own, synchronised.
        assert shmem.debug_state()["host_synchronizations"] > before
        shmem.barrier()
        assert t.tolist() == [float((rank - 1) % size)] * 8
        shmem.free(t)
    return True


def test_without_torch_npu_empty_keeps_cpu_tensors_over_a_host_heap(npu_pes):
    env = npu_pool.environment("v1.5")
    env.pop("PYTHONPATH")
    pool = PePool(2, env=env)
    try:
        assert all(pool.run(_cpu_tensors_without_torch_npu))
    finally:
        pool.close()
