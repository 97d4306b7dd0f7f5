"""PE-side Python measurements: the runtime from Python beside torch.distributed (gloo).

Run by benchmarks/run.py through the package's launcher, one process per PE:

    python -m hyper_parallel.core.multicore.shmem.launch --nproc N \
        benchmarks/one_host/python_bench.py --test T --sizes S1,S2 --reps R --min-time-us U

Every pattern warms up, agrees on an iteration count chosen by PE 0 (so a repetition lasts at
least U microseconds), and PE 0 prints one JSON line per size with the mean time per iteration
of each repetition, in the same shape as the native programs.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem import _ops
from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.results import emit  # noqa: E402
from common.stats import mean_us as _mean_us  # noqa: E402
from common.units import ints  # noqa: E402

TESTS = ("put", "get", "put_overhead", "pingpong", "gloo_sendrecv", "gloo_pingpong", "barrier",
         "gloo_barrier", "allgather", "gloo_allgather", "alltoall", "gloo_alltoall", "overlap",
         "empty_free", "fill")


def _agree(iters: int) -> int:
    """PE 0's iteration count, for everyone."""
    shared = torch.tensor([iters], dtype=torch.int64)
    dist.broadcast(shared, 0)
    return int(shared.item())


def _pick(body, min_time_us: float, collective: bool) -> int:
    if collective:  # every PE runs the probe in step
        one = _mean_us(body, 4)
        return _agree(max(4, min(1 << 20, int(min_time_us / max(one, 0.01)))))
    iters = 1
    if dist.get_rank() == 0:
        while iters < (1 << 20) and _mean_us(body, iters) * iters < min_time_us:
            iters *= 2
    return _agree(iters)


# Each collective pattern: ours, gloo's counterpart, and the output's bytes for `n` bytes of
# input per PE (all_to_all: n / size to each PE; the sizes divide by the PEs).
COLLECTIVES = {
    "allgather": (shmem.all_gather, dist.all_gather_into_tensor, lambda n, size: n * size),
    "alltoall": (shmem.all_to_all, dist.all_to_all_single, lambda n, size: n),
}


def _collective(args, test: str, rank: int, size: int) -> None:
    name = test.replace("gloo_", "")
    ours, theirs, output_bytes = COLLECTIVES[name]
    largest = max(args.sizes)
    mine = test == name
    run = ours if mine else theirs
    make = shmem.empty if mine else torch.empty
    output = make(output_bytes(largest, size), dtype=torch.uint8)
    source = torch.full((largest,), rank, dtype=torch.uint8)
    for n in args.sizes:
        out, inp = output[: output_bytes(n, size)], source[:n]
        iters, samples = _measure(lambda: run(out, inp), args, collective=True)
        _emit("hps_python" if mine else "gloo", name, n, iters, samples)
    if mine:
        shmem.free(output)


def _emit(impl: str, test: str, size: int, iters: int, samples: list, **extra) -> None:
    if dist.get_rank() != 0:
        return
    record = {"impl": impl, "test": test, "pes": dist.get_world_size(), "bytes": size,
              "iters": iters, "samples_us": [round(s, 4) for s in samples]}
    record.update(extra)
    emit(record)


def _measure(body, args, collective: bool, finish=None) -> tuple:
    """Warm-up, agreed iteration count, then args.reps timed repetitions; `finish` runs once
    at the end of each repetition, inside the timed region."""
    for _ in range(3):
        body()
    if finish is not None:
        finish()
    iters = _pick(body, args.min_time_us, collective)
    samples = []
    for _ in range(args.reps):
        dist.barrier()
        samples.append(_mean_us(body, iters, finish))
    dist.barrier()
    return iters, samples


def run(args) -> None:
    rank, size = dist.get_rank(), dist.get_world_size()
    peer = (rank + 1) % size
    largest = max(args.sizes)
    test = args.test
    if test in ("put", "get", "put_overhead"):
        buffer = shmem.empty(max(largest, 8), dtype=torch.uint8)
        local = torch.ones(max(largest, 8), dtype=torch.uint8)
        for n in (args.sizes if test != "put_overhead" else [8]):
            dst, src = buffer[:n], local[:n]
            if test == "get":
                body = (lambda: shmem.get(src, dst, peer)) if rank == 0 else (lambda: None)
            else:
                body = (lambda: shmem.put(dst, src, peer)) if rank == 0 else (lambda: None)
            iters, samples = _measure(body, args, collective=False)
            _emit("hps_python", test, n, iters, samples)
            if test == "put_overhead":
                # The same put through the custom op a compiled function calls
                # (torch.ops.hps.put, docs/compile.md), in the same run.
                op, token = torch.ops.hps.put.default, _ops.order_token()
                body = (lambda: op(token, dst, src, peer)) if rank == 0 else (lambda: None)
                iters, samples = _measure(body, args, collective=False)
                _emit("hps_op", test, n, iters, samples)
        shmem.free(buffer)
    elif test == "pingpong":
        buffer = shmem.empty(max(largest, 8), dtype=torch.uint8)
        flag = shmem.empty(1, dtype=torch.int64)
        flag.zero_()
        local = torch.ones(max(largest, 8), dtype=torch.uint8)
        shmem.barrier()
        counter = [0]
        for n in args.sizes:
            dst, src = buffer[:n], local[:n]

            def body():
                counter[0] += 1
                if rank == 0:
                    shmem.put(dst, src, 1)
                    shmem.signal(flag, counter[0], 1)
                    shmem.wait_signal(flag, counter[0], comparison="ge")
                elif rank == 1:
                    shmem.wait_signal(flag, counter[0], comparison="ge")
                    shmem.put(dst, src, 0)
                    shmem.signal(flag, counter[0], 0)

            iters, samples = _measure(body, args, collective=True)
            _emit("hps_python", test, n, iters, [s / 2 for s in samples])
        shmem.free(flag)
        shmem.free(buffer)
    elif test in ("gloo_sendrecv", "gloo_pingpong"):
        ack = torch.zeros(1, dtype=torch.uint8)

        def acknowledge():
            # Delivery, not just a returned send: PE 1 confirms once per repetition.
            if rank == 0:
                dist.recv(ack, 1)
            elif rank == 1:
                dist.send(ack, 0)

        for n in args.sizes:
            message = torch.ones(max(n, 1), dtype=torch.uint8)[:n]
            finish = None
            if test == "gloo_sendrecv":
                finish = acknowledge

                def body():  # a put-like transfer: PE 0 sends, PE 1 receives
                    if rank == 0:
                        dist.send(message, 1)
                    elif rank == 1:
                        dist.recv(message, 0)
            else:
                def body():
                    if rank == 0:
                        dist.send(message, 1)
                        dist.recv(message, 1)
                    elif rank == 1:
                        dist.recv(message, 0)
                        dist.send(message, 0)
            iters, samples = _measure(body, args, collective=True, finish=finish)
            if test == "gloo_pingpong":
                samples = [s / 2 for s in samples]
            _emit("gloo", test.replace("gloo_", ""), n, iters, samples)
    elif test in ("barrier", "gloo_barrier"):
        body = shmem.barrier if test == "barrier" else dist.barrier
        iters, samples = _measure(body, args, collective=True)
        _emit("hps_python" if test == "barrier" else "gloo", "barrier", 0, iters, samples)
    elif test.replace("gloo_", "") in COLLECTIVES:
        _collective(args, test, rank, size)
    elif test == "overlap":
        _overlap(args, rank, size, peer)
    elif test == "empty_free":
        # A collective allocation and its free: the free poisons the block (all bytes 0xFF)
        # before the quarantine takes it, so its cost grows with the size.
        for n in args.sizes:
            iters, samples = _measure(lambda: shmem.free(shmem.empty(n, dtype=torch.uint8)),
                                      args, collective=True)
            _emit("hps_python", "empty_free", n, iters, samples)
    elif test == "fill":
        # The poison's own work, for comparison: one fill of the same bytes by torch.
        for n in args.sizes:
            block = torch.empty(n, dtype=torch.uint8)
            iters, samples = _measure(lambda: block.fill_(255), args, collective=False)
            _emit("torch", "fill", n, iters, samples)


def _overlap(args, rank, size, peer) -> None:
    """A large put on an asynchronous stream while the caller computes, against the two one
    after the other. Only PE 0 works (the others wait in the barrier, asleep), so its two
    threads have the machine's cores; the compute is sized to last about as long as the put."""
    n = max(args.sizes)
    buffer = shmem.empty(n, dtype=torch.uint8)
    source = torch.ones(n, dtype=torch.uint8)
    stream = shmem.Stream()
    a = torch.randn(192, 192)
    working = rank == 0

    def put():
        shmem.put(buffer, source, peer)

    unit_us = _mean_us(lambda: torch.mm(a, a), 20)
    put_us = min(_mean_us(put, 3) for _ in range(3))
    rounds = _agree(max(1, round(put_us / max(unit_us, 1e-3))))

    def compute():
        for _ in range(rounds):
            torch.mm(a, a)

    def sequential():
        if working:
            put()
            compute()

    def overlapped():
        if working:
            with shmem.stream(stream):
                put()
            compute()
            stream.synchronize()

    for name, body in (("sequential", sequential), ("overlapped", overlapped),
                       ("put_only", lambda: put() if working else None),
                       ("compute_only", lambda: compute() if working else None)):
        iters, samples = _measure(body, args, collective=True)
        _emit("hps_python", f"overlap_{name}", n, iters, samples)
    shmem.free(buffer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", choices=TESTS, required=True)
    parser.add_argument("--sizes", default="8", type=ints)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--min-time-us", type=float, default=20000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core per PE: two cores, several PEs
    if not init_process_group_from_environment():
        print("python_bench.py must be started by the launcher (RANK/WORLD_SIZE unset)",
              file=sys.stderr)
        return 2
    handle = shmem.acquire_shmem()
    try:
        run(args)
    finally:
        handle.close()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
