"""shmem.broadcast, shmem.all_reduce and shmem.reduce_scatter: against gloo's broadcast,
all_reduce and reduce_scatter_tensor on 1 to 8 PEs, a sample of the
dtype x operator matrix (the whole of it runs in C++: tests/multiprocess/reductions_test.cc),
zero elements, in place, bitwise agreement across PEs and run after run, teams, calls that
differ across PEs, every rejection, torch.compile(fullgraph=True), and the CANN fake (2 and 3
PEs; there the reductions combine on the CPU through host memory)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem

GLOO_OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX, "and": dist.ReduceOp.BAND, "or": dist.ReduceOp.BOR,
            "xor": dist.ReduceOp.BXOR}
# (dtype, op): every operator on one integer type, the float types with sum and max.
SAMPLE = ([(torch.int64, op) for op in GLOO_OPS] + [(torch.int32, "sum"), (torch.uint8, "max")] +
          [(dtype, op) for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
           for op in ("sum", "max")])


def _values(rank: int, count: int, dtype: torch.dtype, op: str, call: int) -> torch.Tensor:
    """Exact in every dtype and order: small sums, products of 1, 2 and -1, bits below 128."""
    k = torch.arange(count, dtype=torch.int64) * 7 + rank * 3 + call
    if op == "sum":
        v = k % 9 - 4
    elif op == "prod":
        v = torch.tensor([1, 2, -1])[k % 3]
    else:
        v = (k * 53 + rank * 29) % 128
    return v.to(dtype)


def _sample_against_gloo(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        count = 1000 * size + 3
        output = shmem.empty(count * size, dtype=torch.float64)  # room for every dtype
        for call, (dtype, op) in enumerate(SAMPLE):
            out = output.view(torch.uint8)[: count * dtype.itemsize].view(dtype)
            mine = _values(rank, count, dtype, op, call)
            expected = mine.clone()
            dist.all_reduce(expected, op=GLOO_OPS[op])  # gloo: CPU tensors
            shmem.all_reduce(out, mine.to(device()), op=op)
            assert torch.equal(out.cpu(), expected), ("all_reduce", dtype, op)
            shmem.barrier()
            block = count // size
            big = _values(rank, block * size, dtype, op, call)
            scattered = out[:block]
            shmem.reduce_scatter(scattered, big.to(device()), op=op)
            expected = torch.empty(block, dtype=dtype)
            dist.reduce_scatter_tensor(expected, big, op=GLOO_OPS[op])
            assert torch.equal(scattered.cpu(), expected), ("reduce_scatter", dtype, op)
            shmem.barrier()
        # Zero elements: validated, then nothing.
        shmem.all_reduce(output[:0], torch.ones(0, dtype=torch.float64, device=device()))
        shmem.reduce_scatter(output[:0], torch.ones(0, dtype=torch.float64, device=device()))
        shmem.free(output)
    return len(SAMPLE)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.cann_fake),
                                  pytest.param(3, marks=pytest.mark.cann_fake), 4, 8])
def test_all_reduce_and_reduce_scatter_match_gloo(pes, size):
    assert pes(size).run(_sample_against_gloo, timeout=600) == [len(SAMPLE)] * size


def _random_floats_agree_bitwise(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        generator = torch.Generator().manual_seed(1234 + rank)
        results = []
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            mine = torch.randn(300_001, generator=generator).to(dtype)
            out = shmem.empty(mine.numel(), dtype=dtype)
            shmem.all_reduce(out, mine)
            first = out.clone()
            shmem.barrier()
            out.copy_(mine)
            shmem.all_reduce(out, out)  # in place: the same bits again
            assert torch.equal(out.view(torch.int16 if dtype.itemsize == 2 else torch.int32),
                               first.view(torch.int16 if dtype.itemsize == 2 else torch.int32)), dtype
            gathered = [torch.empty_like(first) for _ in range(size)]
            dist.all_gather(gathered, first)
            for other in gathered:
                assert torch.equal(other.view(torch.uint8), first.view(torch.uint8)), dtype
            # Close to the sum in float64, rounded once for the half types.
            exact = mine.double()
            dist.all_reduce(exact)
            tolerance = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
            assert torch.allclose(first.double(), exact.to(dtype).double(), rtol=tolerance,
                                  atol=tolerance * size), dtype
            results.append(first.double().sum().item())
            shmem.barrier()
            shmem.free(out)
    return results


@pytest.mark.parametrize("size", [3, 4])
def test_random_floats_give_the_same_bits_on_every_pe_and_every_run(pes, size):
    sums = pes(size).run(_random_floats_agree_bitwise, timeout=300)
    assert all(s == sums[0] for s in sums)


def _broadcast_against_gloo(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        for dtype, count in ((torch.uint8, (600 << 10) + 13), (torch.float32, 1000)):
            output = shmem.empty(count, dtype=dtype)
            for root in range(size):
                mine = _values(rank, count, dtype, "max", root)
                expected = mine.clone()
                dist.broadcast(expected, src=root)  # gloo: CPU tensors
                mine = mine.to(device())
                if root % 2:  # in place, as torch's
                    output.copy_(mine)
                    shmem.broadcast(output, output, root)
                else:
                    shmem.broadcast(output, mine, root)
                assert torch.equal(output.cpu(), expected), (dtype, root)
                shmem.barrier()
            shmem.free(output)
    return True


@pytest.mark.cann_fake
@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_broadcast_from_every_root_matches_gloo(pes, size):
    assert all(pes(size).run(_broadcast_against_gloo))


def _on_teams(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        evens = shmem.team_split_strided(None, 0, 2, size // 2)
        odds = shmem.team_split_strided(None, 1, 2, size // 2)
        team = evens if rank % 2 == 0 else odds
        members = list(range(rank % 2, size, 2))
        out = shmem.empty(64, dtype=torch.int64)
        shmem.all_reduce(out, torch.full((64,), rank, dtype=torch.int64), team=team)
        assert out.eq(sum(members)).all(), out
        shmem.broadcast(out, torch.full((64,), rank * 10, dtype=torch.int64), 1, team=team)
        assert out.eq(members[1] * 10).all(), out
        part = out[: 64 // team.n_pes]
        shmem.reduce_scatter(part, torch.arange(64, dtype=torch.int64) + rank, op="max",
                             team=team)
        block = torch.arange(64).view(team.n_pes, -1)[team.my_pe]
        assert torch.equal(part, block + members[-1]), part
        shmem.barrier()
        shmem.free(out)
    return True


@pytest.mark.parametrize("size", [4, 8])
def test_on_teams_in_team_numbering(pes, size):
    assert all(pes(size).run(_on_teams))


def _rejections(rank, size):
    with shmem.acquire_shmem():
        output = shmem.empty(8 * size, dtype=torch.float32)
        output.fill_(7.0)
        shmem_bool = shmem.empty(8, dtype=torch.bool)
        before = state_without_failure()
        ones = torch.ones(8 * size)
        cases = [
            ("all_reduce", "op must be one of sum, prod, min, max, and, or, xor, but got 'avg'", lambda: shmem.all_reduce(output, ones, op="avg")),
            ("all_reduce", "all_reduce op must be sum, prod, min or max for float32",
             lambda: shmem.all_reduce(output, ones, op="xor")),
            ("all_reduce", "all_reduce dtype must be one of float16",
             lambda: shmem.all_reduce(shmem_bool, torch.ones(8, dtype=torch.bool))),
            ("all_reduce", f"output numel must be input numel ({4 * size})",
             lambda: shmem.all_reduce(output, torch.ones(4 * size))),
            ("all_reduce", "all_reduce input must be disjoint from the output",
             lambda: shmem.all_reduce(output[: 4 * size], output[1: 1 + 4 * size])),
            ("reduce_scatter", "input numel must be output numel * team size",
             lambda: shmem.reduce_scatter(output, torch.ones(8 * size + 1))),
            ("broadcast", f"broadcast root must be a PE of the team, 0 to {size - 1}, but got "
             f"{size}", lambda: shmem.broadcast(output, ones, size)),
            ("broadcast", "broadcast root must be a PE of the team",
             lambda: shmem.broadcast(output, ones, -1)),
            ("broadcast", "output must be a symmetric tensor from shmem.empty",
             lambda: shmem.broadcast(torch.zeros(8 * size), ones, 0)),
        ]
        for operation, part, call in cases:
            error = expect_shmem_error("INVALID_ARGUMENT", call)
            assert part in str(error), (part, str(error))
            assert error.operation == operation and error.phase == "validate", str(error)
        with pytest.raises(TypeError, match="op must be a str, but got int"):
            shmem.all_reduce(output, ones, op=3)
        assert state_without_failure() == before
        assert output.eq(7.0).all(), "a rejected call wrote the output"
        if size > 1:
            # Calls that differ across PEs: every PE fails, in step, nothing written.
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_reduce, output, ones,
                                       "max" if rank == 0 else "min")
            assert "field=arguments" in str(error), str(error)
            assert "(op: max on PE 0, min on PE" in str(error), str(error)
            roots = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.broadcast, output, ones,
                                       rank % 2)
            assert "(root: 0 on PE" in str(roots) and "1 on PE" in str(roots), str(roots)
            expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_reduce, output[: 4 + 4 * rank],
                               ones[: 4 + 4 * rank])
            assert output.eq(7.0).all(), "a mismatched call wrote the output"
        # Still in step.
        shmem.all_reduce(output, ones)
        assert output.eq(float(size)).all()
        shmem.barrier()
        shmem.free(shmem_bool)
        shmem.free(output)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_rejections_and_differing_calls(pes, size):
    assert all(pes(size).run(_rejections))


def _compiled_equals_eager(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        out = shmem.empty(64, dtype=torch.float32)
        part = shmem.empty(64 // size, dtype=torch.float32)

        def step(x):
            shmem.all_reduce(out, x * 2, op="sum")
            y = out + 1
            shmem.broadcast(out, y, 0)
            shmem.reduce_scatter(part, out * (rank + 1), op="max")
            return part * 1

        x = torch.arange(64, dtype=torch.float32) + rank
        eager = step(x)
        shmem.barrier()
        compiled = torch.compile(step, fullgraph=True, backend="eager")(x)
        assert torch.equal(eager, compiled), (eager, compiled)
        shmem.barrier()
        shmem.free(part)
        shmem.free(out)
    return True


def test_compiled_with_fullgraph_equals_eager(pes):
    assert all(pes(2).run(_compiled_equals_eager, timeout=300))
