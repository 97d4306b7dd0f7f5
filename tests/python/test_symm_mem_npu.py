"""torch's symm_mem API on the CANN backend's NPU tensors, on the fake NPU device
(tests/fake_npu): "HPS_NPU" chosen with set_backend, symm_mem.empty on the NPU, rendezvous, the
handle's own buffer and pad, this runtime's puts into symm_mem tensors, the release and the
reclaim, and what is not there yet (the handle's signals need atomics the CANN backend lacks)."""

from __future__ import annotations

import gc

import pytest

import npu_pool
from pe_pool import use_fake_npu


@pytest.fixture(scope="module")
def npu_pes():
    yield from npu_pool.pools()


def _npu_symm_mem(rank, size):
    use_fake_npu(rank)
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from hyper_parallel.core.multicore import shmem

    torch.set_num_threads(1)
    try:
        assert symm_mem.get_backend("npu") != "HPS_NPU"  # torch_npu's stays until chosen
        symm_mem.set_backend("HPS_NPU")
        t = symm_mem.empty(64, dtype=torch.float32, device="npu")
        assert t.device.type == "npu"
        t.fill_(rank + 1)
        hdl = symm_mem.rendezvous(t, dist.group.WORLD)
        assert hdl.rank == rank and hdl.world_size == size and hdl.device.type == "npu"
        assert hdl.buffer_ptrs[rank] == t.data_ptr()
        assert all(p == 0 for r, p in enumerate(hdl.buffer_ptrs) if r != rank)
        assert torch.equal(hdl.get_buffer(rank, (64,), torch.float32).cpu(),
                           torch.full((64,), float(rank + 1)))
        assert int(hdl.get_signal_pad(rank).cpu().sum()) == 0
        with pytest.raises(RuntimeError, match="across nodes"):
            hdl.get_buffer((rank + 1) % size, (64,), torch.float32)
        # This runtime's primitives take symm_mem tensors: a put into the next rank's.
        source = torch.full((64,), float(100 + rank)).to("npu")
        shmem.put(t, source, pe=(rank + 1) % size)
        shmem.barrier()
        assert torch.equal(t.cpu(), torch.full((64,), float(100 + (rank - 1) % size)))
        with pytest.raises(shmem.ShmemError, match="UNSUPPORTED_CAPABILITY"):
            hdl.put_signal((rank + 1) % size)
        # A CPU allocation over the NPU heap is refused, naming the way.
        with pytest.raises(shmem.ShmemError, match="HPS_NPU"):
            symm_mem.empty(4, dtype=torch.float32, device="cpu")
        shmem.barrier()
        del t, hdl, source
        gc.collect()
        # The put's queued work holds t until the stream ran it; the next allocation drains
        # the streams, and the reclaim there gives t's memory back.
        again = symm_mem.empty(8, dtype=torch.float32, device="npu")
        state = shmem.debug_state()
        assert state["released"] == [] and len(state["live_allocations"]) == 1, state
        del again
    finally:
        gc.collect()
        shmem.symm_mem_shutdown()
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_symm_mem_on_npu_tensors(npu_pes, size):
    assert all(npu_pes(size).run(_npu_symm_mem))
