"""shmem.all_gather: exact against gloo's all_gather_into_tensor, and every rejection."""

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
CHUNK = 256 * KIB  # the op's chunk size (ops/all_gather/all_gather.h)
BYTE_SIZES = [0, 1, 31, 32, 33, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 100,
              2 * CHUNK + 64 * KIB - 1, 64 * KIB - 1, 64 * KIB, 64 * KIB + 1, MIB - 1, MIB,
              3 * MIB + 12345]
DTYPES = [torch.uint8, torch.float16, torch.int32, torch.float64]  # 1, 2, 4, 8 bytes


def _input(rank: int, numel: int, dtype: torch.dtype, call: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(rank * 1000 + call)
    raw = torch.randint(0, 250, (numel,), generator=generator, dtype=torch.int64)
    return raw.to(dtype)


def _matrix(rank, size):
    with shmem.acquire_shmem():
        checked = 0
        call = 0
        for dtype in DTYPES:
            itemsize = torch.empty(0, dtype=dtype).element_size()
            numels = sorted({max(0, b // itemsize) for b in BYTE_SIZES} | {1, CHUNK // itemsize + 1})
            output = shmem.empty(max(numels) * size, dtype=dtype)
            for numel in numels:
                call += 1
                mine = _input(rank, numel, dtype, call)
                target = output[: numel * size]
                shmem.all_gather(target, mine.to(device()))
                expected = torch.empty(numel * size, dtype=dtype)
                dist.all_gather_into_tensor(expected, mine)  # gloo: CPU tensors
                assert torch.equal(target.cpu(), expected), (dtype, numel)
                shmem.barrier()  # every PE compared before the output is reused
                checked += 1
            shmem.free(output)
    return checked


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_byte_boundary_matrix_matches_gloo(pes, size):
    counts = pes(size).run(_matrix, timeout=600)
    assert counts[0] > 4 * 10 and len(set(counts)) == 1


def _back_to_back_with_a_delayed_pe(rank, size):
    with shmem.acquire_shmem():
        numel = CHUNK // 4 + 1000
        output = shmem.empty(numel * size, dtype=torch.int32)
        rng = random.Random(rank)
        for call in range(30):
            if rank == 0:
                time.sleep(rng.choice([0, 0.001, 0.005, 0.01]))  # PE 0 lags behind
            mine = _input(rank, numel, torch.int32, call).to(device())
            shmem.all_gather(output, mine)
            expected = torch.cat([_input(pe, numel, torch.int32, call) for pe in range(size)])
            assert torch.equal(output.cpu(), expected), f"call {call}"
        shmem.barrier()
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [2, 4, 8])
def test_back_to_back_calls_reusing_one_output(pes, size):
    assert all(pes(size).run(_back_to_back_with_a_delayed_pe))


def _stream_with_rank_skew(rank, size):
    with shmem.acquire_shmem():
        numel = 3 * CHUNK // 8 + 5
        outputs = [shmem.empty(numel * size, dtype=torch.float64) for _ in range(4)]
        s = shmem.Stream()
        done = shmem.Event()
        time.sleep(0.02 * rank)  # ranks enqueue at different times
        with shmem.stream(s):
            for call, output in enumerate(outputs):
                shmem.all_gather(output, _input(rank, numel, torch.float64, call))  # temporaries
            done.record()
        done.synchronize()
        for call, output in enumerate(outputs):
            expected = torch.cat([_input(pe, numel, torch.float64, call) for pe in range(size)])
            assert torch.equal(output, expected), f"call {call}"
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
            ("output numel must be input numel * root size",
             lambda: shmem.all_gather(output, torch.ones(7, device=dev))),
            ("input dtype must be output's dtype Float, but got Double",
             lambda: shmem.all_gather(output, torch.ones(8, dtype=torch.float64, device=dev))),
            ("output must be a symmetric tensor from shmem.empty",
             lambda: shmem.all_gather(torch.zeros(8 * size, device=dev),
                                      torch.ones(8, device=dev))),
            ("output must be contiguous",
             lambda: shmem.all_gather(output.view(2, 4 * size).t(), torch.ones(8, device=dev))),
            ("input must be contiguous",
             lambda: shmem.all_gather(output, torch.ones(16, device=dev)[::2])),
            ("all_gather input must be disjoint from the output",
             lambda: shmem.all_gather(output[: 4 * size], output[1:5])),
        ]
        for part, call in cases:
            error = expect_shmem_error("INVALID_ARGUMENT", call)
            assert part in str(error), (part, str(error))
        with pytest.raises(TypeError, match="output must be a torch.Tensor, but got int"):
            shmem.all_gather(3, torch.ones(8, device=dev))
        assert state_without_failure() == before
        shmem.all_gather(output[:0], torch.ones(0, device=dev))  # zero elements: a validated no-op
        freed = shmem.empty(8 * size, dtype=torch.float32)
        shmem.free(freed)
        expect_shmem_error("USE_AFTER_FREE", shmem.all_gather, freed, torch.ones(8, device=dev))
        shmem.all_gather(output, torch.full((8,), float(rank), device=dev))  # still in step
        assert output.view(size, 8)[:, 0].tolist() == [float(pe) for pe in range(size)]
        shmem.barrier()
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_all_gather_rejections(pes, size):
    assert all(pes(size).run(_rejections))
