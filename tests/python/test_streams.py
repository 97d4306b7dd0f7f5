"""Host streams and events: enqueue semantics, ordering across streams, overlap with compute."""

from __future__ import annotations

import gc
import os

import pytest
import torch

from helpers import expect_shmem_error
from hyper_parallel.core.multicore import shmem

MIB = 1 << 20


def _ordering_with_events(rank, size):
    with shmem.acquire_shmem():
        n = 2 * MIB // 4
        inbox = shmem.empty(n, dtype=torch.int32)
        flags = shmem.empty(2, dtype=torch.int64)
        flags.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        copy_stream, signal_stream = shmem.Stream(), shmem.Stream()
        assert shmem.current_stream().is_default
        copied = shmem.Event()
        payload = torch.full((n,), rank, dtype=torch.int32)
        with shmem.stream(copy_stream) as active:
            assert active is copy_stream and shmem.current_stream() is copy_stream
            shmem.put(inbox, payload, nxt)
            copied.record()
            shmem.signal(flags[0], 1, nxt)  # same stream: after the put
        assert shmem.current_stream().is_default
        with shmem.stream(signal_stream):
            copied.wait()  # the signal stream waits for the copy stream's put
            shmem.signal(flags[1], 1, nxt)
        shmem.wait_signal(flags[0], 1)
        shmem.wait_signal(flags[1], 1)
        assert inbox.eq(prv).all(), "data ordered before both signals"
        copied.synchronize()
        assert copied.query()
        shmem.synchronize()
        assert copy_stream.query() and signal_stream.query()
        shmem.barrier()
        shmem.free(flags)
        shmem.free(inbox)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_ordering_on_host_streams_with_events(pes, size):
    assert all(pes(size).run(_ordering_with_events))


def _overlap_with_compute(rank, size):
    with shmem.acquire_shmem():
        n = 8 * MIB // 4
        inbox = shmem.empty(n, dtype=torch.float32)
        gate = shmem.empty(1, dtype=torch.int64)
        gate.zero_()
        inbox.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        comm = shmem.Stream()
        done = shmem.Event()
        with shmem.stream(comm):
            shmem.wait_signal(gate, 1)  # holds the stream until the caller opens the gate
            shmem.put(inbox, torch.full((n,), float(rank)), nxt)  # temporary src: kept alive
            done.record()
        gc.collect()
        # The calls returned while the put is still pending: compute meanwhile.
        assert not done.query() and not comm.query()
        a = torch.randn(256, 256)
        product = a @ a
        assert product.shape == (256, 256)
        assert not done.query(), "nothing ran before the gate opened"
        shmem.signal(gate, 1, rank)  # default stream: runs now, releases the queued work
        done.synchronize()
        assert done.query()
        shmem.barrier()
        assert inbox.eq(float(prv)).all()
        shmem.barrier()
        shmem.free(gate)
        shmem.free(inbox)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_overlap_with_compute_on_the_caller(pes, size):
    assert all(pes(size).run(_overlap_with_compute))


def _queued_failure_surfaces(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"] = "2"
    with shmem.acquire_shmem():
        flag = shmem.empty(1, dtype=torch.int32)
        flag.zero_()
        s = shmem.Stream()
        after = shmem.Event()
        with shmem.stream(s):
            shmem.wait_signal(flag, 5)  # nobody sets it: fails after the timeout
            after.record()
        error = expect_shmem_error("TIMEOUT", s.synchronize)
        assert error.operation == "wait_signal", str(error)
        expect_shmem_error("TIMEOUT", after.synchronize)  # the event carries it
        s.synchronize()  # reported once; the stream works again
        with shmem.stream(s):
            shmem.signal(flag, 5, rank)
            shmem.wait_signal(flag, 5)
        s.synchronize()
        shmem.barrier()
        shmem.free(flag)
    return True


def test_failure_of_queued_work_surfaces_at_synchronize(pes):
    assert all(pes(2).run(_queued_failure_surfaces))


def test_stream_argument_types():
    with pytest.raises(TypeError, match="stream must be a shmem.Stream or None, but got str"):
        with shmem.stream("s"):
            pass
    assert shmem.current_stream().is_default
    with shmem.stream(None) as current:
        assert current.is_default
    event = shmem.Event()
    assert event.query()  # never recorded
    with pytest.raises(TypeError, match="stream must be a shmem.Stream or None"):
        event.record(3)
    s = shmem.Stream()
    assert s.query() and "Stream(id=" in repr(s)
    s.synchronize()
