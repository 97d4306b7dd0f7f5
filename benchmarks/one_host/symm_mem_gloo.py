"""The operators' inputs (OpsSize: the symmetric tensors, the splits, what torch's semantics
say comes out) and the gloo side a torch user writes instead, for benchmarks/one_host/symm_mem_bench.py."""

from __future__ import annotations

import gc

# Rows of ROW float32 with random splits; the 2-D all-to-alls over LOCAL_EXPERTS experts per PE,
# the dispatch also checked with major_align=ALIGN.
ROW = 64             # float32 per row in the all-to-alls (256 B)
LOCAL_EXPERTS = 4    # local experts per PE in the 2-D all-to-alls
ALIGN = 8            # the major_align also checked


def _exclusive_cumsum(t):
    import torch
    return torch.cumsum(t, 0) - t


def grouping_permutation(counts_by_source):
    """counts [W, ne] of rows received by source then local expert -> the permutation that
    orders them by expert, then source (received[perm] is expert-major): what
    all_to_all_vdev_2d's output layout saves a gloo user."""
    import torch
    starts = _exclusive_cumsum(counts_by_source.reshape(-1)).view_as(counts_by_source)
    seg_start, seg_len = starts.t().reshape(-1), counts_by_source.t().reshape(-1)
    total = int(seg_len.sum())
    base = torch.repeat_interleave(seg_start - _exclusive_cumsum(seg_len), seg_len)
    return base + torch.arange(total, dtype=torch.int64)


def expected_offsets(splits_em: list, world: int, ne: int, align: int) -> list:
    """all_to_all_vdev_2d's output offsets (torch's semantics): expert-major, each expert's
    block rounded up to `align` rows (an empty one takes `align`), the last source absorbing
    the padding; exclusive scan."""
    padded = list(splits_em)
    for e in range(ne):
        total = sum(splits_em[e * world:(e + 1) * world])
        aligned = max((total + align - 1) // align * align, align)
        padded[e * world + world - 1] += aligned - total
    out, running = [], 0
    for n in padded:
        out.append(running)
        running += n
    return out


class OpsSize:
    """The inputs, the symmetric buffers and the gloo tensors of one size."""

    def __init__(self, size: int, rank: int, world: int, symm: bool) -> None:
        import torch
        import torch.distributed as dist
        self.size, self.rank, self.world, self.symm = size, rank, world, symm
        self.group = dist.group.WORLD.group_name
        gen = torch.Generator().manual_seed(1000 * world + 17 * rank + size % 9973)
        numel = size // 4
        self.reduce_in = torch.randint(-512, 512, (numel,), generator=gen).float()
        rows = size // (4 * ROW)
        self.rows = rows
        self.rows_in = torch.randint(-(1 << 20), 1 << 20, (rows, ROW), generator=gen).float()
        # Random splits: each row to a uniformly drawn destination (2-D: destination expert).
        ne = LOCAL_EXPERTS
        self.ne = ne
        pick = torch.randint(0, world, (rows,), generator=gen)
        self.splits = torch.bincount(pick, minlength=world).to(torch.int64)
        pick2 = torch.randint(0, world * ne, (rows,), generator=gen)
        self.splits2d = torch.bincount(pick2, minlength=world * ne).to(torch.int64)
        self.cap_out = rows * world + ne * ALIGN
        self.buffers: list = []
        if symm:
            self._allocate()

    def _allocate(self) -> None:
        import torch
        import torch.distributed._symmetric_memory as symm_mem
        world, ne, rows = self.world, self.ne, self.rows

        def empty(*shape, dtype=torch.float32):
            t = symm_mem.empty(*shape, dtype=dtype, device="cpu")
            symm_mem.rendezvous(t, self.group)
            self.buffers.append(t)
            return t

        self.s_reduce = empty(self.reduce_in.numel())
        self.s_reduce_out = empty(self.reduce_in.numel() // world)
        self.s_in = empty(rows, ROW)
        self.s_out = empty(self.cap_out, ROW)
        self.s_back = empty(rows, ROW)
        self.s_splits = empty(world, dtype=torch.int64)
        self.s_out_so = empty(2, world, dtype=torch.int64)
        self.s_splits2d = empty(world * ne, dtype=torch.int64)
        self.s_out_so2d = empty(2, world * ne, dtype=torch.int64)
        self.s_back_so = empty(2, world * ne, dtype=torch.int64)
        self.s_reduce.copy_(self.reduce_in)
        self.s_in.copy_(self.rows_in)
        self.s_splits.copy_(self.splits)
        self.s_splits2d.copy_(self.splits2d)

    def release(self) -> None:
        """Drops every symmetric tensor, in allocation order (the same on every PE)."""
        for name in ("s_reduce", "s_reduce_out", "s_in", "s_out", "s_back", "s_splits",
                     "s_out_so", "s_splits2d", "s_out_so2d", "s_back_so"):
            if hasattr(self, name):
                delattr(self, name)
        while self.buffers:
            self.buffers.pop(0)
        gc.collect()


def gloo_a2a(size: OpsSize, exchange: bool):
    """all_to_all_vdev's gloo equivalent: (received rows, received splits)."""
    import torch
    import torch.distributed as dist
    if exchange:
        received = torch.empty_like(size.splits)
        dist.all_to_all_single(received, size.splits)
        size.known_recv = received.tolist()
    recv = size.known_recv
    out = size.rows_in.new_empty((sum(recv), ROW))
    dist.all_to_all_single(out, size.rows_in, recv, size.send_list)
    return out


def gloo_dispatch(size: OpsSize, exchange: bool):
    """all_to_all_vdev_2d's gloo equivalent: (rows grouped by local expert, then source;
    received counts [W, ne] by source)."""
    import torch
    import torch.distributed as dist
    world, ne = size.world, size.ne
    if exchange:
        received = torch.empty_like(size.splits2d)
        dist.all_to_all_single(received, size.splits2d)
    else:
        received = size.known_recv2d
    by_source = received.view(world, ne)
    recv = by_source.sum(1).tolist()
    out = size.rows_in.new_empty((sum(recv), ROW))
    dist.all_to_all_single(out, size.rows_in, recv, size.send_list2d)
    return out[grouping_permutation(by_source)], by_source


def gloo_combine(size: OpsSize, grouped, by_source):
    """all_to_all_vdev_2d_offset's gloo equivalent: rows back to their senders, in the order
    they were sent."""
    import torch
    import torch.distributed as dist
    perm = grouping_permutation(by_source)
    arrival = torch.empty_like(grouped)
    arrival[perm] = grouped
    out = grouped.new_empty((size.rows, ROW))
    dist.all_to_all_single(out, arrival, size.send_list2d, by_source.sum(1).tolist())
    return out
