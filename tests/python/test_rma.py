"""put / get: correctness per source PE, sub-views, and every rejection path."""

from __future__ import annotations

import pytest
import torch

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _ring(rank, size):
    with shmem.acquire_shmem():
        n = 1000
        inbox = shmem.empty(size, n, dtype=torch.int64)
        inbox.fill_(-1)
        shmem.barrier()
        mine = torch.arange(n, dtype=torch.int64, device=device()) + rank * 1_000_000
        for pe in range(size):
            shmem.put(inbox[rank], mine, pe)  # my row of every PE's inbox
        shmem.barrier()
        received = {pe: inbox[pe].cpu() for pe in range(size)}
        for pe in range(size):
            expected = torch.arange(n, dtype=torch.int64) + pe * 1_000_000
            assert torch.equal(received[pe], expected), f"row from PE {pe}"
        # get: read the next PE's row of the previous PE, the values that PE put there.
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        fetched = torch.empty(n, dtype=torch.int64, device=device())
        shmem.get(fetched, inbox[prv], nxt)
        assert torch.equal(fetched.cpu(), torch.arange(n, dtype=torch.int64) + prv * 1_000_000)
        shmem.barrier()
        shmem.free(inbox)
    return True


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_put_get_ring_over_all_pes(pes, size):
    assert all(pes(size).run(_ring))


def _sub_views(rank, size):
    with shmem.acquire_shmem():
        buffer = shmem.empty(64, dtype=torch.float32)
        buffer.zero_()
        shmem.barrier()
        peer = (rank + 1) % size
        # Odd offsets and lengths inside the allocation, put and then read back by get.
        shmem.put(buffer[3:10], torch.full((7,), 1.0 + rank, device=device()), peer)
        shmem.put(buffer.view(8, 8)[5], torch.full((8,), 2.0 + rank, device=device()), peer)
        shmem.barrier()
        prv = (rank - 1) % size
        assert buffer[3:10].tolist() == [1.0 + prv] * 7
        assert buffer[40:48].tolist() == [2.0 + prv] * 8
        assert buffer[:3].tolist() == [0.0] * 3 and buffer[10:40].eq(0).all()
        part = torch.empty(7, device=device())
        shmem.get(part, buffer[3:10], peer)
        assert part.tolist() == [1.0 + rank] * 7
        shmem.barrier()
        shmem.free(buffer)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_sub_views_at_offsets(pes, size):
    assert all(pes(size).run(_sub_views))


def _rejections(rank, size):
    with shmem.acquire_shmem():
        dev = device()
        dst = shmem.empty(4, 8, dtype=torch.float32)
        src = torch.ones(4, 8, device=dev)
        before = state_without_failure()
        cases = [
            # (code, message part, call)
            ("INVALID_ARGUMENT", "dst must be contiguous", lambda: shmem.put(dst.t(), src.t().contiguous().t(), 0)),
            ("INVALID_ARGUMENT", "src must be contiguous", lambda: shmem.put(dst.view(8, 4), src.t(), 0)),
            ("INVALID_ARGUMENT", "src byte size must be dst's byte size 128, but got 64", lambda: shmem.put(dst, torch.ones(16, device=dev), 0)),
            ("INVALID_ARGUMENT", "dst byte size must be src's byte size 128, but got 256", lambda: shmem.get(torch.ones(64, device=dev), dst, 0)),
            ("INVALID_ARGUMENT", "src dtype must be dst's dtype Float, but got Int", lambda: shmem.put(dst, torch.ones(4, 8, dtype=torch.int32, device=dev), 0)),
            ("INVALID_ARGUMENT", f"pe must be in [0, {size}), but got -1", lambda: shmem.put(dst, src, -1)),
            ("INVALID_ARGUMENT", f"pe must be in [0, {size}), but got {size}", lambda: shmem.put(dst, src, size)),
            ("INVALID_ARGUMENT", f"pe must be in [0, {size}), but got {size}", lambda: shmem.get(src, dst, size)),
            ("INVALID_ARGUMENT", "dst must be a symmetric tensor from shmem.empty", lambda: shmem.put(torch.zeros(4, 8, device=dev), src, 0)),
            ("INVALID_ARGUMENT", "src must be a symmetric tensor from shmem.empty", lambda: shmem.get(src, torch.zeros(4, 8, device=dev), 0)),
        ]
        # A view beyond its allocation cannot be built: the storage's byte size is the
        # allocation's, and torch bounds-checks views against it. (The native range check
        # behind it is covered by the C++ tests.)
        with pytest.raises(RuntimeError, match="out of bounds for storage"):
            dst.view(-1).as_strided((16,), (1,), 24)
        for code, part, call in cases:
            error = expect_shmem_error(code, call)
            assert part in str(error), (part, str(error))
            assert error.phase == "validate"
        for bad_pe, kind in ((True, "bool"), (1.0, "float"), ("1", "str"), (None, "NoneType")):
            with pytest.raises(TypeError, match=f"pe must be an int, but got {kind}"):
                shmem.put(dst, src, bad_pe)
            with pytest.raises(TypeError, match=f"pe must be an int, but got {kind}"):
                shmem.get(src, dst, bad_pe)
        with pytest.raises(TypeError, match="dst must be a torch.Tensor, but got list"):
            shmem.put([1.0], src, 0)
        assert state_without_failure() == before, "rejected calls changed nothing"
        # Zero bytes: validated, then nothing happens.
        shmem.put(dst[0, :0], torch.empty(0, device=dev), (rank + 1) % size)
        shmem.get(torch.empty(0, device=dev), dst[1, 3:3], (rank + 1) % size)
        expect_shmem_error("INVALID_ARGUMENT", shmem.put, dst[0, :0], torch.empty(0, device=dev),
                           size)
        # Still usable.
        shmem.put(dst, src, (rank + 1) % size)
        shmem.barrier()
        assert dst.eq(1).all()
        shmem.free(dst)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_put_get_rejections(pes, size):
    assert all(pes(size).run(_rejections))
