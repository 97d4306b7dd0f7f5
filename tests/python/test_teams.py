"""Teams from Python: splits and teams of process groups (membership, numbering), team
collectives against gloo subgroups, RMA in team numbering, collectives of several teams at once
and in program order, mismatches, refused handles (destroyed, predefined, of an older
lifecycle), slot exhaustion, debug_state's teams, and a PE lost during a team barrier."""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import traceback
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from helpers import device, eventually, expect_shmem_error, in_background
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.shmem._runtime import native


def _values(rank: int, numel: int, dtype: torch.dtype, call: int) -> torch.Tensor:
    """PE rank's input of call `call`: distinct per PE, call and position, exact in dtype."""
    positions = torch.arange(numel, dtype=torch.int64)
    return ((positions * 131 + rank * 17 + call * 101) % 251).to(dtype)


def _team_row(team: shmem.Team) -> dict:
    """debug_state()'s entry of `team` (the one with its PEs, not predefined)."""
    rows = [row for row in shmem.debug_state()["teams"]
            if tuple(row["pes"]) == team.pes and not row["predefined"]]
    assert len(rows) == 1, shmem.debug_state()["teams"]
    return rows[0]


# ---- membership and numbering ------------------------------------------------------------

def _split_strided(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        world = shmem.TEAM_WORLD
        assert world.pes == tuple(range(size)) and world.my_pe == rank and world.n_pes == size
        assert shmem.TEAM_NODE.pes == tuple(range(size)), "every PE shares one host"
        assert world.predefined and shmem.TEAM_NODE.predefined
        evens = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, size // 2)
        odds = shmem.team_split_strided(None, 1, 2, size // 2)  # None: the world
        mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
        assert other is None, "a PE outside the new team gets None"
        assert isinstance(mine, shmem.Team) and not mine.predefined
        assert mine.pes == tuple(range(rank % 2, size, 2))
        assert mine.my_pe == rank // 2 and mine.n_pes == size // 2
        assert mine.translate_pe(mine.my_pe, shmem.TEAM_WORLD) == rank
        assert mine.translate_pe(0, None) == rank % 2
        assert world.translate_pe(rank, mine) == rank // 2
        assert world.translate_pe((rank + 1) % size, mine) == -1, "not in both teams"
        assert mine.translate_pe(size, world) == -1 and mine.translate_pe(-1, world) == -1
        with pytest.raises(TypeError, match="pe must be an int, but got str '0'"):
            mine.translate_pe("0", world)
        with pytest.raises(TypeError, match="other_team must be a shmem.Team or None, but got int"):
            mine.translate_pe(0, 3)
        text = repr(mine)
        assert text.startswith("Team(slot=") and text.endswith(
            f", pes={mine.pes}, my_pe={rank // 2})"), text
        assert repr(world) == f"Team(TEAM_WORLD, pes={tuple(range(size))}, my_pe={rank})"
        # A split of a team: collective over its PEs only (both parities split at once).
        last = shmem.team_split_strided(mine, mine.n_pes - 1, 1, 1)
        if mine.my_pe == mine.n_pes - 1:
            assert last.pes == (rank,) and last.my_pe == 0 and last.n_pes == 1
            shmem.barrier(team=last)
            last.destroy()
        else:
            assert last is None
        # Refusals before anything collective, alike on every PE.
        with pytest.raises(TypeError, match="start must be an int, but got str '0'"):
            shmem.team_split_strided(None, "0", 1, 1)
        with pytest.raises(TypeError, match="stride must be an int, but got bool True"):
            shmem.team_split_strided(None, 0, True, 1)
        with pytest.raises(TypeError, match="parent must be a shmem.Team or None, but got int"):
            shmem.team_split_strided(3, 0, 1, 1)
        with pytest.raises(ValueError, match="size must be representable as int32"):
            shmem.team_split_strided(None, 0, 1, 1 << 40)
        expect_shmem_error("INVALID_ARGUMENT", shmem.team_split_strided, None, 0, 1, size + 1)
        expect_shmem_error("INVALID_ARGUMENT", shmem.team_split_strided, None, size, 1, 1)
        expect_shmem_error("INVALID_ARGUMENT", shmem.team_split_strided, None, -1, 1, 1)
        with pytest.raises(TypeError, match="Team must be made by shmem.team"):
            shmem.Team(3)
        shmem.barrier(team=mine)
        mine.destroy()
    return True


@pytest.mark.cann_fake
def test_split_strided_membership_and_numbering(pes):
    assert all(pes(4).run(_split_strided))


def _split_2d(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        made = []
        for xrange in (2, 3, size):
            xteam, yteam = shmem.team_split_2d(shmem.TEAM_WORLD, xrange)
            x, y = rank % xrange, rank // xrange
            assert xteam.pes == tuple(p for p in range(size) if p // xrange == y), xrange
            assert xteam.my_pe == x, xrange
            assert yteam.pes == tuple(p for p in range(size) if p % xrange == x), xrange
            assert yteam.my_pe == y, xrange
            made.append((xteam, yteam))
        with pytest.raises(TypeError, match="xrange must be an int, but got float 2.0"):
            shmem.team_split_2d(None, 2.0)
        expect_shmem_error("INVALID_ARGUMENT", shmem.team_split_2d, None, 0)
        for xteam, yteam in made:  # rows first everywhere, then columns: no cycle
            xteam.destroy()
            yteam.destroy()
    return True


@pytest.mark.cann_fake
def test_split_2d_rows_and_columns(pes):
    assert all(pes(4).run(_split_2d))


def _from_group(rank, size):
    torch.set_num_threads(1)
    backwards = dist.new_group([3, 1], sort_ranks=False)  # every rank takes part in new_group
    whole = dist.new_group(list(range(size)))
    with shmem.acquire_shmem():
        out = shmem.empty(2 * 4, dtype=torch.int64)
        if rank in (3, 1):
            with shmem.team(backwards) as team:
                assert team.pes == (3, 1), "in the group's rank order"
                assert team.my_pe == dist.get_rank(backwards) == (0 if rank == 3 else 1)
                shmem.all_gather(out, torch.full((4,), rank, dtype=torch.int64, device=device()),
                                 team=team)
                assert out.tolist() == [3] * 4 + [1] * 4
            gone = expect_shmem_error("INVALID_ARGUMENT", shmem.barrier, team=team)  # destroyed
            # Named as the user knows it: its PEs, not a slot number.
            assert "team=the team of world PEs [3,1]" in str(gone), str(gone)
            assert "slot=" not in str(gone), str(gone)
            assert repr(team).endswith(", destroyed)"), repr(team)
        else:
            error = expect_shmem_error("INVALID_ARGUMENT", shmem.team, backwards)
            assert "a process group this process is a member of" in str(error), str(error)
            assert f"(global rank {rank})" in str(error), str(error)
        with shmem.team(whole) as team:
            assert team.pes == tuple(range(size)) and team.my_pe == rank
            shmem.barrier(team=team)
        with shmem.team(None) as team:  # the default group
            assert team.pes == tuple(range(size))
        with pytest.raises(TypeError, match="group must be a torch.distributed ProcessGroup or "
                                            "None, but got int"):
            shmem.team(3)
        shmem.barrier()
        shmem.free(out)
    return True


@pytest.mark.cann_fake
def test_team_of_a_process_group_in_its_rank_order(pes):
    assert all(pes(4).run(_from_group))


def _eight_pes(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        row, column = shmem.team_split_2d(None, 4)  # rows of 4, columns of 2
        assert row.pes == tuple(range(rank // 4 * 4, rank // 4 * 4 + 4)) and row.my_pe == rank % 4
        assert column.pes == (rank % 4, rank % 4 + 4) and column.my_pe == rank // 4
        pairs = shmem.team_split_strided(row, 1, 2, 2)  # row PEs 1 and 3
        if rank % 4 in (1, 3):
            assert pairs.pes == (rank // 4 * 4 + 1, rank // 4 * 4 + 3)
            assert pairs.my_pe == rank % 4 // 2
        else:
            assert pairs is None
        out = shmem.empty(4 * 3, dtype=torch.float32)
        shmem.all_gather(out, torch.full((3,), float(rank)), team=row)
        assert out.tolist() == [float(p) for p in row.pes for _ in range(3)]
        shmem.barrier()
        mine = torch.tensor([float(rank * 10 + j) for j in range(2) for _ in range(6)])
        shmem.all_to_all(out, mine, team=column)
        assert out.tolist() == [float(p * 10 + column.my_pe) for p in column.pes for _ in range(6)]
        shmem.barrier()
        if pairs is not None:
            pairs.destroy()
        row.destroy()
        column.destroy()
        shmem.free(out)
    return True


def test_eight_pes_2d_grid_nested_split_and_collectives(pes):
    assert all(pes(8).run(_eight_pes, timeout=300))


# ---- team collectives against gloo -------------------------------------------------------

def _against_gloo(rank, size):
    torch.set_num_threads(1)
    orders = [[0, 1], [2, 3], [3, 0, 2]]  # the last one out of rank order, PE 1 outside
    groups = [dist.new_group(order, sort_ranks=False) for order in orders]
    with shmem.acquire_shmem():
        mine = [(order, group) for order, group in zip(orders, groups) if rank in order]
        teams = [(order, group, shmem.team(group)) for order, group in mine]
        checked = 0
        call = 0
        for numel in (1, 7, 1000):
            for dtype in (torch.float32, torch.int64):
                output = shmem.empty(numel * 3, dtype=dtype)  # the largest team has 3 PEs
                for order, group, team in teams:
                    n = len(order)
                    call += 1
                    assert team.pes == tuple(order) and team.my_pe == order.index(rank)
                    target = output[: numel * n]
                    x = _values(rank, numel, dtype, call)
                    shmem.all_gather(target, x.to(device()), team=team)
                    expected = torch.empty(numel * n, dtype=dtype)
                    dist.all_gather_into_tensor(expected, x, group=group)  # gloo: CPU tensors
                    assert torch.equal(target.cpu(), expected), ("all_gather", order, dtype, numel)
                    y = _values(rank, numel * n, dtype, call)
                    shmem.all_to_all(target, y.to(device()), team=team)
                    dist.all_to_all_single(expected, y, group=group)
                    assert torch.equal(target.cpu(), expected), ("all_to_all", order, dtype, numel)
                    checked += 1
                shmem.barrier()  # every PE compared before the output is freed
                shmem.free(output)
        for _, _, team in teams:
            team.destroy()
    return checked


@pytest.mark.cann_fake
def test_team_collectives_match_gloo_subgroups(pes):
    counts = pes(4).run(_against_gloo, timeout=300)
    assert counts == [12, 6, 12, 12], counts


# ---- RMA in team numbering ---------------------------------------------------------------

def _rma(rank, size):
    torch.set_num_threads(1)
    reverse = dist.new_group(list(reversed(range(size))), sort_ranks=False)
    with shmem.acquire_shmem():
        team = shmem.team(reverse)  # team PE i is world PE size - 1 - i
        me = team.my_pe
        assert me == size - 1 - rank
        right, left = (me + 1) % size, (me - 1) % size
        world_left = size - 1 - left
        buf = shmem.empty(size, 4, dtype=torch.int64)
        box = shmem.empty(4, dtype=torch.int64)
        sig = shmem.empty(1, dtype=torch.int64)
        flag = shmem.empty(1, dtype=torch.int64)
        buf.fill_(-1)
        sig.zero_()
        flag.zero_()
        shmem.barrier()
        dev = device()
        shmem.put(buf[me], torch.full((4,), rank, dtype=torch.int64, device=dev), right, team=team)
        shmem.barrier(team=team)
        assert buf[left].tolist() == [world_left] * 4, "left's put landed in my row"
        local = torch.empty(4, dtype=torch.int64, device=dev)
        shmem.get(local, buf[me], right, team=team)  # what I put there
        assert local.tolist() == [rank] * 4
        shmem.signal(sig, 1, 0, operation="add", team=team)  # team PE 0 is world PE size - 1
        if rank == size - 1:
            shmem.wait_signal(sig, size, comparison="ge")
        shmem.put_signal(box, torch.full((4,), rank * 10, dtype=torch.int64, device=dev), flag, 1,
                         right, operation="add", team=team)
        shmem.wait_signal(flag, 1)
        assert box.tolist() == [world_left * 10] * 4, "data before the signal"
        shmem.barrier(team=team)
        assert int(sig) == (size if rank == size - 1 else 0)
        # A PE number outside the team, named by the call that took it.
        error = expect_shmem_error("INVALID_ARGUMENT", shmem.put, box,
                                   torch.zeros(4, dtype=torch.int64, device=dev), size, team=team)
        assert error.operation == "put" and error.phase == "validate", str(error)
        expect_shmem_error("INVALID_ARGUMENT", shmem.get, local, box, -1, team=team)
        expect_shmem_error("INVALID_ARGUMENT", shmem.signal, sig, 1, size, team=team)
        with pytest.raises(TypeError, match="team must be a shmem.Team or None, but got str"):
            shmem.put(box, torch.zeros(4, dtype=torch.int64, device=dev), 0, team="world")
        with pytest.raises(TypeError, match="team must be a shmem.Team or None, but got int"):
            shmem.barrier(team=0)
        # TEAM_WORLD numbers as the world does.
        shmem.put(buf[rank], torch.full((4,), 7, dtype=torch.int64, device=dev), (rank + 1) % size,
                  team=shmem.TEAM_WORLD)
        shmem.barrier(team=shmem.TEAM_WORLD)
        assert buf[(rank - 1) % size].tolist() == [7] * 4
        team.destroy()
        for t in (flag, sig, box, buf):
            shmem.free(t)
    return True


@pytest.mark.cann_fake
def test_put_get_signal_in_team_numbering(pes):
    assert all(pes(4).run(_rma))


# ---- several teams at once, in program order ---------------------------------------------

ROUNDS = 25


def _drive(kind, team, output, rank, salt, errors):
    try:
        n = team.n_pes
        for call in range(ROUNDS):
            if kind == "all_gather":
                shmem.all_gather(output, torch.full((8,), rank * 1000 + salt + call,
                                                    dtype=torch.int64), team=team)
                expected = [p * 1000 + salt + call for p in team.pes for _ in range(8)]
            else:
                mine = torch.tensor([rank * 1000 + salt + call * 10 + j for j in range(n)
                                     for _ in range(8)], dtype=torch.int64)
                shmem.all_to_all(output, mine, team=team)
                expected = [p * 1000 + salt + call * 10 + team.my_pe
                            for p in team.pes for _ in range(8)]
            assert output.tolist() == expected, (kind, call)
    except BaseException as error:
        errors.append(error)


def _concurrent(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        row, column = shmem.team_split_2d(None, 2)  # two teams per PE; rows are disjoint
        row_out = shmem.empty(2 * 8, dtype=torch.int64)
        column_out = shmem.empty(2 * 8, dtype=torch.int64)
        errors: list = []
        threads = [threading.Thread(target=_drive, args=("all_gather", row, row_out, rank, 1,
                                                         errors)),
                   threading.Thread(target=_drive, args=("all_to_all", column, column_out,
                                                         rank, 500, errors))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads) and errors == [], errors
        state = shmem.debug_state()
        for team in (row, column):
            entry = _team_row(team)
            assert entry["sequence"] - entry["first_sequence"] == ROUNDS, entry
            assert entry["in_flight"] == 0 and entry["stream"] is None, entry
        assert state["teams"][0]["slot"] == 0 and state["teams"][0]["predefined"]
        shmem.barrier()
        row.destroy()
        column.destroy()
        shmem.free(column_out)
        shmem.free(row_out)
    return True


def test_collectives_of_two_teams_from_two_threads_at_once(pes):
    assert all(pes(4).run(_concurrent, timeout=300))


def _program_order(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        row, column = shmem.team_split_2d(None, 2)
        three = shmem.team_split_strided(None, 0, 1, 3)  # overlaps both
        out = shmem.empty(size * 4, dtype=torch.int64)
        dev = device()
        for call in range(10):
            shmem.all_gather(out[:8], torch.full((4,), rank + call, dtype=torch.int64, device=dev),
                             team=row)
            assert out[:8].tolist() == [p + call for p in row.pes for _ in range(4)]
            shmem.barrier(team=row)
            mine = torch.tensor([rank * 100 + j * 10 + call for j in range(2) for _ in range(4)],
                                dtype=torch.int64, device=dev)
            shmem.all_to_all(out[:8], mine, team=column)
            assert out[:8].tolist() == [p * 100 + column.my_pe * 10 + call
                                        for p in column.pes for _ in range(4)]
            if three is not None:
                shmem.barrier(team=three)
                shmem.all_gather(out[:12], torch.full((4,), -rank - call, dtype=torch.int64,
                                                      device=dev), team=three)
                assert out[:12].tolist() == [-p - call for p in three.pes for _ in range(4)]
            shmem.barrier()
            shmem.all_gather(out, torch.full((4,), rank * call, dtype=torch.int64, device=dev))
            assert out.tolist() == [p * call for p in range(size) for _ in range(4)]
            shmem.barrier()
        if three is not None:
            three.destroy()
        row.destroy()
        column.destroy()
        shmem.free(out)
    return True


@pytest.mark.cann_fake
def test_overlapping_teams_in_program_order(pes):
    assert all(pes(4).run(_program_order))


# ---- mismatches and refusals -------------------------------------------------------------

def _mismatch(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        team = shmem.team_split_strided(None, 0, 1, 3)  # world PEs 0, 1, 2
        out = shmem.empty(3 * 8, dtype=torch.float32)
        out.fill_(-1.0)
        shmem.barrier()
        texts = []
        dev = device()
        if team is not None:
            numel = 8 if rank == 1 else 4
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather,
                                       out[: 3 * numel], torch.full((numel,), float(rank),
                                                                    device=dev),
                                       team=team)
            texts.append(str(error))
            assert "field=bytes" in str(error), str(error)
            assert bool((out == -1.0).all()), "no byte moved"
            if rank == 0:
                error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.barrier, team=team)
            else:
                error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, out[:12],
                                           torch.full((4,), float(rank), device=dev), team=team)
            texts.append(str(error))
            assert "field=kind" in str(error), str(error)
            # In step: a matching call works.
            shmem.all_gather(out[:12], torch.full((4,), float(rank), device=dev), team=team)
            assert out[:12].tolist() == [float(p) for p in range(3) for _ in range(4)]
            shmem.barrier(team=team)
            team.destroy()
        shmem.barrier()
        shmem.free(out)
    return texts


@pytest.mark.cann_fake
def test_a_mismatch_in_a_team_fails_on_every_team_pe_naming_the_team(pes):
    texts = pes(4).run(_mismatch)
    assert texts[3] == [], "world PE 3 is not in the team"
    for rank in range(3):
        for text in texts[rank]:
            assert re.search(r"team=team \d+ pes=\[0,1,2\], sequence=\d+, field=", text), text
            assert "pe 1 (team pe 1): all_gather #" in text, text


def _refusals(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        first = shmem.team_split_strided(None, 0, 1, 2)   # world PEs 0 and 1
        second = shmem.team_split_strided(None, 0, 1, 2)  # the same ranks: the same team
        buf = shmem.empty(4, dtype=torch.int64)
        if first is not None:
            assert _team_row(first)["handles"] == 2, "two handles of one team"
            first.destroy()
            assert _team_row(second)["handles"] == 1
            shmem.barrier(team=second)  # the team lives on with its other handle
            for call in (lambda: first.destroy(), lambda: shmem.barrier(team=first),
                         lambda: shmem.all_gather(buf, torch.zeros(2, dtype=torch.int64),
                                                  team=first),
                         lambda: shmem.put(buf, torch.zeros(4, dtype=torch.int64), 0,
                                           team=first),
                         lambda: first.pes):
                expect_shmem_error("INVALID_ARGUMENT", call)
            assert repr(first).endswith(", destroyed)"), repr(first)
            second.destroy()
            assert not [row for row in shmem.debug_state()["teams"] if not row["predefined"]]
        else:
            assert second is None
        # Re-created after its end: a new team of the same PEs works.
        again = shmem.team_split_strided(None, 0, 1, 2)
        if again is not None:
            assert again.pes == (0, 1)
            shmem.all_gather(buf, torch.full((2,), rank, dtype=torch.int64), team=again)
            assert buf.tolist() == [0, 0, 1, 1]
            again.destroy()
        for predefined in (shmem.TEAM_WORLD, shmem.TEAM_NODE):
            error = expect_shmem_error("INVALID_ARGUMENT", predefined.destroy)
            assert "predefined teams end with the lifecycle" in str(error), str(error)
            with pytest.raises(shmem.ShmemError, match="leaving the block destroys it"):
                with predefined:
                    pass
        # A team is made by its members only: a list of PEs without this one is refused.
        outsiders = [pe for pe in range(size) if pe != rank][:2]
        error = expect_shmem_error("INVALID_ARGUMENT", native.team_create, outsiders)
        assert shmem.TEAM_WORLD.pes == tuple(range(size)), "still usable"
        shmem.barrier()
        shmem.free(buf)
    return True


def test_destroy_recreate_and_refused_handles(pes):
    assert all(pes(4).run(_refusals))


def _exhaustion(rank, size):
    torch.set_num_threads(1)
    os.environ["HYPER_PARALLEL_SHMEM_MAX_TEAMS"] = "4"  # the world's slot and 3 more
    with shmem.acquire_shmem():
        assert shmem.debug_state()["config"]["max_teams"] == 4
        row, column = shmem.team_split_2d(None, 2)         # two slots on every PE
        whole, single = shmem.team_split_2d(None, size)    # the world's ranks, and {rank}
        assert whole.pes == tuple(range(size)) and single.pes == (rank,)
        outcome = None
        try:
            shmem.team_split_strided(None, 0, 1, 3)  # world PEs 0, 1, 2: no slot left
        except shmem.ShmemError as error:
            outcome = (error.error_code, str(error))
        single.destroy()  # a slot free again on every PE
        three = shmem.team_split_strided(None, 0, 1, 3)
        if three is not None:
            shmem.barrier(team=three)
            three.destroy()
        for team in (row, column, whole):
            team.destroy()
    return outcome


def test_exhausted_team_slots_fail_alike_on_every_member(pes):
    outcomes = pes(4).run(_exhaustion)
    for rank in range(3):
        code, text = outcomes[rank]
        assert code == "INVALID_STATE" and "HYPER_PARALLEL_SHMEM_MAX_TEAMS" in text, text
        assert "pes=[0,1,2], max_teams=4" in text, text
    assert outcomes[3] is None, "world PE 3 is outside the new team: it gets None"


def _older_lifecycle(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        row, column = shmem.team_split_2d(None, 2)
        column.destroy()
        lifecycle = shmem.debug_state()["lifecycle"]
    # Every team ended with the last close; outside a lifecycle nothing answers.
    expect_shmem_error("INVALID_STATE", lambda: row.pes)
    expect_shmem_error("INVALID_STATE", lambda: shmem.TEAM_WORLD.my_pe)
    assert repr(shmem.TEAM_WORLD) == "Team(TEAM_WORLD, INVALID_STATE)"
    expect_shmem_error("INVALID_STATE", shmem.team, None)
    expect_shmem_error("INVALID_STATE", shmem.team_split_2d, None, 2)
    with shmem.acquire_shmem():
        assert shmem.debug_state()["lifecycle"] != lifecycle
        buf = shmem.empty(4, dtype=torch.int64)
        for call in (lambda: shmem.barrier(team=row), lambda: row.destroy(),
                     lambda: shmem.put(buf, torch.zeros(4, dtype=torch.int64, device=device()), 0,
                                       team=row),
                     lambda: row.my_pe):
            expect_shmem_error("STALE_LIFECYCLE", call)
        assert repr(row).endswith(", STALE_LIFECYCLE)"), repr(row)
        # The predefined teams stand for the current lifecycle's.
        assert shmem.TEAM_WORLD.pes == tuple(range(size))
        shmem.barrier(team=shmem.TEAM_WORLD)
        shmem.barrier(team=shmem.TEAM_NODE)
        shmem.free(buf)
    return True


@pytest.mark.cann_fake
def test_a_handle_of_an_older_lifecycle_is_refused(pes):
    assert all(pes(4).run(_older_lifecycle))


# ---- diagnostics -------------------------------------------------------------------------

def _debug_teams(rank, size):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        gate = shmem.empty(1, dtype=torch.int64)
        gate.zero_()
        world = shmem.debug_state()["teams"][0]
        assert world["slot"] == 0 and world["pes"] == list(range(size)), world
        assert world["my_pe"] == rank and world["predefined"] and world["handles"] == 0, world
        assert world["in_flight"] == 0 and world["stream"] is None, world
        row, column = shmem.team_split_2d(None, 2)
        shmem.barrier(team=row)
        entry = _team_row(row)
        assert entry["slot"] > 0 and entry["my_pe"] == row.my_pe and entry["handles"] == 1
        assert entry["sequence"] == entry["first_sequence"] + 1, entry
        assert "teams=[" in repr(shmem.debug_state())
        shmem.barrier()
        # Row PE 0 waits in a row barrier that row PE 1 enters only once it saw so.
        if row.my_pe == 1:
            shmem.wait_signal(gate, 1)
            shmem.barrier(team=row)
        else:
            thread, errors = in_background(shmem.barrier, row)
            assert eventually(lambda: _team_row(row)["in_flight"] == 1)
            entry = _team_row(row)
            assert entry["stream"].startswith("default (thread "), entry
            assert entry["sequence"] == entry["first_sequence"] + 2, entry
            assert eventually(lambda: shmem.debug_state()["blocked"])
            blocked = shmem.debug_state()["blocked"][0]
            assert blocked["operation"] == "barrier", blocked
            shmem.signal(gate, 1, 1, team=row)
            thread.join(60)
            assert not thread.is_alive() and errors == [], errors
        shmem.barrier()
        row.destroy()
        column.destroy()
        shmem.free(gate)
    return True


def test_debug_state_shows_the_teams(pes):
    assert all(pes(4).run(_debug_teams))


# ---- a PE lost during a team barrier ------------------------------------------------------

_CONTEXT = multiprocessing.get_context("spawn")


def _lost_pe(rank, size, init_file, conn):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ.pop("HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", None)  # the default 120 s
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=size, timeout=timedelta(seconds=60))
    result = {"rank": rank}
    try:
        handle = shmem.acquire_shmem()
        words = shmem.empty(2, dtype=torch.int64)  # [0] pid, [1] armed
        words.zero_()
        words[0] = os.getpid()
        shmem.barrier()
        victim = size - 1
        team = shmem.team_split_strided(None, 0, victim, 2)  # world PEs 0 and the victim
        victim_pid = torch.zeros(1, dtype=torch.int64)
        shmem.get(victim_pid, words[:1], victim)
        shmem.barrier()
        if rank == victim:
            shmem.wait_signal(words[1:], size - 1, comparison="ge")
            time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGKILL)
        shmem.signal(words[1:], 1, victim, operation="add")
        try:
            if team is not None:
                shmem.barrier(team=team)  # the team barrier the victim never enters
            else:
                shmem.barrier()
            raise AssertionError("the barrier returned although the victim is gone")
        except shmem.ShmemError as error:
            result["code"] = error.error_code
            result["names_victim"] = f"pe={victim}, pid={int(victim_pid)}" in str(error)
            result["in_team"] = team is not None
        try:
            handle.close()
        except shmem.ShmemError as closing:
            result["close"] = closing.error_code
        result["closed"] = handle.closed
    except BaseException:
        result["error"] = traceback.format_exc()
    conn.send(result)


def test_a_pe_lost_during_a_team_barrier():
    size = 3
    workdir = tempfile.mkdtemp(prefix="hps-teams-lost-")
    init_file = os.path.join(workdir, "rendezvous")
    conns, procs = [], []
    try:
        for rank in range(size):
            parent, child = _CONTEXT.Pipe(duplex=False)
            proc = _CONTEXT.Process(target=_lost_pe, args=(rank, size, init_file, child))
            proc.start()
            child.close()
            conns.append(parent)
            procs.append(proc)
        deadline = time.monotonic() + 90.0
        results = {}
        for rank, conn in enumerate(conns):
            if conn.poll(max(0.0, deadline - time.monotonic())):
                try:
                    results[rank] = conn.recv()
                except EOFError:
                    pass
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
        codes = [proc.exitcode for proc in procs]
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        shutil.rmtree(workdir, ignore_errors=True)
    assert codes[size - 1] == -signal.SIGKILL, (codes, results)
    for rank in range(size - 1):
        r = results.get(rank)
        assert codes[rank] == 0 and r is not None and "error" not in r, (codes, results)
        assert r["code"] == "PEER_LOST" and r["names_victim"], r
        assert r["close"] == "PEER_LOST" and r["closed"], r
    assert results[0]["in_team"] and not results[1]["in_team"]
