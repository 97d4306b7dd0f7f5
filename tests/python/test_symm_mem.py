"""torch's symmetric-memory API (torch.distributed._symmetric_memory) on this runtime, on CPU
processes: the registration, symm_mem.empty's collective rule, rendezvous (WORLD and a
subgroup), the handle's methods with torch's semantics, every operator bitwise against gloo's
equivalent (or torch's own fallback), the release and the agreed reclaim, bad input keeping
the PEs in step, and torch.compile over all_to_all_vdev_2d."""

from __future__ import annotations

import functools
import gc

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch._C._autograd import DeviceType
from torch._C._distributed_c10d import _SymmetricMemory

from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.host_only("torch's symm_mem on the CPU: the NPU has its own tests")

DTYPES = [torch.float32, torch.bfloat16, torch.int64]


def symm_session(fn):
    """Runs a PE function, then ends its use of symm_mem (collective), its tensors dropped."""

    @functools.wraps(fn)
    def wrapped(rank, size, *args, **kwargs):
        torch.set_num_threads(1)
        try:
            return fn(rank, size, *args, **kwargs)
        finally:
            gc.collect()
            shmem.symm_mem_shutdown()

    return wrapped


def _group() -> str:
    return dist.group.WORLD.group_name


def _rows(seed: int, rows: int, width: int, dtype: torch.dtype) -> torch.Tensor:
    """Small integers, exact in every dtype here and in sums of four."""
    values = (torch.arange(rows * width, dtype=torch.int64) * 7 + seed * 13) % 29
    return values.view(rows, width).to(dtype)


def _splits(rank: int, count: int, call: int, zero_every: int = 3) -> list:
    """Splits with zeros among them, distinct per rank and call."""
    return [0 if (i + rank + call) % zero_every == 0 else (i * 5 + rank * 3 + call) % 7 + 1
            for i in range(count)]


# ---- registration and allocation ---------------------------------------------------------


@symm_session
def _registration(rank, size):
    assert symm_mem.get_backend("cpu") == "HPS"
    t = symm_mem.empty(8, dtype=torch.float32, device="cpu")
    assert _SymmetricMemory.is_symm_mem_tensor(t)
    assert not _SymmetricMemory.is_symm_mem_tensor(torch.empty(8))
    assert shmem.debug_state()["state"] == "ready"  # the first empty acquired the runtime
    return True


def test_importing_registers_hps_for_the_cpu(pes):
    assert all(pes(2).run(_registration))


@symm_session
def _disagreeing_sizes(rank, size):
    error = None
    try:
        symm_mem.empty(16 if rank == 0 else 32, dtype=torch.float32, device="cpu")
    except Exception as caught:  # noqa: BLE001 (torch's binding picks the class)
        error = str(caught)
    assert error is not None and "COLLECTIVE_MISMATCH" in error, error
    assert "collective on this backend" in error, error
    # In step afterwards: the next allocation pairs.
    t = symm_mem.empty(4, dtype=torch.float32, device="cpu")
    del t
    return True


def test_empty_is_collective_and_names_the_rule_when_ranks_disagree(pes):
    assert all(pes(2).run(_disagreeing_sizes))


# ---- the handle ---------------------------------------------------------------------------


@symm_session
def _handle(rank, size):
    t = symm_mem.empty(64, dtype=torch.float32, device="cpu").fill_(rank + 1)
    hdl = symm_mem.rendezvous(t, dist.group.WORLD)
    assert symm_mem.rendezvous(t, _group()) is not None
    assert hdl.rank == rank and hdl.world_size == size
    assert hdl.device == torch.device("cpu") and hdl.buffer_size == 64 * 4 and hdl.offset == 0
    assert len(hdl.buffer_ptrs) == size and hdl.buffer_ptrs[rank] == t.data_ptr()
    assert all(p != 0 for p in hdl.signal_pad_ptrs)  # every peer is on this host
    assert not _SymmetricMemory.has_multicast_support(DeviceType.CPU, 0)
    assert hdl.signal_pad_size == symm_mem.get_signal_pad_size()
    hdl.barrier(channel=0)
    for peer in range(size):
        assert torch.equal(hdl.get_buffer(peer, (64,), torch.float32),
                           torch.full((64,), float(peer + 1)))
    # get_buffer with a storage offset, and past the end (torch's own check).
    assert torch.equal(hdl.get_buffer((rank + 1) % size, (8,), torch.float32, 56),
                       torch.full((8,), float((rank + 1) % size + 1)))
    with pytest.raises(RuntimeError, match="exceeds the allocated size"):
        hdl.get_buffer(0, (65,), torch.float32)
    # Signal pads: zero after every synchronisation, as torch's note asks.
    hdl.barrier(channel=1)
    shmem.barrier()  # nobody signals again until every rank has looked at its pad
    assert int(hdl.get_signal_pad(rank).sum()) == 0
    shmem.barrier()
    # put_signal / wait_signal: a ring, on two channels that do not see each other's signals.
    right, left = (rank + 1) % size, (rank - 1) % size
    hdl.put_signal(right, channel=2)
    hdl.put_signal(right, channel=3)
    hdl.wait_signal(left, channel=3)
    hdl.wait_signal(left, channel=2)
    hdl.barrier()
    shmem.barrier()
    assert int(hdl.get_signal_pad(rank).sum()) == 0
    shmem.barrier()
    # A peer's write through get_buffer is seen after a barrier.
    hdl.get_buffer(right, (1,), torch.float32, rank).fill_(100 + rank)
    hdl.barrier()
    assert float(t[left]) == 100 + left
    hdl.barrier()
    return True


@pytest.mark.parametrize("size", [2, 3, 4])
def test_handle_methods_follow_torch(pes, size):
    assert all(pes(size).run(_handle))


@symm_session
def _timeouts(rank, size):
    t = symm_mem.empty(4, dtype=torch.float32, device="cpu")
    hdl = symm_mem.rendezvous(t, _group())
    if rank == 0:
        # Nobody signals channel 5: bounded, the project's TIMEOUT shape naming channel and peer.
        with pytest.raises(Exception, match=r"error_code=TIMEOUT.*channel=5.*peer=1"):
            hdl.wait_signal(1, channel=5, timeout_ms=200)
        # The slot still holds the first signal: the second put_signal times out.
        hdl.put_signal(1, channel=6)
        with pytest.raises(Exception, match=r"error_code=TIMEOUT.*channel=6.*peer=1"):
            hdl.put_signal(1, channel=6, timeout_ms=200)
    hdl.barrier(channel=0)
    if rank == 1:
        hdl.wait_signal(0, channel=6)
    with pytest.raises(Exception, match="channel must be 0 to"):
        hdl.put_signal(1 - rank, channel=1 << 20)
    hdl.barrier(channel=0)
    return True


def test_signals_are_bounded_and_name_channel_and_peer(pes):
    assert all(pes(2).run(_timeouts))


@symm_session
def _memset_and_write(rank, size):
    t = symm_mem.empty(16, dtype=torch.uint32, device="cpu")
    t.zero_()
    _SymmetricMemory.memset32(t, offset=2, val=7, count=3)
    _SymmetricMemory.stream_write_value32(t, offset=10, val=9)
    expected = torch.zeros(16, dtype=torch.int64)
    expected[2:5] = 7
    expected[10] = 9
    assert torch.equal(t.to(torch.int64), expected)
    with pytest.raises(RuntimeError, match="exceeds the number of elements"):
        _SymmetricMemory.memset32(t, offset=15, val=1, count=2)
    with pytest.raises(RuntimeError, match="no multicast"):
        torch.ops.symm_mem.multimem_all_reduce_(t.float(), "sum", _group())
    return True


def test_memset32_stream_write_value32_and_no_multicast(pes):
    assert all(pes(2).run(_memset_and_write))


# ---- the all_to_all_vdev family -----------------------------------------------------------


@symm_session
def _vdev(rank, size, dtype, width):
    group = _group()
    capacity = 8 * size
    for call in range(3):
        in_splits_list = _splits(rank, size, call)
        out_splits_list = torch.zeros(size, dtype=torch.int64)
        dist.all_to_all_single(out_splits_list, torch.tensor(in_splits_list))
        inp = symm_mem.empty(capacity, width, dtype=dtype, device="cpu")
        inp.copy_(_rows(rank + call, capacity, width, dtype))
        out = symm_mem.empty(capacity * size, width, dtype=dtype, device="cpu").fill_(-1)
        in_splits = symm_mem.empty(size, dtype=torch.int64, device="cpu")
        in_splits.copy_(torch.tensor(in_splits_list))
        out_so = symm_mem.empty(2, size, dtype=torch.int64, device="cpu")
        torch.ops.symm_mem.all_to_all_vdev(inp, out, in_splits, out_so, group)
        assert torch.equal(out_so[0], out_splits_list)
        offsets = torch.cumsum(out_splits_list, 0) - out_splits_list
        assert torch.equal(out_so[1], offsets)
        received = int(out_splits_list.sum())
        expected = torch.empty(received, width, dtype=dtype)
        sent = sum(in_splits_list)
        dist.all_to_all_single(expected, inp[:sent].clone(), out_splits_list.tolist(),
                               in_splits_list)
        assert torch.equal(out[:received], expected), (call, dtype)
        assert bool((out[received:] == -1).all()), "nothing written past the received rows"
    return True


@symm_session
def _vdev_dtypes(rank, size):
    return all(_vdev.__wrapped__(rank, size, dtype, 3) for dtype in DTYPES)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_all_to_all_vdev_equals_gloo(pes, size):
    assert all(pes(size).run(_vdev_dtypes))


@symm_session
def _vdev_2d(rank, size, dtype, align, experts):
    group = _group()
    nsplits = experts * size
    capacity = 8 * nsplits
    results = []
    for call in range(2):
        in_list = _splits(rank, nsplits, call)
        inp = symm_mem.empty(capacity, 2, dtype=dtype, device="cpu")
        inp.copy_(_rows(rank * 3 + call, capacity, 2, dtype))
        out = symm_mem.empty(capacity * size + align * experts, 2, dtype=dtype,
                             device="cpu").fill_(-1)
        in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device="cpu")
        in_splits.copy_(torch.tensor(in_list))
        out_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu").fill_(-1)
        torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_so, group,
                                              major_align=align)
        # The splits: gloo's exchange, transposed to expert-major order.
        out_splits = torch.zeros(nsplits, dtype=torch.int64)
        dist.all_to_all_single(out_splits, torch.tensor(in_list))
        by_expert = out_splits.view(size, experts).t()
        assert torch.equal(out_so[0], by_expert.reshape(-1))
        # The offsets: each expert's block up-aligned (at least `align`), the last source
        # absorbing the padding.
        padded = by_expert.clone()
        for e in range(experts):
            total = int(by_expert[e].sum())
            padded[e, -1] += max((total + align - 1) // align * align, align) - total
        flat = padded.reshape(-1)
        assert torch.equal(out_so[1], torch.cumsum(flat, 0) - flat)
        # The data: gloo's all_to_all_single of whole rank blocks, regrouped by expert.
        sent = torch.tensor(in_list).view(size, experts).sum(1)
        got = out_splits.view(size, experts).sum(1)
        expected = torch.empty(int(got.sum()), 2, dtype=dtype)
        dist.all_to_all_single(expected, inp[: int(sent.sum())].clone(), got.tolist(),
                               sent.tolist())
        ends = torch.cumsum(out_splits, 0)
        for e in range(experts):
            for src in range(size):
                chunk = src * experts + e
                piece = expected[int(ends[chunk] - out_splits[chunk]): int(ends[chunk])]
                start = int(out_so[1][e * size + src])
                assert torch.equal(out[start: start + piece.shape[0]], piece), (e, src)
        results.append(int(out_so[0].sum()))
    return results


@pytest.mark.parametrize("size", [2, 3, 4])
@pytest.mark.parametrize("align", [1, 16])
def test_all_to_all_vdev_2d_equals_gloo(pes, size, align):
    for dtype in (torch.float32, torch.bfloat16):
        pes(size).run(_vdev_2d, dtype, align, 3)


@symm_session
def _vdev_2d_offset(rank, size, dtype, experts):
    group = _group()
    nsplits = experts * size
    k = 6  # each input chunk starts at a multiple of k: padding between chunks
    inp = symm_mem.empty(k * nsplits, 3, dtype=dtype, device="cpu")
    inp.copy_(_rows(rank + 5, k * nsplits, 3, dtype))
    out = symm_mem.empty(k * nsplits * size, 3, dtype=dtype, device="cpu").fill_(-1)
    in_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu")
    splits = [min(s, k) for s in _splits(rank, nsplits, 7)]
    in_so[0].copy_(torch.tensor(splits))
    in_so[1].copy_(torch.arange(0, k * nsplits, k))
    out_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu").fill_(-1)
    torch.ops.symm_mem.all_to_all_vdev_2d_offset(inp, out, in_so, out_so, group)
    # Splits: the input's expert-major splits transposed, exchanged.
    out_splits = torch.zeros(nsplits, dtype=torch.int64)
    dist.all_to_all_single(out_splits,
                           torch.tensor(splits).view(experts, size).t().contiguous().view(-1))
    assert torch.equal(out_so[0], out_splits)
    assert torch.equal(out_so[1], torch.cumsum(out_splits, 0) - out_splits)
    # Data: per destination rank, its experts' chunks (padding squeezed out), by gloo.
    chunks = []
    for dst in range(size):
        chunks.append(torch.cat([inp[int(in_so[1][e * size + dst]):
                                     int(in_so[1][e * size + dst]) + splits[e * size + dst]]
                                 for e in range(experts)]))
    received = out_splits.view(size, experts).sum(1)
    expected = torch.empty(int(received.sum()), 3, dtype=dtype)
    dist.all_to_all_single(expected, torch.cat(chunks), received.tolist(),
                           [chunk.shape[0] for chunk in chunks])
    assert torch.equal(out[: expected.shape[0]], expected)
    assert bool((out[expected.shape[0]:] == -1).all())
    return True


@pytest.mark.parametrize("size", [2, 3, 4])
def test_all_to_all_vdev_2d_offset_equals_gloo(pes, size):
    for dtype in (torch.float32, torch.int64):
        assert all(pes(size).run(_vdev_2d_offset, dtype, 2))


# ---- reductions and the Python-side operators ---------------------------------------------


@symm_session
def _reductions(rank, size, dtype):
    group = _group()
    n = 37 * size
    mine = _rows(rank, n, 1, dtype).view(-1)
    expected = mine.clone()
    if dtype == torch.bfloat16:
        reference = mine.float()
        dist.all_reduce(reference)
        expected = reference.to(dtype)
    else:
        dist.all_reduce(expected)
    buf = symm_mem.empty(n, dtype=dtype, device="cpu")
    buf.copy_(mine)
    assert torch.equal(torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group), expected)
    out = torch.empty(n, dtype=dtype)
    torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", group, out)
    assert torch.equal(out, expected)
    big = symm_mem.empty(n + 5, dtype=dtype, device="cpu")
    assert torch.equal(torch.ops.symm_mem.one_shot_all_reduce_copy(big, mine, "sum", group),
                       expected)
    out.fill_(0)
    torch.ops.symm_mem.one_shot_all_reduce_copy_out(big, mine, "sum", group, out)
    assert torch.equal(out, expected)
    torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
    assert torch.equal(buf, expected)
    buf.copy_(mine)
    torch.ops.symm_mem.two_shot_all_reduce_out(buf, "sum", group, out.fill_(0))
    assert torch.equal(out, expected)
    with pytest.raises(RuntimeError, match="reduce_op must be"):
        torch.ops.symm_mem.one_shot_all_reduce(buf, "max", group)
    # reduce_scatter_out: this rank's chunk of the sum, along dim 0 or the last dim.
    for split_last_dim in (False, True):
        matrix = symm_mem.empty(2 * size, 3 * size, dtype=dtype, device="cpu")
        matrix.copy_(_rows(rank + 1, 2 * size, 3 * size, dtype))
        total = matrix.clone().float()
        dist.all_reduce(total)
        want = total.chunk(size, dim=1 if split_last_dim else 0)[rank].to(dtype)
        got = torch.empty_like(want)
        torch.ops.symm_mem.reduce_scatter_out(matrix, group, split_last_dim, got)
        assert torch.equal(got, want), split_last_dim
    # The low-contention collectives, a symmetric input and a plain one (staged).
    for source in (buf.view(size, 37), mine.view(size, 37).clone()):
        gathered = torch.ops.symm_mem._low_contention_all_gather(source, group)
        reference = torch.empty(size * size, 37, dtype=dtype)
        dist.all_gather_into_tensor(reference, source.contiguous())
        assert torch.equal(gathered, reference)
        scattered = torch.ops.symm_mem._low_contention_reduce_scatter(source.float(), "sum", group)
        summed = source.float().clone()
        dist.all_reduce(summed)
        assert torch.equal(scattered, summed.chunk(size)[rank])
    return True


@symm_session
def _reductions_dtypes(rank, size):
    return all(_reductions.__wrapped__(rank, size, dtype) for dtype in DTYPES)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_reductions_equal_gloo(pes, size):
    assert all(pes(size).run(_reductions_dtypes))


@symm_session
def _fused(rank, size):
    group = _group()
    torch.manual_seed(rank)
    for gather_dim in (0, 1):
        A_shard = torch.randn(4, 6, 8)
        Bs = [torch.randn(8, 5), torch.randn(8, 3)]
        A, res = torch.ops.symm_mem.fused_all_gather_matmul(A_shard, Bs, gather_dim, group)
        A_ref, res_ref = symm_mem._fused_all_gather_matmul_fallback(A_shard, Bs, gather_dim,
                                                                   group)
        assert torch.equal(A, A_ref)
        for got, want in zip(res, res_ref):
            torch.testing.assert_close(got, want)
    A = torch.randn(4 * size, 6)
    B = torch.randn(6, 2 * size)
    for scatter_dim in (0, 1):
        got = torch.ops.symm_mem.fused_matmul_reduce_scatter(A, B, "sum", scatter_dim, group)
        want = symm_mem._fused_matmul_reduce_scatter_fallback(A, B, "sum", scatter_dim, group)
        torch.testing.assert_close(got, want)
    local = torch.full((4,), float(rank))
    remote = torch.ops.symm_mem.get_remote_tensors(
        symm_mem.empty(4, dtype=torch.float32, device="cpu").copy_(local), group)
    # get_remote_tensors needs no barrier of its own: read after one.
    shmem.barrier()
    assert [float(t[0]) for t in remote] == [float(r) for r in range(size)]
    del remote
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_fused_matmuls_and_remote_tensors_match_torch(pes, size):
    assert all(pes(size).run(_fused))


# ---- subgroups, release and reclaim, bad input, compile -----------------------------------


@symm_session
def _subgroup(rank, size):
    odd = dist.new_group([1, 3])
    even = dist.new_group([0, 2])
    mine = odd if rank % 2 else even
    t = symm_mem.empty(6, dtype=torch.int64, device="cpu").fill_(rank)
    hdl = symm_mem.rendezvous(t, mine)
    assert hdl.world_size == 2 and hdl.rank == rank // 2
    hdl.barrier()
    partner = hdl.get_buffer(1 - hdl.rank, (6,), torch.int64)
    assert bool((partner == (rank ^ 2)).all())
    out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", mine.group_name)
    assert bool((out == (rank + (rank ^ 2))).all())
    del hdl, partner
    return True


def test_rendezvous_over_a_subgroup_uses_its_team(pes):
    assert all(pes(4).run(_subgroup))


@symm_session
def _release(rank, size):
    a = symm_mem.empty(32, dtype=torch.float32, device="cpu")
    b = symm_mem.empty(32, dtype=torch.float32, device="cpu")
    hdl = symm_mem.rendezvous(b, _group())
    view = hdl.get_buffer(rank, (32,), torch.float32)
    # Each rank drops its tensors at a moment of its own: rank 0 both, the others only a.
    del a
    if rank == 0:
        del b
        with pytest.raises(shmem.ShmemError, match="USE_AFTER_FREE"):
            shmem.put(view, torch.zeros(32), pe=rank)
    released = [entry["id"] for entry in shmem.debug_state()["released"]]
    assert len(released) == (2 if rank == 0 else 1), released
    # The next allocation is a point every rank reaches: a goes back, b waits for the others.
    c = symm_mem.empty(8, dtype=torch.float32, device="cpu")
    left = [entry["id"] for entry in shmem.debug_state()["released"]]
    assert left == (released[1:] if rank == 0 else []), (left, released)
    if rank != 0:
        del b
    del c, view, hdl
    return True


@pytest.mark.parametrize("size", [2, 3])
def test_release_is_local_and_the_reclaim_agreed(pes, size):
    assert all(pes(size).run(_release))


@symm_session
def _bad_input(rank, size):
    group = _group()
    nsplits = 2 * size
    inp = symm_mem.empty(16, 2, dtype=torch.float32, device="cpu").fill_(rank)
    out = symm_mem.empty(4, 2, dtype=torch.float32, device="cpu").fill_(-1)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device="cpu").fill_(1)
    out_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu").fill_(-1)
    messages = []
    # Rank 0's out cannot hold the 4 rows it receives: every rank raises, nothing is written.
    with pytest.raises(Exception) as caught:
        torch.ops.symm_mem.all_to_all_vdev_2d(inp, out[:3] if rank == 0 else out, in_splits,
                                              out_so, group)
    messages.append(str(caught.value))
    assert bool((out == -1).all()) and bool((out_so == -1).all()), "nothing written"
    # A tensor outside symm_mem on rank 1: torch's shape of error there, a refusal elsewhere.
    with pytest.raises(Exception) as caught:
        torch.ops.symm_mem.all_to_all_vdev_2d(torch.zeros(16, 2) if rank == 1 else inp, out,
                                              in_splits, out_so, group)
    messages.append(str(caught.value))
    # Splits beyond the input on rank 1.
    splits = symm_mem.empty(size, dtype=torch.int64, device="cpu").fill_(100 if rank else 1)
    so = symm_mem.empty(2, size, dtype=torch.int64, device="cpu")
    with pytest.raises(Exception) as caught:
        torch.ops.symm_mem.all_to_all_vdev(inp, out, splits, so, group)
    messages.append(str(caught.value))
    # Still in step: a good call pairs.
    in_splits.fill_(0)
    torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_so, group)
    assert int(out_so[0].sum()) == 0
    return messages


def test_bad_input_raises_on_every_rank_and_keeps_step(pes):
    messages = pes(2).run(_bad_input)
    fit, plain, beyond = zip(*messages)
    assert "do not fit out" in fit[0] and "refused on PE 0" in fit[1], fit
    assert "must be symmetric memory from symm_mem.empty" in plain[1], plain
    assert "refused on PE 1" in plain[0], plain
    assert "sum of splits is larger than input dim" in beyond[1], beyond
    assert "refused on PE 1" in beyond[0], beyond


@symm_session
def _compiled(rank, size):
    group = _group()
    experts = 2
    nsplits = experts * size
    inp = symm_mem.empty(32, 4, dtype=torch.float32, device="cpu")
    inp.copy_(_rows(rank, 32, 4, torch.float32))
    out_eager = symm_mem.empty(64 * size, 4, dtype=torch.float32, device="cpu").fill_(0)
    out_compiled = symm_mem.empty(64 * size, 4, dtype=torch.float32, device="cpu").fill_(0)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device="cpu")
    in_splits.copy_(torch.tensor(_splits(rank, nsplits, 1)))
    so_eager = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu")
    so_compiled = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu")

    def dispatch(x, out, splits, so):
        torch.ops.symm_mem.all_to_all_vdev_2d(x, out, splits, so, group, major_align=16)
        return out * 2

    eager = dispatch(inp, out_eager, in_splits, so_eager)
    # aot_eager: dynamo's graph (fullgraph) and functionalization, run eagerly; inductor's own
    # lowering of the symm_mem ops allocates CUDA buffers (docs/api.md).
    compiled = torch.compile(dispatch, fullgraph=True, backend="aot_eager")(
        inp, out_compiled, in_splits, so_compiled)
    assert torch.equal(so_eager, so_compiled)
    assert torch.equal(eager, compiled)
    return True


def test_compile_fullgraph_over_all_to_all_vdev_2d(pes):
    assert all(pes(2).run(_compiled, timeout=300))


def _program_owns_the_runtime(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        t = symm_mem.empty(8, dtype=torch.float32, device="cpu")
        symm_mem.rendezvous(t, _group()).barrier()
        # An operator that stages its input in a workspace of symm_mem's own.
        torch.ops.symm_mem.fused_matmul_reduce_scatter(torch.ones(2 * size, 3), torch.ones(3, 2),
                                                       "sum", 0, _group())
        del t
    # The program's close closed it: symm_mem's own buffers and t went back with it.
    assert shmem.debug_state()["state"] == "uninitialized"
    return True


def test_the_programs_own_close_takes_symm_mems_buffers_along(pes):
    assert all(pes(2).run(_program_owns_the_runtime))


@symm_session
def _compiled_reductions(rank, size, backend):
    group = _group()
    buf = symm_mem.empty(8 * size, dtype=torch.float32, device="cpu")
    mine = torch.arange(8 * size, dtype=torch.float32) + rank
    expected = mine.clone()
    dist.all_reduce(expected)

    # two_shot_all_reduce_ returns an alias of its input, which torch's functionalization of a
    # custom operator refuses (torch's schema): the functional one-shot only.
    def reduce(x):
        return torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group) * 2

    buf.copy_(mine)
    got = torch.compile(reduce, fullgraph=True, backend=backend)(buf)
    assert torch.equal(got, expected * 2), backend
    return True


def test_compile_fullgraph_over_one_shot_all_reduce(pes):
    # Inductor lowers the symm_mem operators onto CUDA comm buffers (torch 2.13): aot_eager.
    assert all(pes(2).run(_compiled_reductions, "aot_eager", timeout=300))
