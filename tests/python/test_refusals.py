"""A collective call refused on one PE only keeps the PEs in step (docs/api.md, "Collectives are
checked before data moves"; docs/architecture.md, "A refused call keeps its place").

For every collective and every argument it checks on the calling PE, PE 0 makes the call with
that argument wrong while the other PEs make it right: PE 0 raises its own error (a ShmemError
that is also the ValueError / TypeError it is), every other PE raises COLLECTIVE_MISMATCH naming
PE 0's refusal, nothing is written, and then a correct call of every PE pairs and gives the
right result. The same on a team, and on a queued stream (where the others' failure surfaces
when the stream is synchronised).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from hyper_parallel.core.multicore import shmem

N = 8  # elements of a PE's block


@dataclass
class Bufs:
    out: torch.Tensor        # N * size elements, symmetric
    block: torch.Tensor      # N elements, symmetric
    freed: torch.Tensor      # a freed symmetric tensor
    rows: torch.Tensor       # (2 * size, 4), symmetric: all_gather_v / split all_to_all
    rank: int
    size: int


def _good(b: Bufs, name: str, team=None):
    """The correct call of collective `name`; returns a check of its result."""
    r, n = b.rank, b.size
    if name == "broadcast":
        shmem.broadcast(b.block, torch.full((N,), 10.0 + r), 1, team)
        return lambda: torch.equal(b.block, torch.full((N,), 11.0))
    if name == "all_reduce":
        shmem.all_reduce(b.block, torch.full((N,), 1.0 + r), "max", team)
        return lambda: torch.equal(b.block, torch.full((N,), float(n)))
    if name == "reduce_scatter":
        shmem.reduce_scatter(b.block, torch.ones(N * n), "sum", team)
        return lambda: torch.equal(b.block, torch.full((N,), float(n)))
    if name == "all_gather":
        shmem.all_gather(b.out, torch.full((N,), float(r)), team)
        expected = torch.arange(n, dtype=torch.float32).repeat_interleave(N)
        return lambda: torch.equal(b.out, expected)
    if name == "all_to_all":
        shmem.all_to_all(b.out, torch.full((N * n,), float(r)), team=team)
        expected = torch.arange(n, dtype=torch.float32).repeat_interleave(N)
        return lambda: torch.equal(b.out, expected)
    if name == "all_to_all_v":  # one row to every PE
        shmem.all_to_all(b.rows[:n], torch.full((n, 4), float(r)), [1] * n, [1] * n, team=team)
        expected = torch.arange(n, dtype=torch.float32).repeat_interleave(4).view(n, 4)
        return lambda: torch.equal(b.rows[:n], expected)
    if name == "all_gather_v":
        counts = shmem.all_gather_v(b.rows, torch.full((1, 4), float(r)), team)
        expected = torch.arange(n, dtype=torch.float32).repeat_interleave(4).view(n, 4)
        return lambda: counts == [1] * n and torch.equal(b.rows[:n], expected)
    if name == "barrier":
        shmem.barrier(team)
        return lambda: True
    raise AssertionError(name)


# (case name, collective, PE 0's wrong call, the error's class, its code, a part of its text)
CASES = [
    ("broadcast_root_outside", "broadcast",
     lambda b: shmem.broadcast(b.block, torch.ones(N), 7), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "root must be a PE of the team"),
    ("broadcast_root_a_str", "broadcast",
     lambda b: shmem.broadcast(b.block, torch.ones(N), "1"), shmem.ShmemTypeError,
     "INVALID_ARGUMENT", "root must be an int, but got str '1'"),
    ("broadcast_input_numel", "broadcast",
     lambda b: shmem.broadcast(b.block, torch.ones(N - 1), 1), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "output numel must be input numel (7)"),
    ("broadcast_input_dtype", "broadcast",
     lambda b: shmem.broadcast(b.block, torch.ones(N, dtype=torch.int32), 1),
     shmem.ShmemValueError, "INVALID_ARGUMENT", "input dtype must be"),
    ("broadcast_output_not_symmetric", "broadcast",
     lambda b: shmem.broadcast(torch.zeros(N), torch.ones(N), 1), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "symmetric"),
    ("broadcast_output_freed", "broadcast",
     lambda b: shmem.broadcast(b.freed, torch.ones(N), 1), shmem.ShmemValueError,
     "USE_AFTER_FREE", "freed"),
    ("all_reduce_op_unknown", "all_reduce",
     lambda b: shmem.all_reduce(b.block, torch.ones(N), "avg"), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "op must be one of sum"),
    ("all_reduce_op_an_int", "all_reduce",
     lambda b: shmem.all_reduce(b.block, torch.ones(N), 3), shmem.ShmemTypeError,
     "INVALID_ARGUMENT", "op must be a str"),
    ("all_reduce_dtype_bool", "all_reduce",
     lambda b: shmem.all_reduce(b.block, torch.ones(N, dtype=torch.bool), "max"),
     shmem.ShmemValueError, "INVALID_ARGUMENT", "input dtype must be output's dtype"),
    ("all_reduce_input_numel", "all_reduce",
     lambda b: shmem.all_reduce(b.block, torch.ones(2 * N), "max"), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "output numel must be input numel (16)"),
    ("all_reduce_input_overlaps", "all_reduce",
     lambda b: shmem.all_reduce(b.out[: N], b.out[2: N + 2], "max"), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "disjoint from the output"),
    ("reduce_scatter_input_numel", "reduce_scatter",
     lambda b: shmem.reduce_scatter(b.block, torch.ones(N), "sum"), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "numel"),
    ("reduce_scatter_op_unknown", "reduce_scatter",
     lambda b: shmem.reduce_scatter(b.block, torch.ones(N * b.size), "mean"),
     shmem.ShmemValueError, "INVALID_ARGUMENT", "op must be one of sum"),
    ("all_gather_input_numel", "all_gather",
     lambda b: shmem.all_gather(b.out, torch.ones(N + 1)), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "root size"),
    ("all_gather_zero_elements", "all_gather",
     lambda b: shmem.all_gather(b.out, torch.ones(0)), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "root size"),
    ("all_gather_output_an_int", "all_gather",
     lambda b: shmem.all_gather(3, torch.ones(N)), shmem.ShmemTypeError,
     "INVALID_ARGUMENT", "output must be a torch.Tensor"),
    ("all_to_all_numel_not_divisible", "all_to_all",
     lambda b: shmem.all_to_all(b.out, torch.ones(N * b.size + 1)), shmem.ShmemValueError,
     "INVALID_ARGUMENT", ""),
    ("all_to_all_v_split_sum", "all_to_all_v",
     lambda b: shmem.all_to_all(b.rows[: b.size], torch.ones(b.size, 4), [1] * b.size,
                                [2] + [1] * (b.size - 1)),
     shmem.ShmemValueError, "INVALID_ARGUMENT", "input_split_sizes' sum"),
    ("all_to_all_v_split_length", "all_to_all_v",
     lambda b: shmem.all_to_all(b.rows[: b.size], torch.ones(b.size, 4), [1] * b.size, [1]),
     shmem.ShmemValueError, "INVALID_ARGUMENT", "input_split_sizes length"),
    ("all_to_all_v_split_a_str", "all_to_all_v",
     lambda b: shmem.all_to_all(b.rows[: b.size], torch.ones(b.size, 4), [1] * b.size, "11"),
     shmem.ShmemTypeError, "INVALID_ARGUMENT", "input_split_sizes"),
    ("all_to_all_v_split_an_int", "all_to_all_v",
     lambda b: shmem.all_to_all(b.rows[: b.size], torch.ones(b.size, 4), [1] * b.size, 5),
     shmem.ShmemTypeError, "INVALID_ARGUMENT", "split sizes"),
    ("all_gather_v_shape_differs", "all_gather_v",
     lambda b: shmem.all_gather_v(b.rows, torch.ones(1, 3)), shmem.ShmemValueError,
     "INVALID_ARGUMENT", "shape past dim 0"),
    ("all_gather_v_input_a_list", "all_gather_v",
     lambda b: shmem.all_gather_v(b.rows, [1.0, 2.0]), shmem.ShmemTypeError,
     "INVALID_ARGUMENT", "input must be a torch.Tensor"),
]


def _buffers(rank: int, size: int) -> Bufs:
    freed = shmem.empty(N)
    shmem.free(freed)
    return Bufs(shmem.empty(N * size), shmem.empty(N), freed, shmem.empty(2 * size, 4), rank,
                size)


def _release(b: Bufs) -> None:
    for tensor in (b.rows, b.block, b.out):
        shmem.free(tensor)


def _refused_then_paired(b: Bufs, name, collective, bad, error_class, code, text, team=None,
                         stream=None):
    """One case: PE 0's wrong call, the others' right one; then a right call everywhere."""
    before = [t.clone() for t in (b.out, b.block, b.rows)]
    if b.rank == 0:
        with pytest.raises(error_class) as caught:
            bad(b)
        assert isinstance(caught.value, shmem.ShmemError)
        assert caught.value.error_code == code, str(caught.value)
        assert text in str(caught.value), (name, str(caught.value))
    else:
        with pytest.raises(shmem.ShmemError) as caught:
            _good(b, collective, team)
            if stream is not None:
                stream.synchronize()  # a queued call's failure surfaces here
        message = str(caught.value)
        assert caught.value.error_code == "COLLECTIVE_MISMATCH", (name, message)
        assert f"{collective} was refused on PE 0: {code}" in message, (name, message)
    if stream is not None:
        stream.synchronize()
    after = [t.clone() for t in (b.out, b.block, b.rows)]
    assert all(torch.equal(x, y) for x, y in zip(before, after)), f"{name}: a refused call wrote"
    check = _good(b, collective, team)
    if stream is not None:
        stream.synchronize()
    assert check(), f"{name}: the call after the refusal did not pair"


def _every_case(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        b = _buffers(rank, size)
        for case in CASES:
            _refused_then_paired(b, *case)
        sequence = shmem.debug_state()["collectives"]["sequence"]
        _release(b)
        return sequence


def test_a_collective_refused_on_one_pe_keeps_every_pe_in_step(pes):
    sequences = pes(2).run(_every_case)
    assert len(set(sequences)) == 1, sequences  # every PE took the same numbers


def _on_a_team_and_a_stream(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        b = _buffers(rank, size)
        team = shmem.team_split_strided(None, 0, 1, size)  # a team of every PE, numbered alike
        for case in CASES[:2] + CASES[6:7]:
            _refused_then_paired(b, *case, team=team)
        s = shmem.Stream()
        with shmem.stream(s):
            for case in [CASES[0], CASES[6], CASES[17]]:
                _refused_then_paired(b, *case, stream=s)
        s.synchronize()
        team.destroy()
        _release(b)
    return True


@pytest.mark.host_only("a queued stream of the host backend's own")
def test_refusals_keep_a_team_and_a_queued_stream_in_step(pes):
    assert all(pes(4).run(_on_a_team_and_a_stream))


def _empty_and_free(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        keep = shmem.empty(4)
        cases = [
            (lambda: shmem.empty(-1), lambda: shmem.empty(4), "empty", shmem.ShmemValueError),
            (lambda: shmem.empty(4, alignment=3), lambda: shmem.empty(4), "empty",
             shmem.ShmemValueError),
            (lambda: shmem.empty(1 << 40, dtype=torch.uint8), lambda: shmem.empty(4), "empty",
             shmem.ShmemError),
            (lambda: shmem.free(keep[1:]), lambda: shmem.free(keep), "free",
             shmem.ShmemValueError),
            (lambda: shmem.free("keep"), lambda: shmem.free(keep), "free", shmem.ShmemTypeError),
        ]
        for bad, good, kind, error_class in cases:
            live = shmem.debug_state()["live_allocations"]
            if rank == 0:
                with pytest.raises(error_class):
                    bad()
            else:
                with pytest.raises(shmem.ShmemError) as caught:
                    good()
                assert caught.value.error_code == "COLLECTIVE_MISMATCH", str(caught.value)
                assert f"{kind} was refused on PE 0" in str(caught.value), str(caught.value)
            assert shmem.debug_state()["live_allocations"] == live
        again = shmem.empty(4)  # pairs on every PE
        shmem.free(again)
        shmem.free(keep)
    return True


@pytest.mark.cann_fake
def test_empty_and_free_refused_on_one_pe_keep_every_pe_in_step(pes):
    assert all(pes(2).run(_empty_and_free))
