"""The main demo: N PEs on the host backend exchange data one-sidedly.

    python -m hyper_parallel.core.multicore.shmem.demo [--pes N]

Each PE puts a row into every PE's inbox, raises every PE's counter with signal(add), waits
for its own, reads its neighbour's counter with get, sends a larger block on an asynchronous
host stream ordered by an event, and prints what it received and its debug_state().
"""

from __future__ import annotations

import argparse
import sys

MIB = 1 << 20


def _in_rank_order(rank: int, size: int, text: str) -> None:
    from hyper_parallel.core.multicore import shmem

    for turn in range(size):
        if turn == rank:
            print(text, flush=True)
        shmem.barrier()


def run_pe() -> int:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore import shmem
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    init_process_group_from_environment()
    rank = dist.get_rank() if dist.is_initialized() else 0
    size = dist.get_world_size() if dist.is_initialized() else 1
    handle = shmem.acquire_shmem()

    inbox = shmem.empty(size, 4, dtype=torch.int64)
    counter = shmem.empty(1, dtype=torch.int64)
    block = shmem.empty(4 * MIB // 4, dtype=torch.float32)
    inbox.fill_(-1)
    counter.zero_()
    shmem.barrier()

    row = torch.tensor([rank, rank * 10, rank * 100, rank * 1000], dtype=torch.int64)
    for pe in range(size):
        shmem.put(inbox[rank], row, pe)          # my row of every PE's inbox
        shmem.signal(counter, 1, pe, operation="add")  # after the data
    shmem.wait_signal(counter, size, comparison="ge")  # every PE's row has landed
    shmem.barrier()
    neighbour = torch.empty(1, dtype=torch.int64)
    shmem.get(neighbour, counter, (rank + 1) % size)

    # A larger block on an asynchronous stream; the caller computes while it is in flight.
    stream, sent = shmem.Stream(), shmem.Event()
    with shmem.stream(stream):
        shmem.put(block, torch.full((block.numel(),), float(rank)), (rank + 1) % size)
        sent.record()
    product = torch.randn(128, 128) @ torch.randn(128, 128)
    sent.synchronize()
    shmem.barrier()

    received = {pe: inbox[pe].tolist() for pe in range(size)}
    lines = [f"[pe {rank}] rows received in my inbox (one per source PE):"]
    lines += [f"[pe {rank}]   from pe {pe}: {values}" for pe, values in received.items()]
    lines.append(f"[pe {rank}] my counter: {int(counter.item())} (one add from each of {size} PEs); "
                 f"pe {(rank + 1) % size}'s counter read with get: {int(neighbour.item())}")
    lines.append(f"[pe {rank}] 4 MiB block from pe {(rank - 1) % size} on an async stream: "
                 f"all {float(block[0].item()):.0f}: {bool(block.eq(float((rank - 1) % size)).all())}"
                 f" (overlapped with a {tuple(product.shape)} matmul)")
    lines.append(f"[pe {rank}] debug_state():\n{shmem.debug_state()!r}")
    _in_rank_order(rank, size, "\n".join(lines))

    ok = all(received[pe] == [pe, pe * 10, pe * 100, pe * 1000] for pe in range(size))
    ok = ok and int(counter.item()) == size and bool(block.eq(float((rank - 1) % size)).all())
    for tensor in (block, counter, inbox):
        shmem.free(tensor)
    handle.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0 if ok else 1


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyper_parallel.core.multicore.shmem.demo",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pes", type=int, default=4, help="number of PEs (default 4)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return run_pe()
    if not 1 <= args.pes <= 64:
        parser.error(f"--pes must be in [1, 64], but got {args.pes}")
    from hyper_parallel.core.multicore.shmem.launch import run_pes

    print(f"hyper_parallel_shmem demo: {args.pes} PEs on the host backend", flush=True)
    code = run_pes(args.pes, [sys.executable, "-m", "hyper_parallel.core.multicore.shmem.demo",
                              "--worker"], timeout_s=300)
    print("all PEs finished cleanly" if code == 0 else "some PEs failed", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
