"""shmem.free: the whole allocation only, and nothing usable afterwards."""

from __future__ import annotations

import os

import pytest
import torch

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _views_and_foreign_tensors(rank, size):
    with shmem.acquire_shmem():
        t = shmem.empty(4, 6, dtype=torch.float32)
        before = state_without_failure()
        for view in (t.view(24), t[1:], t[:, :3], t.view(6, 4), t.reshape(2, 12), t.t(), t[0]):
            error = expect_shmem_error("INVALID_ARGUMENT", shmem.free, view)
            assert "freed tensor must be the tensor shmem.empty returned" in str(error), str(error)
        error = expect_shmem_error("INVALID_ARGUMENT", shmem.free,
                                   torch.zeros(4, 6, device=device()))
        assert "tensor must be a symmetric tensor from shmem.empty" in str(error)
        with pytest.raises(TypeError, match="tensor must be a torch.Tensor, but got list"):
            shmem.free([1, 2])
        assert state_without_failure() == before, "no rejected free changed anything"
        flat = t.view(24)
        shmem.free(t)
        error = expect_shmem_error("DOUBLE_FREE", shmem.free, t)
        assert "allocation was already freed" in str(error)
        expect_shmem_error("DOUBLE_FREE", shmem.free, flat)  # a view of the freed allocation
    return True


def test_free_rejects_views_slices_and_foreign_tensors(pes):
    assert all(pes(2).run(_views_and_foreign_tensors))


def _double_free_after_address_reuse(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES"] = "0"  # reuse the block at once
    with shmem.acquire_shmem():
        first = shmem.empty(256, dtype=torch.uint8)
        address = first.data_ptr()
        shmem.free(first)
        second = shmem.empty(256, dtype=torch.uint8)
        assert second.data_ptr() == address, "best fit hands the same block out again"
        second.fill_(7)
        expect_shmem_error("DOUBLE_FREE", shmem.free, first)
        expect_shmem_error("USE_AFTER_FREE", shmem.put, first,
                           torch.zeros(256, dtype=torch.uint8, device=device()), 0)
        assert second.eq(7).all(), "the stale tensor did not touch the new owner"
        assert len(shmem.debug_state()["live_allocations"]) == 1
        shmem.free(second)
    return True


def test_double_free_after_address_reuse_leaves_the_new_owner_alone(pes):
    assert all(pes(2).run(_double_free_after_address_reuse))


def _freed_tensor_raises_everywhere(rank, size):
    with shmem.acquire_shmem():
        t = shmem.empty(8, dtype=torch.float32)
        t.fill_(1.0)
        view = t[2:6]
        reshaped = t.view(2, 4)
        shmem.free(t)
        with pytest.raises(RuntimeError, match="tensor was freed by shmem.free"):
            t.data_ptr()
        with pytest.raises(RuntimeError, match="tensor was freed by shmem.free"):
            t.untyped_storage().data_ptr()
        plain_ops = [
            lambda x: x.sum(), lambda x: x.add_(1), lambda x: x.clone(), lambda x: repr(x),
            lambda x: x.tolist(), lambda x: x.flatten()[0].item(), lambda x: x.fill_(0),
            lambda x: torch.zeros_like(x).copy_(x), lambda x: x.copy_(torch.zeros_like(x)),
            lambda x: x * 2, lambda x: print(x), lambda x: str(x), lambda x: x[1] + 1,
            lambda x: x[1:3].sum(), lambda x: x.reshape(-1)[-1].item(),
            lambda x: x.flip(0), lambda x: x.untyped_storage()[0],
            lambda x: x.to(torch.float64), lambda x: x.contiguous().view(torch.int32).sum(),
            lambda x: torch.cat([x, x]), lambda x: bool(x.any()), lambda x: x[x > 0],
        ]
        # Every data access names the free, views built after it included (indexing and
        # print slice the tensor first): never a read of freed memory, never torch's
        # "out of bounds for storage" (the storage keeps its byte size, without its memory).
        freed = "tensor was freed by shmem.free"
        for tensor in (t, view, reshaped):
            for op in plain_ops:
                with pytest.raises(RuntimeError, match=freed):
                    op(tensor)
        peer = (rank + 1) % size
        dev = device()
        for tensor in (t, view, reshaped):
            expect_shmem_error("USE_AFTER_FREE", shmem.put, tensor,
                               torch.zeros(tensor.shape, device=dev), peer)
            expect_shmem_error("USE_AFTER_FREE", shmem.get,
                               torch.zeros(tensor.shape, device=dev), tensor, peer)
        target = shmem.empty(8, dtype=torch.float32)
        expect_shmem_error("USE_AFTER_FREE", shmem.put, target, t, peer)  # freed local source
        expect_shmem_error("USE_AFTER_FREE", shmem.get, t, target, peer)  # freed local destination
        sig = shmem.empty(1, dtype=torch.int64)
        shmem.free(sig)
        expect_shmem_error("USE_AFTER_FREE", shmem.signal, sig, 1, peer)
        expect_shmem_error("USE_AFTER_FREE", shmem.wait_signal, sig, 1)
        # The process lives on and the runtime still works.
        shmem.put(target, torch.full((8,), float(rank), device=dev), peer)
        shmem.barrier()
        assert target.tolist() == [float((rank - 1) % size)] * 8
        shmem.free(target)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_freed_tensor_and_views_raise_on_every_use(pes, size):
    assert all(pes(size).run(_freed_tensor_raises_everywhere))
