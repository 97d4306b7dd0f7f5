"""shmem.empty: sizes, dtypes, alignment, exhaustion, zero-sized requests, consistency."""

from __future__ import annotations

import pytest
import torch

from helpers import device, expect_shmem_error, heap_range, state_without_failure
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.complex64]


def _argument_mistakes(rank, size):
    with shmem.acquire_shmem():
        before = state_without_failure()
        cases = [
            (TypeError, "size must be a sequence of ints, but got float 1.5", (1.5,), {}),
            (TypeError, "size must be a sequence of ints, but got bool True", (True,), {}),
            (TypeError, "size must be a sequence of ints, but got str", ("4",), {}),
            (ValueError, "size must be non-negative, but got -1", (-1,), {}),
            (ValueError, "size must be non-negative, but got -3", ((2, -3),), {}),
            (TypeError, "dtype must be a torch.dtype or None, but got str", (4,), {"dtype": "float"}),
            (TypeError, "alignment must be an int, but got bool True", (4,), {"alignment": True}),
            (TypeError, "alignment must be an int, but got float", (4,), {"alignment": 64.0}),
            (ValueError, "alignment must be a positive power of two, but got 0", (4,),
             {"alignment": 0}),
            (ValueError, "alignment must be a positive power of two, but got -8", (4,),
             {"alignment": -8}),
        ]
        for error_type, message, args, kwargs in cases:
            with pytest.raises(error_type) as caught:
                shmem.empty(*args, **kwargs)
            assert message in str(caught.value), (message, str(caught.value))
        # Not a power of two, or beyond the largest alignment: native, on every PE alike.
        for alignment in (3, 48, 1 << 22):
            error = expect_shmem_error("INVALID_ARGUMENT", shmem.empty, 4, alignment=alignment)
            assert "alignment must be a power of two no greater than 2097152" in str(error)
            assert error.operation == "empty"
        assert state_without_failure() == before, "rejected calls changed the heap"
        t = shmem.empty(4)  # the process is still usable
        shmem.free(t)
    return True


def test_argument_mistakes_are_rejected_and_change_nothing(pes):
    assert all(pes(2).run(_argument_mistakes))


def _every_dtype(rank, size):
    with shmem.acquire_shmem():
        low, high = heap_range()
        tensors = []
        for dtype in DTYPES:
            t = shmem.empty(3, 5, dtype=dtype)
            assert t.shape == (3, 5) and t.dtype == dtype and t.device == device()
            assert t.is_contiguous()
            assert low <= t.data_ptr() < high, "inside the symmetric heap"
            assert t.data_ptr() % 64 == 0
            tensors.append(t)
        default = shmem.empty(2)
        assert default.dtype == torch.get_default_dtype()
        tensors.append(default)
        by_tuple = shmem.empty((2, 3), dtype=torch.int32)
        by_size = shmem.empty(torch.Size([2, 3]), dtype=torch.int32)
        by_list = shmem.empty([2, 3], dtype=torch.int32)
        assert by_tuple.shape == by_size.shape == by_list.shape == (2, 3)
        tensors += [by_tuple, by_size, by_list]
        # Symmetric: the same offsets on every PE.
        offsets = [t.data_ptr() - low for t in tensors]
        for t in tensors:
            shmem.free(t)
        return offsets


@pytest.mark.parametrize("size", [1, 2, 4])
def test_every_dtype_and_symmetric_offsets(pes, size):
    offsets = pes(size).run(_every_dtype)
    assert all(o == offsets[0] for o in offsets)


def _alignment_is_honoured(rank, size):
    with shmem.acquire_shmem():
        small = shmem.empty(1, dtype=torch.uint8)
        aligned = [shmem.empty(7, dtype=torch.uint8, alignment=a) for a in (1, 128, 4096, 1 << 21)]
        for t, alignment in zip(aligned, (1, 128, 4096, 1 << 21)):
            assert t.data_ptr() % alignment == 0, (alignment, hex(t.data_ptr()))
        state = shmem.debug_state()
        assert [a["alignment"] for a in state["live_allocations"]] == [64, 1, 128, 4096, 1 << 21]
        for t in [small] + aligned:
            shmem.free(t)
    return True


def test_alignment_is_honoured(pes):
    assert all(pes(2).run(_alignment_is_honoured))


def _exhaustion(rank, size):
    import os
    os.environ["HYPER_PARALLEL_SHMEM_HEAP_SIZE"] = str(1 << 20)
    with shmem.acquire_shmem():
        kept = shmem.empty(600 * 1024, dtype=torch.uint8)
        before = state_without_failure()
        error = expect_shmem_error("OUT_OF_MEMORY", shmem.empty, 600 * 1024, dtype=torch.uint8)
        message = str(error)
        assert "symmetric heap exhausted: requested_bytes=614400" in message, message
        assert "heap_bytes=1048576" in message and "allocated_bytes=614400" in message, message
        assert "remaining_bytes=434176" in message, message
        assert state_without_failure() == before
        assert shmem.debug_state()["latest_failure"] == message
        shmem.free(kept)
        again = shmem.empty(600 * 1024, dtype=torch.uint8)  # fits again once freed
        shmem.free(again)
    return True


def test_heap_exhaustion_reports_usage(pes):
    assert all(pes(2).run(_exhaustion))


def _zero_sized(rank, size):
    with shmem.acquire_shmem():
        empty_1d = shmem.empty(0, dtype=torch.float32)
        empty_2d = shmem.empty(2, 0, dtype=torch.int64)
        assert empty_1d.numel() == 0 and empty_2d.shape == (2, 0)
        live = shmem.debug_state()["live_allocations"]
        assert [a["bytes"] for a in live] == [0, 0], "zero-sized requests are real allocations"
        assert live[0]["base"] != live[1]["base"], "each with its own base"
        assert shmem.debug_state()["heap"]["allocated"] == 128, "one 64-byte granule each"
        # Zero bytes: a validated no-op.
        shmem.put(empty_1d, torch.empty(0, device=device()), (rank + 1) % size)
        shmem.get(torch.empty(0, device=device()), empty_1d, (rank + 1) % size)
        shmem.free(empty_1d)
        shmem.free(empty_2d)
        assert shmem.debug_state()["heap"]["allocated"] == 0
    return True


def test_zero_sized_requests(pes):
    assert all(pes(2).run(_zero_sized))


def _mismatched_sizes(rank, size):
    with shmem.acquire_shmem():
        before = state_without_failure()
        error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.empty, 16 + (rank == size - 1))
        message = str(error)
        assert (f"collective calls differ across PEs (allocation bytes: 64 on PE"
                in message and f"68 on PE {size - 1}): sequence=1, field=bytes" in message), message
        assert "pe 0: empty #1 bytes=64 alignment=64 offset=0x0" in message, message
        assert f"pe {size - 1}: empty #1 bytes=68 alignment=64 offset=0x0" in message, message
        after = state_without_failure()
        assert shmem.debug_state()["collectives"]["sequence"] == 1, "every PE used number 1"
        after.pop("collectives")
        before.pop("collectives")
        # The world team's row counts the same collective.
        assert [team["sequence"] for team in shmem.debug_state()["teams"]] == [1]
        after.pop("teams")
        before.pop("teams")
        assert after == before, "nothing allocated on any PE"
        ok = shmem.empty(16)
        shmem.free(ok)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_disagreeing_sizes_fail_on_every_pe(pes, size):
    assert all(pes(size).run(_mismatched_sizes))
