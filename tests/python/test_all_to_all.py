"""shmem.all_to_all: exact against the expected blocks and gloo's all_to_all_single, calls that
differ across PEs, and every rejection."""

from __future__ import annotations

import random
import time

import pytest
import torch
import torch.distributed as dist

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)

KIB, MIB = 1 << 10, 1 << 20
CHUNK = 256 * KIB  # the op's chunk size (ops/all_to_all/all_to_all.h)
# Bytes per block (one PE to one PE): zero, odd sizes, every chunking branch.
BLOCK_BYTES = [0, 1, 33, 64 * KIB - 1, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 100, MIB + 13]
DTYPES = [torch.uint8, torch.float16, torch.int32, torch.float64]  # 1, 2, 4, 8 bytes


def _values(rank: int, first: int, count: int, dtype: torch.dtype, call: int) -> torch.Tensor:
    """Elements [first, first + count) of PE rank's input of call `call`: distinct per PE,
    call and position, exact in every dtype."""
    positions = torch.arange(first, first + count, dtype=torch.int64)
    return ((positions * 131 + rank * 17 + call * 101) % 251).to(dtype)


def _input(rank: int, size: int, block: int, dtype: torch.dtype, call: int) -> torch.Tensor:
    """PE rank's input of call `call`: `size` blocks of `block` elements, block j for PE j."""
    return _values(rank, 0, size * block, dtype, call)


def _expected(rank: int, size: int, block: int, dtype: torch.dtype, call: int) -> torch.Tensor:
    """Block i of PE rank's output is block rank of PE i's input."""
    return torch.cat([_values(pe, rank * block, block, dtype, call) for pe in range(size)])


def _matrix(rank, size):
    with shmem.acquire_shmem():
        checked = 0
        call = 0
        for dtype in DTYPES:
            itemsize = torch.empty(0, dtype=dtype).element_size()
            blocks = sorted({b // itemsize for b in BLOCK_BYTES} | {1, CHUNK // itemsize + 1})
            output = shmem.empty(max(blocks) * size, dtype=dtype)
            for block in blocks:
                call += 1
                mine = _input(rank, size, block, dtype, call)
                target = output[: block * size]
                shmem.all_to_all(target, mine.to(device()))
                got = target.cpu()
                assert torch.equal(got, _expected(rank, size, block, dtype, call)), \
                    (dtype, block)
                expected = torch.empty(block * size, dtype=dtype)
                dist.all_to_all_single(expected, mine)  # gloo: CPU tensors
                assert torch.equal(got, expected), ("gloo", dtype, block)
                shmem.barrier()  # every PE compared before the output is reused
                checked += 1
            shmem.free(output)
    return checked


@pytest.mark.parametrize("size", [1, 2, 3, 4, 8])
def test_block_size_matrix_matches_the_blocks_and_gloo(pes, size):
    counts = pes(size).run(_matrix, timeout=600)
    assert counts[0] >= 4 * len(BLOCK_BYTES) and len(set(counts)) == 1


def _back_to_back_with_a_delayed_pe(rank, size):
    with shmem.acquire_shmem():
        block = CHUNK // 4 + 1000
        output = shmem.empty(block * size, dtype=torch.int32)
        rng = random.Random(rank)
        for call in range(20):
            if rank == 0:
                time.sleep(rng.choice([0, 0.001, 0.005, 0.01]))  # PE 0 lags behind
            shmem.all_to_all(output, _input(rank, size, block, torch.int32, call).to(device()))
            assert torch.equal(output.cpu(), _expected(rank, size, block, torch.int32, call)), call
        shmem.barrier()
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [2, 4])
def test_back_to_back_calls_reusing_one_output(pes, size):
    assert all(pes(size).run(_back_to_back_with_a_delayed_pe))


def _stream_with_rank_skew(rank, size):
    with shmem.acquire_shmem():
        block = 3 * CHUNK // 8 + 5
        outputs = [shmem.empty(block * size, dtype=torch.float64) for _ in range(3)]
        s = shmem.Stream()
        done = shmem.Event()
        time.sleep(0.02 * rank)  # ranks enqueue at different times
        with shmem.stream(s):
            for call, output in enumerate(outputs):  # the inputs are temporaries
                shmem.all_to_all(output, _input(rank, size, block, torch.float64, call))
            done.record()
        done.synchronize()
        for call, output in enumerate(outputs):
            assert torch.equal(output, _expected(rank, size, block, torch.float64, call)), call
        shmem.barrier()
        for output in outputs:
            shmem.free(output)
    return True


@pytest.mark.host_only("host streams")
@pytest.mark.parametrize("size", [2, 4])
def test_non_default_stream_with_rank_skew(pes, size):
    assert all(pes(size).run(_stream_with_rank_skew))


def _rejections(rank, size):
    with shmem.acquire_shmem():
        dev = device()
        output = shmem.empty(8 * size, dtype=torch.float32)
        before = state_without_failure()
        cases = [
            (f"output numel must be input numel ({4 * size}), but got {8 * size}",
             lambda: shmem.all_to_all(output, torch.ones(4 * size, device=dev))),
            ("input dtype must be output's dtype Float, but got Double",
             lambda: shmem.all_to_all(output, torch.ones(8 * size, dtype=torch.float64,
                                                         device=dev))),
            ("output must be a symmetric tensor from shmem.empty",
             lambda: shmem.all_to_all(torch.zeros(8 * size, device=dev),
                                      torch.ones(8 * size, device=dev))),
            ("output must be contiguous",
             lambda: shmem.all_to_all(output.view(2, 4 * size).t(),
                                      torch.ones(8 * size, device=dev))),
            ("input must be contiguous",
             lambda: shmem.all_to_all(output, torch.ones(16 * size, device=dev)[::2])),
            ("all_to_all input must be disjoint from the output",
             lambda: shmem.all_to_all(output[: 4 * size], output[1:1 + 4 * size])),
        ]
        if size > 1:
            cases.append((f"input numel must be divisible by the root size ({size}), but got "
                          f"{8 * size - 1}",
                          lambda: shmem.all_to_all(output[: 8 * size - 1],
                                                   torch.ones(8 * size - 1, device=dev))))
        for part, call in cases:
            error = expect_shmem_error("INVALID_ARGUMENT", call)
            assert part in str(error), (part, str(error))
            assert error.operation == "all_to_all" and error.phase == "validate", str(error)
        with pytest.raises(TypeError, match="output must be a torch.Tensor, but got int"):
            shmem.all_to_all(3, torch.ones(8, device=dev))
        assert state_without_failure() == before
        shmem.all_to_all(output[:0], torch.ones(0, device=dev))  # zero elements: a validated no-op
        freed = shmem.empty(8 * size, dtype=torch.float32)
        shmem.free(freed)
        expect_shmem_error("USE_AFTER_FREE", shmem.all_to_all, freed,
                           torch.ones(8 * size, device=dev))
        # Still in step: block j of every PE's input is j * 100 + its rank.
        mine = torch.tensor([float(j * 100 + rank) for j in range(size) for _ in range(8)],
                            device=dev)
        shmem.all_to_all(output, mine)
        expected = [float(rank * 100 + pe) for pe in range(size)]
        assert output.view(size, 8)[:, 0].tolist() == expected
        shmem.barrier()
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_all_to_all_rejections(pes, size):
    assert all(pes(size).run(_rejections))


def _differing_calls(rank, size):
    with shmem.acquire_shmem():
        # Same bytes everywhere (allocation compares bytes), a dtype of each PE's choosing.
        output = shmem.empty(8 * size, dtype=torch.float32 if rank == 0 else torch.int32)
        numel = 4 * size if rank == 0 else 8 * size
        sizes = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_to_all, output[:numel],
                                   torch.zeros(numel, dtype=output.dtype, device=device()))
        assert "field=bytes" in str(sizes) and "all_to_all #" in str(sizes), str(sizes)
        dtypes = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_to_all, output,
                                    torch.zeros(8 * size, dtype=output.dtype, device=device()))
        assert "field=dtype" in str(dtypes), str(dtypes)
        assert "dtype=float32" in str(dtypes) and "dtype=int32" in str(dtypes), str(dtypes)
        # The sequences stayed in step: a matching call (the same dtype everywhere) works.
        same = output.view(torch.int32)
        shmem.all_to_all(same, torch.full((8 * size,), rank, dtype=torch.int32, device=device()))
        assert same.view(size, 8)[:, 0].tolist() == list(range(size))
        shmem.barrier()
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [2, 3])
def test_calls_that_differ_across_pes_fail_on_every_pe(pes, size):
    assert all(pes(size).run(_differing_calls))
