"""shmem.all_gather_v and shmem.all_to_all with split sizes: against gloo (all_gather of padded
rows, all_to_all_single with splits) on 1 to 8 PEs, zero rows, rows of several elements, teams,
a pair whose sizes do not match (COLLECTIVE_MISMATCH on every PE, nothing written), an output
too small (every PE), the local rejections, and torch.compile(fullgraph=True); on the CANN fake
as well."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from helpers import device, expect_shmem_error, state_without_failure
from hyper_parallel.core.multicore import shmem


def _rows(rank: int, count: int, width: int, call: int, to: int = 0) -> torch.Tensor:
    base = torch.arange(count * width, dtype=torch.int64).view(count, width)
    return (base * 7 + rank * 1000 + to * 100 + call).to(torch.float32)


def _gather_count(rank: int, call: int) -> int:
    return [0, 3, 1, 700, 5][(rank + call) % 5]


def _split(source: int, dest: int, call: int) -> int:
    return [2, 0, 5, 1, 300][(source * 3 + dest + call) % 5]


def _against_gloo(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        width = 3
        out = shmem.empty(800 * size, width, dtype=torch.float32)
        for call in range(4):
            # all_gather_v: every PE's rows in PE order, and every PE's count.
            mine = _rows(rank, _gather_count(rank, call), width, call)
            counts = shmem.all_gather_v(out, mine.to(device()))
            assert counts == [_gather_count(pe, call) for pe in range(size)], counts
            longest = max(counts)
            padded = torch.zeros(longest, width)
            padded[: mine.shape[0]] = mine
            gathered = [torch.empty(longest, width) for _ in range(size)]
            dist.all_gather(gathered, padded)  # gloo: CPU tensors
            expected = torch.cat([g[:c] for g, c in zip(gathered, counts)])
            assert torch.equal(out[: sum(counts)].cpu(), expected), call
            shmem.barrier()
            # all_to_all with split sizes, as all_to_all_single.
            send = [_split(rank, to, call) for to in range(size)]
            receive = [_split(src, rank, call) for src in range(size)]
            data = torch.cat([_rows(rank, n, width, call, to) for to, n in enumerate(send)])
            target = out[: sum(receive)]
            shmem.all_to_all(target, data.to(device()), receive, send)
            expected = torch.empty(sum(receive), width)
            dist.all_to_all_single(expected, data, receive, send)
            assert torch.equal(target.cpu(), expected), call
            shmem.barrier()
        # One side given: the other is cut equally.
        data = torch.arange(2 * size * width, dtype=torch.float32).view(2 * size, width) + rank
        receive = [2] * size
        shmem.all_to_all(out[: 2 * size], data.to(device()), receive)
        expected = torch.empty(2 * size, width)
        dist.all_to_all_single(expected, data, receive, [2] * size)
        assert torch.equal(out[: 2 * size].cpu(), expected)
        shmem.barrier()
        shmem.free(out)
    return True


# 2 and 3 PEs also run on the CANN fake (scripts/test.sh): the sizes travel over the device
# control block's round words there.
@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.cann_fake),
                                  pytest.param(3, marks=pytest.mark.cann_fake), 4, 8])
def test_all_gather_v_and_split_all_to_all_match_gloo(pes, size):
    assert all(pes(size).run(_against_gloo, timeout=300))


def _on_teams(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        odds = shmem.team_split_strided(None, 1, 2, size // 2)
        evens = shmem.team_split_strided(None, 0, 2, size // 2)
        team = evens if rank % 2 == 0 else odds
        out = shmem.empty(64, dtype=torch.int64)
        counts = shmem.all_gather_v(out, torch.full((team.my_pe,), rank, dtype=torch.int64),
                                    team=team)
        assert counts == list(range(team.n_pes))
        members = list(range(rank % 2, size, 2))
        expected = torch.cat([torch.full((i,), pe, dtype=torch.int64)
                              for i, pe in enumerate(members)])
        assert torch.equal(out[: sum(counts)], expected)
        shmem.barrier()
        send = [j + 1 for j in range(team.n_pes)]          # j + 1 rows to team PE j
        receive = [team.my_pe + 1] * team.n_pes
        shmem.all_to_all(out[: sum(receive)], torch.full((sum(send),), rank, dtype=torch.int64),
                         receive, send, team=team)
        assert torch.equal(out[: sum(receive)], torch.tensor(
            [pe for pe in members for _ in range(team.my_pe + 1)]))
        shmem.barrier()
        shmem.free(out)
    return True


@pytest.mark.parametrize("size", [4, 8])
def test_on_teams(pes, size):
    assert all(pes(size).run(_on_teams))


def _failures(rank, size):
    with shmem.acquire_shmem():
        out = shmem.empty(16 * size, dtype=torch.float32)
        out.fill_(7.0)
        before = state_without_failure()
        data = torch.ones(4 * size)
        cases = [
            ("input_split_sizes length must be the team size", 
             lambda: shmem.all_to_all(out, data, [4] * size, [4] * (size + 1))),
            ("input_split_sizes[0] must be non-negative",
             lambda: shmem.all_to_all(out, data, [4] * size, [-1] + [4] * (size - 1))),
            (f"input_split_sizes' sum must be the input's rows ({4 * size})",
             lambda: shmem.all_to_all(out, data, [4] * size, [3] * size)),
            (f"output_split_sizes' sum must be the output's rows ({16 * size})",
             lambda: shmem.all_to_all(out, data, [4] * size, [4] * size)),
            ("output's shape past dim 0 must be input's [2]",
             lambda: shmem.all_gather_v(out, torch.ones(3, 2))),
        ]
        for part, call in cases:
            error = expect_shmem_error("INVALID_ARGUMENT", call)
            assert part in str(error), (part, str(error))
        with pytest.raises(TypeError, match="pass the team by keyword"):
            shmem.all_to_all(out, data, shmem.TEAM_WORLD)
        assert state_without_failure() == before
        assert out.eq(7.0).all()
        if size > 1:
            # The last PE expects one row more from PE 0 than PE 0 sends: every PE fails alike.
            receive = [4] * size
            if rank == size - 1:
                receive[0] = 5
            rows = sum(receive)
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_to_all, out[:rows], data,
                                       receive, [4] * size)
            assert (f"PE 0 sends 4 elements to PE {size - 1}, which expects 5 elements"
                    in str(error)), str(error)
            # An output too small for all the rows together: every PE, naming the need.
            small = out[:2] if rank == 1 else out
            error = expect_shmem_error("INVALID_ARGUMENT", shmem.all_gather_v, small,
                                       torch.ones(2))
            assert f"output numel of PE 1 must be at least {2 * size}" in str(error), str(error)
            assert out.eq(7.0).all(), "a refused call wrote the output"
        counts = shmem.all_gather_v(out, torch.ones(rank))  # still in step
        assert counts == list(range(size))
        shmem.barrier()
        shmem.free(out)
    return True


@pytest.mark.parametrize("size", [1, 3])
def test_mismatches_and_rejections(pes, size):
    assert all(pes(size).run(_failures))


def _compiled(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        out = shmem.empty(64, dtype=torch.float32)

        def step(x):
            counts = shmem.all_gather_v(out, x[: rank + 1])
            shmem.barrier()
            shmem.all_to_all(out[: 2 * size], x[: 2 * size], [2] * size, [2] * size)
            return counts * 1, out[: 2 * size] * 1

        x = torch.arange(64, dtype=torch.float32) + rank * 100
        eager = step(x)
        shmem.barrier()
        compiled = torch.compile(step, fullgraph=True, backend="eager")(x)
        assert torch.equal(torch.as_tensor(eager[0]), compiled[0]), (eager[0], compiled[0])
        assert torch.equal(eager[1], compiled[1])
        shmem.barrier()
        shmem.free(out)
    return True


def test_compiled_with_fullgraph_equals_eager(pes):
    assert all(pes(2).run(_compiled, timeout=300))
