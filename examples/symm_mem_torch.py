"""A program written only against torch's symmetric-memory API, run on this runtime's CPU
backend: MoE-style token dispatch and combine with all_to_all_vdev_2d and
all_to_all_vdev_2d_offset, an all-reduce, and the handle's signals, each checked against gloo.

    python -m hyper_parallel.core.multicore.shmem.launch --nproc 4 examples/symm_mem_torch.py

The only lines that are not torch's are the import that registers the backend ("HPS" for the
CPU) and the shutdown at the end (docs/api.md, "torch's symmetric-memory API"). The same script
runs across hosts (PEs reached over the network) unchanged, and with `--device npu` on the
CANN backend's NPU tensors (torch_npu; "HPS_NPU" chosen with symm_mem.set_backend).
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from hyper_parallel.core.multicore import shmem  # registers "HPS" for the CPU


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "npu"), default="cpu")
    device = parser.parse_args().device
    torch.set_num_threads(1)
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if device == "npu":
        import torch_npu  # noqa: F401  (registers the NPU)

        torch.npu.set_device(rank % torch.npu.device_count())
        symm_mem.set_backend("HPS_NPU")
    group = dist.group.WORLD.group_name
    experts, hidden, capacity = 2, 8, 64  # experts per rank, token width, rows per buffer
    nsplits = experts * world

    # Every rank allocates the same buffers in the same order (collective on this backend).
    tokens = symm_mem.empty(capacity, hidden, dtype=torch.float32, device=device)
    dispatched = symm_mem.empty(capacity * world, hidden, dtype=torch.float32, device=device)
    combined = symm_mem.empty(capacity, hidden, dtype=torch.float32, device=device)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device=device)
    dispatch_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device=device)
    combine_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device=device)

    # Rows per (destination rank, expert), in rank-major order; some are empty.
    splits = torch.tensor([(rank + i) % 4 for i in range(nsplits)], dtype=torch.int64)
    rows = int(splits.sum())
    mine = torch.arange(rows * hidden, dtype=torch.float32).view(rows, hidden) + 1000 * rank
    tokens[:rows] = mine.to(device)
    in_splits.copy_(splits.to(device))

    # Dispatch: each rank receives its experts' rows, grouped by expert (16-row aligned blocks).
    torch.ops.symm_mem.all_to_all_vdev_2d(tokens, dispatched, in_splits, dispatch_so, group,
                                          major_align=16)
    # The "experts": double the rows in place.
    for e in range(experts):
        for src in range(world):
            start = int(dispatch_so[1][e * world + src])
            count = int(dispatch_so[0][e * world + src])
            dispatched[start:start + count] *= 2
    # Combine: send every chunk back to its source rank, in the order it came from.
    torch.ops.symm_mem.all_to_all_vdev_2d_offset(dispatched, combined, dispatch_so, combine_so,
                                                 group)
    assert torch.equal(combine_so[0].cpu(), splits), "each rank gets back what it sent"
    assert torch.equal(combined[:rows].cpu(), mine * 2), "and in the order it was sent"

    # The same exchange by gloo: all_to_all_single of whole rank blocks.
    received = torch.zeros(nsplits, dtype=torch.int64)
    dist.all_to_all_single(received, splits)
    by_rank_sent = splits.view(world, experts).sum(1)
    by_rank_got = received.view(world, experts).sum(1)
    reference = torch.empty(int(by_rank_got.sum()), hidden)
    dist.all_to_all_single(reference, mine, by_rank_got.tolist(), by_rank_sent.tolist())
    so, out = dispatch_so.cpu().clone(), dispatched.cpu().clone()  # copies, also on the CPU
    starts, counts = so[1].tolist(), so[0].tolist()
    got = torch.cat([out[starts[e * world + s]: starts[e * world + s] + counts[e * world + s]]
                     for s in range(world) for e in range(experts)])
    assert torch.equal(got, reference * 2), "dispatch equals gloo's all_to_all_single"

    # An all-reduce through the handle's buffer, and the handle's signals.
    hdl = symm_mem.rendezvous(combined, dist.group.WORLD)
    summed = torch.ops.symm_mem.one_shot_all_reduce(combined, "sum", group)
    expected = combined.cpu().clone()
    dist.all_reduce(expected)
    assert torch.equal(summed.cpu(), expected), "one_shot_all_reduce equals gloo's all_reduce"
    hdl.put_signal((rank + 1) % world, channel=0)
    hdl.wait_signal((rank - 1) % world, channel=0)
    hdl.barrier(channel=1)
    print(f"PE {rank}: symm_mem on HPS ({device}), {world} ranks: dispatch, combine and "
          "all-reduce equal gloo's")

    del tokens, dispatched, combined, in_splits, dispatch_so, combine_so, hdl, summed
    shmem.symm_mem_shutdown()  # collective: gives the memory back, closes the runtime
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
