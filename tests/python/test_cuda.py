"""The package on the CUDA backend, with CUDA tensors: several PEs on GPU 0, operations queued on
torch.cuda.current_stream(), the protection chain on GPU tensors, and MegaMoE on CUDA against
the dense layer. Skipped unless torch sees a GPU and the package was built with CUDA (failed
instead where HPS_TEST_REQUIRE_CUDA=1: scripts/gpu_check.sh builds the package so, sets it and
runs this file on a GPU machine)."""

from __future__ import annotations

import os

import pytest
import torch

from helpers import expect_shmem_error
from hyper_parallel.core.multicore import shmem
from pe_pool import PePool

# HPS_TEST_REQUIRE_CUDA=1 (scripts/gpu_check.sh sets it) turns these skips into failures, so a
# GPU check cannot pass with no test run.
REQUIRE_CUDA = os.environ.get("HPS_TEST_REQUIRE_CUDA") == "1"


def _skip_or_fail(reason: str, **kwargs) -> None:
    if REQUIRE_CUDA:
        pytest.fail(f"HPS_TEST_REQUIRE_CUDA=1, but {reason}", pytrace=False)
    pytest.skip(reason, **kwargs)


if not torch.cuda.is_available():
    _skip_or_fail("no CUDA device visible to torch", allow_module_level=True)

CUDA_ENV = {"HYPER_PARALLEL_SHMEM_BACKEND": "cuda"}


def _probe(rank, size):
    """None where the CUDA backend runs here, else why not."""
    torch.cuda.set_device(0)
    try:
        with shmem.acquire_shmem():
            return None
    except shmem.ShmemError as error:
        if error.error_code != "UNSUPPORTED_CAPABILITY":
            raise
        return str(error)


@pytest.fixture(scope="module")
def cuda_pes():
    pools: dict = {}

    def get(size: int) -> PePool:
        if size not in pools:
            pools[size] = PePool(size, env=CUDA_ENV)
        return pools[size]

    why = get(1).run(_probe)[0]
    if why is not None:
        for pool in pools.values():
            pool.close()
        _skip_or_fail(f"the CUDA backend cannot run here: {why}")
    yield get
    for pool in pools.values():
        pool.close()


def _rma_signals_and_streams(rank, size):
    torch.cuda.set_device(0)
    with shmem.acquire_shmem():
        state = shmem.debug_state()
        assert state["backend"] == "cuda" and state["device"] == "cuda:0", state
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        inbox = shmem.empty(size, 1000, dtype=torch.int64)
        flag = shmem.empty(1, dtype=torch.int64)
        assert inbox.device == torch.device("cuda", 0) and flag.is_cuda
        inbox.fill_(-1)
        flag.zero_()
        shmem.barrier()  # every PE's buffers are initialised before any peer writes
        mine = torch.arange(1000, dtype=torch.int64, device="cuda") + rank * 1_000_000
        shmem.put(inbox[rank], mine, nxt)                        # from GPU memory
        shmem.signal(flag, 1, nxt, operation="add")              # after the put, in stream order
        shmem.wait_signal(flag, 1, comparison="ge")              # queued on the current stream
        got = inbox[prv].clone()                                 # runs after the wait
        assert torch.equal(got.cpu(), torch.arange(1000) + prv * 1_000_000)
        # A CPU source and destination work too (the copy engine reads host memory).
        shmem.barrier()
        shmem.put(inbox[rank], torch.full((1000,), 7 + rank, dtype=torch.int64), nxt)
        shmem.barrier()
        assert inbox[prv].eq(7 + prv).all().item()
        back = torch.empty(1000, dtype=torch.int64)
        shmem.get(back, inbox[rank], nxt)
        torch.cuda.current_stream().synchronize()
        assert back.eq(7 + rank).all().item()
        # Work queued on a side stream stays on it: the put and its signal run there.
        side = torch.cuda.Stream()
        shmem.barrier()
        with torch.cuda.stream(side):
            shmem.put(inbox[rank], mine * 2, nxt)
            shmem.signal(flag, 1, nxt, operation="add")
            shmem.wait_signal(flag, 2, comparison="ge")
            doubled = inbox[prv].clone()
        side.synchronize()
        assert torch.equal(doubled.cpu(), (torch.arange(1000) + prv * 1_000_000) * 2)
        # all_gather from GPU memory.
        gathered = shmem.empty(size * 16, dtype=torch.float32)
        shmem.all_gather(gathered, torch.full((16,), float(rank), device="cuda"))
        torch.cuda.current_stream().synchronize()
        assert torch.equal(gathered.cpu(), torch.arange(size).float().repeat_interleave(16))
        shmem.barrier()
        for tensor in (gathered, flag, inbox):
            shmem.free(tensor)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_cuda_tensors_on_one_gpu_rma_signals_streams_all_gather(cuda_pes, size):
    assert all(cuda_pes(size).run(_rma_signals_and_streams, timeout=300))


def _protection_chain(rank, size):
    torch.cuda.set_device(0)
    with shmem.acquire_shmem():
        t = shmem.empty(256, dtype=torch.float32)
        expect_shmem_error("INVALID_ARGUMENT", shmem.free, t[8:])  # a view frees nothing
        live = [entry["id"] for entry in shmem.debug_state()["live_allocations"]]
        assert len(live) == 1, live
        shmem.free(t)
        expect_shmem_error("DOUBLE_FREE", shmem.free, t)
        expect_shmem_error("USE_AFTER_FREE", shmem.put, t, torch.zeros(256, device="cuda"),
                           (rank + 1) % size)
        with pytest.raises(RuntimeError, match="USE_AFTER_FREE"):
            t.add_(1)  # torch itself refuses the freed storage
        assert shmem.debug_state()["live_allocations"] == []
        # A CPU tensor is not on the runtime's device.
        other = shmem.empty(4, dtype=torch.float32)
        expect_shmem_error("INVALID_ARGUMENT", shmem.put, torch.zeros(4), other, 0)
        shmem.barrier()
        shmem.free(other)
    return True


def test_the_protection_chain_on_gpu_tensors(cuda_pes):
    assert all(cuda_pes(2).run(_protection_chain, timeout=300))


def _mega_moe_on_cuda(rank, size):
    from hyper_parallel.core.multicore.mega_moe import MegaMoE, dense_moe

    torch.cuda.set_device(0)
    torch.manual_seed(7)
    H, I, experts, k = 32, 48, 2 * size, 2
    layer = MegaMoE(H, I, experts, k, shared_intermediate_size=16)
    try:
        dense = {name: value.cuda() for name, value in layer.dense_weights().items()}
        layer.cuda()
        x = torch.randn(37, H, generator=torch.Generator().manual_seed(rank)).cuda()
        x.requires_grad_(True)
        y = layer(x)
        y.sum().backward()
        xr = x.detach().clone().requires_grad_(True)
        expected = dense_moe(xr, dense["router"], dense["gate_proj"], dense["up_proj"],
                             dense["down_proj"], k, shared_gate_proj=dense["shared_gate_proj"],
                             shared_up_proj=dense["shared_up_proj"],
                             shared_down_proj=dense["shared_down_proj"])
        expected.sum().backward()
        assert torch.allclose(y, expected, rtol=1e-4, atol=1e-5), (y - expected).abs().max()
        assert torch.allclose(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    finally:
        layer.close()
    return True


def test_mega_moe_on_cuda_matches_the_dense_layer(cuda_pes):
    assert all(cuda_pes(2).run(_mega_moe_on_cuda, timeout=300))
