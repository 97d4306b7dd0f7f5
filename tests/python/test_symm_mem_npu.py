"""torch's symm_mem API on the CANN backend's NPU tensors, on the fake NPU device
(tests/fake_npu): "HPS_NPU" chosen with set_backend, symm_mem.empty on the NPU, rendezvous, the
handle's own buffer, pad and signals, this runtime's puts into symm_mem tensors, the operators'
NPU kernels against gloo, the release and the reclaim; and examples/symm_mem_torch.py with
--device npu."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

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
        # Signals by a get and a signal on the current stream (the CANN backend has no atomics).
        hdl.put_signal((rank + 1) % size, channel=1)
        hdl.wait_signal((rank - 1) % size, channel=1)
        hdl.barrier(channel=2)
        # The operators' NPU kernels, against gloo on the same values.
        group = dist.group.WORLD.group_name
        mine = torch.arange(6 * size, dtype=torch.float32) + 10 * rank
        buf = symm_mem.empty(6 * size, dtype=torch.float32, device="npu")
        buf.copy_(mine.to("npu"))
        expected = mine.clone()
        dist.all_reduce(expected)
        assert torch.equal(torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group).cpu(),
                           expected)
        torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
        assert torch.equal(buf.cpu(), expected)
        part = torch.empty(6, dtype=torch.float32).to("npu")
        buf.copy_(mine.to("npu"))
        torch.ops.symm_mem.reduce_scatter_out(buf, group, False, part)
        assert torch.equal(part.cpu(), expected.chunk(size)[rank])
        splits = torch.tensor([(rank + j) % 3 for j in range(size)], dtype=torch.int64)
        rows = torch.arange(int(splits.sum()) * 2, dtype=torch.float32).view(-1, 2) + 100 * rank
        inp = symm_mem.empty(8 * size, 2, dtype=torch.float32, device="npu")
        inp[: rows.shape[0]] = rows.to("npu")
        out = symm_mem.empty(8 * size, 2, dtype=torch.float32, device="npu")
        in_splits = symm_mem.empty(size, dtype=torch.int64, device="npu")
        in_splits.copy_(splits.to("npu"))
        out_so = symm_mem.empty(2, size, dtype=torch.int64, device="npu")
        torch.ops.symm_mem.all_to_all_vdev(inp, out, in_splits, out_so, group)
        received = torch.zeros(size, dtype=torch.int64)
        dist.all_to_all_single(received, splits)
        reference = torch.empty(int(received.sum()), 2)
        dist.all_to_all_single(reference, rows, received.tolist(), splits.tolist())
        assert torch.equal(out_so.cpu()[0], received)
        assert torch.equal(out.cpu()[: reference.shape[0]], reference)
        del buf, part, inp, out, in_splits, out_so
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


def test_the_example_runs_on_the_fake_npu(tmp_path):
    """examples/symm_mem_torch.py, unchanged but for --device npu, on 2 PEs of the fake NPU."""
    if not npu_pool.library().is_file():
        pytest.skip(f"the fake CANN library is not built ({npu_pool.library()})")
    env = dict(os.environ, **npu_pool.environment(), HPS_TEST_FAKE_NPU="1",
               HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="60")
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "symm_mem_torch.py")
    done = subprocess.run([sys.executable, "-m", "hyper_parallel.core.multicore.shmem.launch",
                           "--nproc", "2", "--timeout", "240", os.path.abspath(example),
                           "--device", "npu"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rank in range(2):
        assert f"PE {rank}: symm_mem on HPS (npu)" in done.stdout, done.stdout
