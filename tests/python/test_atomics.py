"""Atomics on one element of a symmetric tensor, fence and quiet, put_nbi and get_nbi, and waits
on several signal words: every fetch_add's old value handed out once, a lock that keeps a
read-modify-write whole, swaps that lose no value, bitwise operations with the top bit set,
wrap-around, floats, order under fence, non-blocking transfers completed by quiet and by a
barrier, wait_signal_any / all / some with and without a mask, test_signal, every rejection, team
numbering, the same under torch.compile, and the network path: every peer remote over loopback
(HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) and hosts of two PEs beside each other on one word
(REMOTE_PEERS=blocks:2).

The loopback tests start pools of their own (PePool takes an environment), one per setting,
shared by this file's tests; they are host_only and need UCX, as test_scale_out.py does.
"""

from __future__ import annotations

import math
import os
import time

import pytest
import torch

from helpers import eventually, expect_shmem_error, in_background
from hyper_parallel.core.multicore import shmem
from pe_pool import PePool

# A rejection is a ValueError raised in Python or a ShmemError INVALID_ARGUMENT from the native
# checks: either is the contract.
RAISES = (ValueError, shmem.ShmemError)

UNSIGNED = [dtype for dtype in (getattr(torch, "uint32", None), getattr(torch, "uint64", None))
            if dtype is not None]
INTEGERS = [torch.int32, torch.int64, *UNSIGNED]

FETCH_SET_SWAP = ("atomic_fetch", "atomic_set", "atomic_swap")  # also on float32 / float64
INTEGER_ONLY = ("atomic_compare_swap", "atomic_fetch_add", "atomic_fetch_inc", "atomic_fetch_and",
                "atomic_fetch_or", "atomic_fetch_xor", "atomic_add", "atomic_inc", "atomic_and",
                "atomic_or", "atomic_xor")


def _bits(dtype: torch.dtype) -> int:
    return torch.iinfo(dtype).bits


def _signed(value: int, bits: int) -> int:
    """value's low `bits` bits read as a two's complement integer."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _is_old_value(result, dtype: torch.dtype) -> None:
    """A fetching atomic's result: a 0-dim tensor of dest's dtype."""
    assert isinstance(result, torch.Tensor), type(result)
    assert result.dim() == 0 and result.dtype == dtype, (result.shape, result.dtype)


def _spin_until(condition, what: str, bound_s: float = 30.0) -> int:
    """Spins on condition, yielding the core (two cores, four PEs); returns the spins. The bound
    is against hangs only."""
    deadline = time.monotonic() + bound_s
    spins = 0
    while not condition():
        spins += 1
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {bound_s} s")
        os.sched_yield()
    return spins


# ---- fetch_add / fetch_inc: every old value handed out once ------------------------------------

def _fetch_add_permutation(rank, size, dtype, op, n, scalar):
    with shmem.acquire_shmem():
        # The word: a one-element view inside an allocation (not its first element), or a
        # 0-dim allocation of its own.
        words = shmem.empty((), dtype=dtype) if scalar else shmem.empty(4, dtype=dtype)
        words.zero_()
        counter = words if scalar else words[2]
        shmem.barrier()
        got = []
        for i in range(n):
            if op == "fetch_add":
                old = shmem.atomic_fetch_add(counter, 1, 0)
            else:
                old = shmem.atomic_fetch_inc(counter, 0)
            if i == 0:
                _is_old_value(old, dtype)
            got.append(int(old))
        shmem.barrier()
        final = int(counter) if rank == 0 else None
        others = [] if scalar or rank != 0 else words[[0, 1, 3]].tolist()
        shmem.barrier()
        shmem.free(words)
    # One PE's fetches complete in turn on a word that only grows: each sees a larger value.
    assert all(a < b for a, b in zip(got, got[1:])), "a PE's own old values increase"
    assert others == [0, 0, 0] or others == [], others
    return got, final


def _check_permutation(results, size, n):
    assert results[0][1] == size * n, results[0][1]
    handed_out = sorted(value for got, _ in results for value in got)
    assert handed_out == list(range(size * n)), "every old value exactly once"


@pytest.mark.parametrize("dtype, op, scalar", [(torch.int64, "fetch_add", False),
                                               (torch.int32, "fetch_add", False),
                                               (torch.int64, "fetch_inc", True),
                                               (torch.int32, "fetch_inc", False)],
                         ids=["int64-fetch_add-view", "int32-fetch_add-view",
                              "int64-fetch_inc-0dim", "int32-fetch_inc-view"])
def test_fetch_add_hands_out_every_old_value_once(pes, dtype, op, scalar):
    n = 10_000
    results = pes(4).run(_fetch_add_permutation, dtype, op, n, scalar)
    _check_permutation(results, 4, n)


# ---- a lock from compare_swap keeps a read-modify-write whole -------------------------------

def _spin_lock(rank, size, rounds):
    with shmem.acquire_shmem():
        words = shmem.empty(2, dtype=torch.int64)
        value = shmem.empty(1, dtype=torch.int64)
        words.zero_()
        value.zero_()
        shmem.barrier()
        lock = words[1]
        scratch = torch.empty(1, dtype=torch.int64)
        for _ in range(rounds):
            # Acquire: 0 -> this PE's mark (rank + 1) on PE 0.
            _spin_until(lambda: int(shmem.atomic_compare_swap(lock, 0, rank + 1, 0)) == 0,
                        "the lock")
            assert int(shmem.atomic_fetch(lock, 0)) == rank + 1, "held by this PE alone"
            # The critical section: not atomic by itself.
            shmem.get(scratch, value, 0)
            shmem.put(value, scratch + 1, 0)
            shmem.quiet()  # the put is there before the lock is free
            assert shmem.atomic_set(lock, 0, 0) is None
        shmem.barrier()
        final = (int(value), words.tolist()) if rank == 0 else None
        shmem.barrier()
        shmem.free(value)
        shmem.free(words)
    return final


def test_compare_swap_lock_guards_a_read_modify_write(pes):
    rounds = 200
    results = pes(4).run(_spin_lock, rounds)
    assert results[0] == (4 * rounds, [0, 0]), results[0]


def _compare_swap_one_winner(rank, size, dtype):
    bits = _bits(dtype)
    with shmem.acquire_shmem():
        words = shmem.empty(4, dtype=dtype)
        words.zero_()
        shmem.barrier()
        w = words[1]
        outcomes = []
        # A plain value, then the most negative one (sign and width in the comparison).
        for start, mine in ((7, 100 + rank), (-(1 << (bits - 1)), -1 - rank)):
            if rank == 0:
                shmem.atomic_set(w, start, 0)
                shmem.quiet()
            shmem.barrier()
            miss = shmem.atomic_compare_swap(w, start + 1, 12345, 0)  # cond differs: no write
            _is_old_value(miss, dtype)
            assert int(miss) == start, (int(miss), start)
            shmem.barrier()
            old = shmem.atomic_compare_swap(w, start, mine, 0)
            shmem.quiet()
            shmem.barrier()
            outcomes.append((int(old), int(shmem.atomic_fetch(w, 0))))
            shmem.barrier()
        untouched = [words[0].item(), words[2].item(), words[3].item()]
        shmem.barrier()
        shmem.free(words)
    assert untouched == [0, 0, 0], untouched
    return outcomes


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
def test_compare_swap_has_one_winner(pes, dtype):
    size = 4
    results = pes(size).run(_compare_swap_one_winner, dtype)
    for stage, (start, value_of) in enumerate(((7, lambda r: 100 + r),
                                               (-(1 << (_bits(dtype) - 1)), lambda r: -1 - r))):
        olds = [outcomes[stage][0] for outcomes in results]
        winners = [rank for rank, old in enumerate(olds) if old == start]
        assert len(winners) == 1, (stage, olds)
        final = value_of(winners[0])
        assert all(old == final for rank, old in enumerate(olds) if rank != winners[0]), olds
        assert all(outcomes[stage][1] == final for outcomes in results), results


# ---- swap: every value handed over once -----------------------------------------------------

INITIAL = -12345


def _swap_chain(rank, size, n):
    with shmem.acquire_shmem():
        words = shmem.empty(4, dtype=torch.int64)
        words.fill_(INITIAL)
        shmem.barrier()
        got = []
        for i in range(n):
            old = shmem.atomic_swap(words[2], rank * 1_000_000 + i, 0)
            if i == 0:
                _is_old_value(old, torch.int64)
            got.append(int(old))
        shmem.barrier()
        final = int(words[2]) if rank == 0 else None
        shmem.barrier()
        shmem.free(words)
    return got, final


def test_swap_hands_over_every_value_once(pes):
    size, n = 4, 2000
    results = pes(size).run(_swap_chain, n)
    swapped_in = [rank * 1_000_000 + i for rank in range(size) for i in range(n)]
    returned = [value for got, _ in results for value in got] + [results[0][1]]
    # Each value a PE swapped in is handed out once (to a later swap or as the final word),
    # and the initial value once.
    assert sorted(returned) == sorted([INITIAL] + swapped_in)


# ---- bitwise, 32 and 64 bits, the top bit set ----------------------------------------------

def _bitwise(rank, size, dtype):
    bits = _bits(dtype)
    mask = (1 << bits) - 1
    assert size <= 8

    def bits_of(pe):
        value = 1 << pe
        if bits == 64:
            value |= 1 << (pe + 32)
        if pe == size - 1:
            value |= 1 << (bits - 1)  # the top bit: the word is negative
        return value

    mine = bits_of(rank)
    every = 0
    for pe in range(size):
        every |= bits_of(pe)
    mine_s, every_s = _signed(mine, bits), _signed(every, bits)
    pattern_s = _signed(0xA5A5A5A5A5A5A5A5 & mask, bits)
    with shmem.acquire_shmem():
        words = shmem.empty(4, dtype=dtype)
        words.zero_()
        shmem.barrier()
        w = words[1]

        def settle():
            shmem.quiet()
            shmem.barrier()

        def fetched():
            value = shmem.atomic_fetch(w, 0)
            _is_old_value(value, dtype)
            return int(value)

        # or: every PE's bits.
        assert shmem.atomic_or(w, mine_s, 0) is None
        settle()
        assert fetched() == every_s, (fetched(), every_s)
        shmem.barrier()
        # fetch_and clears mine: my bits were all set when I cleared them.
        old = shmem.atomic_fetch_and(w, ~mine_s, 0)
        _is_old_value(old, dtype)
        assert int(old) & mask & mine == mine, (int(old), mine)
        settle()
        assert fetched() == 0
        if rank == 0:
            assert int(w) == 0
        shmem.barrier()
        # fetch_or sets them again: none of mine was set before.
        old = shmem.atomic_fetch_or(w, mine_s, 0)
        assert int(old) & mask & mine == 0, (int(old), mine)
        settle()
        assert fetched() == every_s
        shmem.barrier()
        # and without fetching.
        assert shmem.atomic_and(w, ~mine_s, 0) is None
        settle()
        assert fetched() == 0
        shmem.barrier()
        # xor twice restores; the first returns my bits as they were in the pattern.
        if rank == 0:
            shmem.atomic_set(w, pattern_s, 0)
        settle()
        assert fetched() == pattern_s
        shmem.barrier()
        old = shmem.atomic_fetch_xor(w, mine_s, 0)
        assert int(old) & mask & mine == pattern_s & mask & mine, (int(old), pattern_s)
        assert shmem.atomic_xor(w, mine_s, 0) is None
        settle()
        assert fetched() == pattern_s
        if rank == 0:
            assert int(w) == pattern_s and int(words[0]) == 0 and int(words[2]) == 0
        shmem.barrier()
        shmem.free(words)
    return True


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
def test_bitwise_operations_and_the_sign_bit(pes, dtype):
    assert all(pes(4).run(_bitwise, dtype))


# ---- wrap-around and the unsigned types ----------------------------------------------------

def _integer_edges(rank, size, dtype):
    info = torch.iinfo(dtype)
    signed = info.min < 0
    with shmem.acquire_shmem():
        words = shmem.empty(4, dtype=dtype)
        words.zero_()
        if rank == 0:
            words[1].fill_(info.max)  # locally: no value argument beyond int64 needed
        shmem.barrier()
        w = words[1]
        if rank == size - 1:
            def fetched():
                value = shmem.atomic_fetch(w, 0)
                _is_old_value(value, dtype)
                return value.item()

            old = shmem.atomic_fetch_add(w, 1, 0)
            _is_old_value(old, dtype)
            assert old.item() == info.max, old.item()  # unsigned stays unsigned
            assert fetched() == info.min, "add wraps around like C"
            assert shmem.atomic_add(w, 5, 0) is None
            shmem.quiet()
            assert fetched() == info.min + 5
            assert shmem.atomic_fetch_inc(w, 0).item() == info.min + 5
            assert shmem.atomic_inc(w, 0) is None
            shmem.quiet()
            assert fetched() == info.min + 7
            assert shmem.atomic_swap(w, 2, 0).item() == info.min + 7
            assert shmem.atomic_compare_swap(w, 3, 8, 0).item() == 2 and fetched() == 2
            assert shmem.atomic_compare_swap(w, 2, 8, 0).item() == 2 and fetched() == 8
            assert shmem.atomic_set(w, 1, 0) is None
            shmem.quiet()
            assert fetched() == 1
            if signed:
                shmem.atomic_add(w, -2, 0)
                shmem.quiet()
                assert fetched() == -1
                shmem.atomic_set(w, info.min, 0)
                shmem.atomic_add(w, -1, 0)
                shmem.quiet()
                assert fetched() == info.max, "wraps downward too"
            elif info.max < (1 << 63):  # uint32: a value beyond int32's range
                shmem.atomic_add(w, info.max, 0)  # 1 + max wraps to 0
                shmem.quiet()
                assert fetched() == 0
        shmem.barrier()
        untouched = [words[0].item(), words[2].item(), words[3].item()]
        shmem.barrier()
        shmem.free(words)
    assert untouched == [0, 0, 0], untouched
    return True


@pytest.mark.parametrize("dtype", INTEGERS, ids=[str(d).replace("torch.", "") for d in INTEGERS])
def test_wrap_around_and_unsigned_values(pes, dtype):
    assert all(pes(2).run(_integer_edges, dtype))


# ---- floats: fetch, set and swap -----------------------------------------------------------

def _floats(rank, size, dtype):
    def exact(value):  # value as dtype holds it
        return torch.tensor(value, dtype=dtype).item()

    with shmem.acquire_shmem():
        words = shmem.empty(4, dtype=dtype)
        words.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        w = words[1]
        assert shmem.atomic_set(w, -2.25 * (rank + 1), nxt) is None
        shmem.quiet()
        shmem.barrier()
        assert w.item() == -2.25 * (prv + 1), w.item()
        shmem.barrier()  # every PE read its word before the previous PE swaps into it
        got = shmem.atomic_fetch(w, nxt)
        _is_old_value(got, dtype)
        assert got.item() == -2.25 * (rank + 1)
        old = shmem.atomic_swap(w, 1.5, nxt)
        _is_old_value(old, dtype)
        assert old.item() == -2.25 * (rank + 1)
        shmem.quiet()
        shmem.barrier()
        assert w.item() == 1.5
        shmem.barrier()
        # A value float32 cannot hold: rounded as torch rounds it. Then -0.0 and -inf, bit for
        # bit.
        assert shmem.atomic_swap(w, 0.1, nxt).item() == 1.5
        shmem.atomic_set(words[2], -0.0, nxt)
        shmem.atomic_set(words[3], float("-inf"), nxt)
        shmem.quiet()
        shmem.barrier()
        assert w.item() == exact(0.1) and shmem.atomic_fetch(w, rank).item() == exact(0.1)
        assert math.copysign(1.0, words[2].item()) == -1.0, "the sign of -0.0 kept"
        assert words[3].item() == float("-inf")
        assert words[0].item() == 0.0
        shmem.barrier()
        shmem.free(words)
    return True


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_fetch_set_and_swap_on_floats(pes, dtype):
    assert all(pes(4).run(_floats, dtype))


# ---- rejections ----------------------------------------------------------------------------

def _args(op, dest, value, pe):
    if op in ("atomic_fetch", "atomic_fetch_inc", "atomic_inc"):
        return (dest, pe)
    if op == "atomic_compare_swap":
        return (dest, value, value, pe)
    return (dest, value, pe)


def _natural(dtype):
    """A value of the Python type dtype's elements have: only the dtype can be refused."""
    if dtype == torch.bool:
        return True
    return 1.0 if dtype.is_floating_point else 1


def _rejections(rank, size):
    with shmem.acquire_shmem():
        ints = shmem.empty(4, dtype=torch.int64)
        ints.zero_()
        by_dtype = {dtype: shmem.empty(2, dtype=dtype)
                    for dtype in (torch.float32, torch.float64, torch.int8, torch.int16,
                                  torch.uint8, torch.float16, torch.bfloat16, torch.bool)}
        for tensor in by_dtype.values():
            tensor.zero_()
        shmem.barrier()
        peer = (rank + 1) % size
        for dtype, tensor in by_dtype.items():
            refused = INTEGER_ONLY if dtype in (torch.float32, torch.float64) \
                else FETCH_SET_SWAP + INTEGER_ONLY
            for op in refused:
                with pytest.raises(RAISES, match="dtype"):
                    getattr(shmem, op)(*_args(op, tensor[1], _natural(dtype), peer))
        for op in FETCH_SET_SWAP + INTEGER_ONLY:
            fn = getattr(shmem, op)
            # Not one element: two, or none.
            with pytest.raises(RAISES, match="one element"):
                fn(*_args(op, ints[:2], 1, peer))
            with pytest.raises(RAISES, match="one element"):
                fn(*_args(op, ints[:0], 1, peer))
            # Not symmetric; a PE out of range.
            with pytest.raises(RAISES):
                fn(*_args(op, torch.zeros((), dtype=torch.int64), 1, peer))
            with pytest.raises(RAISES):
                fn(*_args(op, ints[1], 1, size))
        with pytest.raises(RAISES):
            shmem.put_nbi(torch.zeros(4, dtype=torch.int64), torch.ones(4, dtype=torch.int64), peer)
        with pytest.raises(RAISES):
            shmem.get_nbi(torch.zeros(4, dtype=torch.int64), torch.ones(4, dtype=torch.int64), peer)
        shmem.quiet()
        shmem.barrier()
        # Refused calls wrote nothing anywhere.
        assert ints.tolist() == [0, 0, 0, 0], ints
        for dtype, tensor in by_dtype.items():
            assert not tensor.any(), (dtype, tensor)
        # Still usable.
        assert int(shmem.atomic_fetch_add(ints[1], 1, peer)) == 0  # one adder per word
        shmem.quiet()
        shmem.barrier()
        assert ints.tolist() == [0, 1, 0, 0], ints
        for tensor in by_dtype.values():
            shmem.free(tensor)
        shmem.free(ints)
    return True


def test_rejections_dtype_size_symmetry_and_pe(pes):
    assert all(pes(2).run(_rejections))


# ---- fence: what comes before it is delivered before what follows ---------------------------

def _fence_ordering(rank, size, rounds, big_every):
    big = (1 << 20) // 8  # 1 MiB of int64: the network path's large-message handling
    with shmem.acquire_shmem():
        data = shmem.empty(big, dtype=torch.int64)
        flag = shmem.empty(1, dtype=torch.int64)
        ack = shmem.empty(1, dtype=torch.int64)
        data.fill_(-1)
        flag.zero_()
        ack.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size

        def payload(pe, round_, n):
            return torch.arange(n, dtype=torch.int64) + (round_ * 1_000_003 + pe * 7)

        for round_ in range(1, rounds + 1):
            n = big if round_ % big_every == 0 else 64 + round_
            # To the next PE: the payload, fence, then the flag (a put or an atomic, not a
            # signal, which is ordered after the data by itself). The payload goes non-blocking,
            # so that a large one is still on its way when the flag goes.
            shmem.put_nbi(data[:n], payload(rank, round_, n), nxt)
            shmem.fence()
            if round_ % 2 == 0:
                shmem.put(flag, torch.tensor([round_], dtype=torch.int64), nxt)
            else:
                shmem.atomic_set(flag[0], round_, nxt)
            # From the previous PE: its flag, then its payload must all be there.
            assert eventually(lambda: shmem.test_signal(flag, round_)), \
                f"round {round_}: the flag never came"
            assert int(flag) == round_
            arrived = data[:n]
            assert torch.equal(arrived, payload(prv, round_, n)), \
                (round_, n, int((arrived != payload(prv, round_, n)).sum()))
            # Let the previous PE overwrite data only once it is read.
            shmem.signal(ack, round_, prv)
            shmem.wait_signal(ack, round_, comparison="ge")
        shmem.barrier()
        shmem.free(ack)
        shmem.free(flag)
        shmem.free(data)
    return True


def test_fence_orders_a_put_before_the_flag_that_follows(pes):
    assert all(pes(4).run(_fence_ordering, 200, 20))


# ---- put_nbi / get_nbi, completed by quiet and by a barrier ---------------------------------

WIDTH = 4


def _rows(pe, slots):
    """Slot i of PE pe's data: WIDTH copies of pe * 1_000_000 + i."""
    values = torch.arange(slots, dtype=torch.int64) + pe * 1_000_000
    return values.unsqueeze(1).expand(slots, WIDTH).contiguous()


def _nbi(rank, size, slots, gets):
    with shmem.acquire_shmem():
        box = shmem.empty(slots, WIDTH, dtype=torch.int64)
        sig = shmem.empty(1, dtype=torch.int64)
        box.fill_(-1)
        sig.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        sources = _rows(rank, slots)
        for i in range(slots):
            if i % 3 == 0:
                # A temporary source: nothing here keeps it, put_nbi must.
                shmem.put_nbi(box[i], torch.full((WIDTH,), rank * 1_000_000 + i,
                                                 dtype=torch.int64), nxt)
            else:
                shmem.put_nbi(box[i], sources[i], nxt)
        # Memory the temporaries had, if they were dropped, now holds something else.
        junk = [torch.full((WIDTH,), -7, dtype=torch.int64) for _ in range(slots // 3 + 1)]
        shmem.quiet()
        del junk
        shmem.signal(sig, 1, nxt)
        shmem.wait_signal(sig, 1, comparison="ge")
        assert torch.equal(box, _rows(prv, slots)), \
            [i for i in range(slots) if not torch.equal(box[i], _rows(prv, slots)[i])][:10]
        shmem.barrier()
        # get_nbi: the next PE's slots hold what this PE put there.
        fetched = torch.full((gets, WIDTH), -1, dtype=torch.int64)
        for i in range(gets):
            shmem.get_nbi(fetched[i], box[i], nxt)
        shmem.quiet()
        assert torch.equal(fetched, _rows(rank, gets)), fetched
        shmem.barrier()
        # A barrier completes them too.
        for i in range(gets):
            shmem.put_nbi(box[i], torch.full((WIDTH,), -(rank * 1000 + i) - 2, dtype=torch.int64),
                          nxt)
        shmem.barrier()
        want = -(torch.arange(gets, dtype=torch.int64) + prv * 1000) - 2
        assert torch.equal(box[:gets], want.unsqueeze(1).expand(gets, WIDTH)), box[:gets]
        assert torch.equal(box[gets:], _rows(prv, slots)[gets:])
        # quiet and fence with nothing outstanding.
        assert shmem.quiet() is None and shmem.fence() is None
        shmem.barrier()
        shmem.free(sig)
        shmem.free(box)
    return True


def test_put_nbi_and_get_nbi_complete_at_quiet_and_at_a_barrier(pes):
    assert all(pes(4).run(_nbi, 1000, 100))


# ---- waits on several signal words --------------------------------------------------------

def _multi_signal(rank, size, dtype):
    # A wait that ignored its mask would hang: fail it in 10 s, not 30 (the pool restores it).
    os.environ["HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"] = "10"
    assert size % 2 == 0
    with shmem.acquire_shmem():
        sigs = shmem.empty(8, dtype=dtype)
        sigs.zero_()
        shmem.barrier()
        nxt = (rank + 1) % size

        def only(*indices):
            return [i in indices for i in range(8)]

        # test_signal never waits.
        assert shmem.test_signal(sigs[3], 1) is False
        assert shmem.test_signal(sigs[3], 0) is True  # "ge" by default
        assert shmem.test_signal(sigs[3], 0, comparison="eq") is True
        assert shmem.test_signal(sigs[3], 0, comparison="gt") is False
        shmem.barrier()
        # One word moves: any finds it, and test_signal now holds.
        shmem.signal(sigs[3], 5, nxt)
        index = shmem.wait_signal_any(sigs, 5)
        assert type(index) is int and index == 3, index
        assert shmem.test_signal(sigs[3], 5) is True and shmem.test_signal(sigs[3], 6) is False
        # A second word: all over both, then any / some with and without a mask.
        shmem.signal(sigs[5], 9, nxt)
        assert shmem.wait_signal_all(sigs, 5, mask=only(3, 5)) is None
        assert shmem.wait_signal_any(sigs, 5) in (3, 5)
        assert shmem.wait_signal_any(sigs, 5, mask=torch.tensor(only(5))) == 5
        assert shmem.wait_signal_any(sigs, 5, comparison="lt", mask=tuple(only(3, 5, 6))) == 6
        some = shmem.wait_signal_some(sigs, 5)
        assert type(some) is list and all(type(i) is int for i in some), some
        assert some == [3, 5], some
        assert shmem.wait_signal_some(sigs, 9, comparison="eq") == [5]
        assert shmem.wait_signal_some(sigs, 5, mask=only(3)) == [3]
        assert shmem.wait_signal_some(sigs, 5, comparison="lt") == [0, 1, 2, 4, 6, 7]
        shmem.wait_signal_all(sigs, 0, comparison="ne", mask=only(3, 5))
        shmem.wait_signal_all(sigs, 100, comparison="lt")
        assert shmem.test_signal(sigs[5], 9, comparison="eq") is True
        # Bad masks.
        for bad in ([True] * 7, [True] * 9, torch.ones(7, dtype=torch.bool)):
            for wait in (shmem.wait_signal_any, shmem.wait_signal_all, shmem.wait_signal_some):
                error = expect_shmem_error("INVALID_ARGUMENT", wait, sigs, 0, mask=bad)
                assert "mask length must be 8" in str(error), error
        for wait in (shmem.wait_signal_any, shmem.wait_signal_some):
            for bad in ([False] * 8, torch.zeros(8, dtype=torch.bool)):
                error = expect_shmem_error("INVALID_ARGUMENT", wait, sigs, 0, mask=bad)
                assert "at least one word taking part" in str(error), error
        shmem.barrier()  # the previous PE's next signals come after the checks above
        # all with a mask: words 4, 6 and 7 never change and are left out.
        for i in range(3):
            shmem.signal(sigs[i], i + 1, nxt)
        shmem.wait_signal_all(sigs, 1, mask=only(0, 1, 2))
        assert sigs[:3].tolist() == [1, 2, 3] and sigs[4].item() == 0, sigs
        shmem.barrier()
        # A wait that has to wait: odd PEs signal their (even) next PE 50 ms late.
        mask = only(6, 7)
        if rank % 2 == 1:
            time.sleep(0.05)
            shmem.signal(sigs[6], 100, nxt)
            got = shmem.wait_signal_some(sigs, 100, mask=mask)
        else:
            got = shmem.wait_signal_some(sigs, 100, mask=mask)
            shmem.signal(sigs[6], 100, nxt)
        assert got == [6], got
        assert shmem.wait_signal_any(sigs, 100, mask=mask) == 6
        shmem.barrier()
        shmem.free(sigs)
    return True


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
def test_wait_on_several_signals_any_all_some_and_test_signal(pes, dtype):
    assert all(pes(4).run(_multi_signal, dtype))


# ---- team numbering -----------------------------------------------------------------------

def _teams(rank, size):
    with shmem.acquire_shmem():
        evens = shmem.team_split_strided(shmem.TEAM_WORLD, 0, 2, size // 2)
        odds = shmem.team_split_strided(None, 1, 2, size // 2)
        mine = evens if rank % 2 == 0 else odds
        words = shmem.empty(4, dtype=torch.int64)
        box = shmem.empty(size, dtype=torch.int64)
        words.zero_()
        box.fill_(-1)
        shmem.barrier()
        # Team PE 0 is world PE rank % 2; the team's last PE is world PE size - 2 + rank % 2.
        old = shmem.atomic_fetch_add(words[0], 1, 0, team=mine)
        shmem.atomic_inc(words[1], mine.n_pes - 1, team=mine)
        shmem.put_nbi(box[rank:rank + 1], torch.tensor([rank], dtype=torch.int64), 0, team=mine)
        shmem.quiet()
        shmem.barrier()
        fetched = torch.empty(1, dtype=torch.int64)
        shmem.get_nbi(fetched, words[0:1], 0, team=mine)
        shmem.quiet()
        assert int(fetched) == size // 2, fetched
        if rank < 2:
            assert int(words[0]) == size // 2
            assert box.tolist() == [pe if pe % 2 == rank else -1 for pe in range(size)], box
        else:
            assert int(words[0]) == 0 and box.eq(-1).all()
        assert int(words[1]) == (size // 2 if rank >= size - 2 else 0), words
        shmem.barrier()
        mine.destroy()
        shmem.free(box)
        shmem.free(words)
    return int(old)


def test_team_numbering_of_atomics_and_nbi(pes):
    olds = pes(4).run(_teams)
    assert sorted(olds[0::2]) == [0, 1] and sorted(olds[1::2]) == [0, 1], olds


# ---- under torch.compile ------------------------------------------------------------------
# Under torch.compile the fetching atomics return 0-dim tensors as in eager; wait_signal_any and
# wait_signal_some return tensors there (an int64 0-dim tensor; a 1-D bool tensor of the words
# satisfied) instead of an int and a list, so only wait_signal_all is compared here.

def _compiled_equals_eager(rank, size):
    with shmem.acquire_shmem():
        counters = shmem.empty(size, dtype=torch.int64)  # PE 0's: a word per PE
        totals = shmem.empty(size, dtype=torch.int64)
        inbox = shmem.empty(8, dtype=torch.float32)
        sigs = shmem.empty(4, dtype=torch.int64)
        buffers = (counters, totals, inbox, sigs)
        nxt = (rank + 1) % size
        x = torch.linspace(-1.0, 1.0, 8) * (rank + 1)

        def step(x):
            first = shmem.atomic_fetch_add(counters[rank], rank + 1, 0)
            second = shmem.atomic_fetch_add(counters[rank], 100, 0)
            shmem.atomic_add(totals[rank], 10 * (rank + 1), nxt)
            shmem.put_nbi(inbox, torch.sin(x) * (rank + 1), nxt)  # an intermediate as source
            shmem.fence()
            shmem.quiet()
            shmem.signal(sigs[0], 1, nxt)
            shmem.signal(sigs[2], 3, nxt)
            shmem.wait_signal_all(sigs, 1, mask=[True, False, True, False])
            return first, second, first * 2 + second + x.sum()

        def reset():
            shmem.barrier()
            for tensor in buffers:
                tensor.zero_()
            shmem.barrier()

        def outcome(results):
            shmem.barrier()  # every PE's step is done: its atomics and puts are there
            state = [tensor.clone() for tensor in buffers]
            shmem.barrier()
            return list(results), state

        reset()
        eager = outcome(step(x))
        reset()
        torch._dynamo.reset()
        compiled = outcome(torch.compile(step, fullgraph=True, backend="eager")(x))
        for got in compiled[0][:2]:
            _is_old_value(got, torch.int64)
        assert int(eager[0][0]) == 0 and int(eager[0][1]) == rank + 1, eager[0]
        for mine, theirs in zip(compiled[0] + compiled[1], eager[0] + eager[1]):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
        shmem.barrier()
        for tensor in buffers:
            shmem.free(tensor)
    return eager[1]


def test_compiled_atomics_fence_quiet_nbi_and_wait_all_equal_eager(pes):
    size = 2
    states = pes(size).run(_compiled_equals_eager)
    counters, _, _, _ = states[0]
    assert counters.tolist() == [rank + 1 + 100 for rank in range(size)], counters
    for rank, (_, totals, inbox, sigs) in enumerate(states):
        prv = (rank - 1) % size
        assert totals.tolist() == [10 * (prv + 1) if pe == prv else 0 for pe in range(size)]
        want = torch.sin(torch.linspace(-1.0, 1.0, 8) * (prv + 1)) * (prv + 1)
        torch.testing.assert_close(inbox, want)
        assert sigs.tolist() == [1, 0, 3, 0], sigs


# ---- the network path: every peer remote over loopback, and hosts of two -------------------
# PePool takes an environment: these pools are the package's host backend with every peer (or
# the PEs of other blocks of two) reached through UCX over lo, as test_scale_out.py's
# _start_here sets it up. Each PE first checks where its peers are, so none of these passes on
# the shared-memory path by mistake.

def _ucx_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libucp.so.0")
        return True
    except OSError:
        return False


needs_ucx = pytest.mark.skipif(not _ucx_present(),
                               reason="UCX (libucp.so.0) is not installed: scripts/setup_deps.sh")
host_only = pytest.mark.host_only("atomics are host-backend only so far")

LOOPBACK = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}


@pytest.fixture(scope="module")
def loopback():
    """loopback(remote_peers) -> a pool of 4 PEs with HYPER_PARALLEL_SHMEM_REMOTE_PEERS set."""
    pools: dict = {}

    def pool(remote_peers: str) -> PePool:
        found = pools.get(remote_peers)
        if found is None or not found.clean:
            if found is not None:
                found.kill()
            found = PePool(4, env={**LOOPBACK, "HYPER_PARALLEL_SHMEM_REMOTE_PEERS": remote_peers})
            pools[remote_peers] = found
        return found

    yield pool
    for found in pools.values():
        found.close()


def _placed(rank, size, block, fn, *args):
    """Checks the placement (block None: every peer through UCX; K: PEs of one block of K
    mapped, the others through UCX), runs fn(rank, size, *args); returns its result and the
    remote operations this PE counted meanwhile."""
    with shmem.acquire_shmem():
        state = shmem.debug_state()
        for peer in state["peers"]:
            if peer["pe"] == rank:
                want = "self"
            elif block is not None and peer["pe"] // block == rank // block:
                want = "shared memory"
            else:
                want = "ucx"
            assert peer["transport"] == want, (peer, want)
        before = dict(state["network"]["ops"])
        result = fn(rank, size, *args)
        after = shmem.debug_state()["network"]["ops"]
    return result, {key: after[key] - before[key] for key in ("puts", "gets", "atomics")}


def _run_placed(loopback, remote_peers, block, fn, *args):
    return loopback(remote_peers).run(_placed, block, fn, *args, timeout=300)


@host_only
@needs_ucx
def test_fetch_add_every_peer_remote_over_loopback(loopback):
    n = 1000
    results = _run_placed(loopback, "all", None, _fetch_add_permutation, torch.int64,
                          "fetch_add", n, False)
    _check_permutation([result for result, _ in results], 4, n)
    for rank, (_, ops) in enumerate(results[1:], 1):
        assert ops["atomics"] >= n, (rank, ops)  # every fetch_add crossed the network


@host_only
@needs_ucx
def test_same_host_and_remote_pes_fetch_add_on_one_word(loopback):
    # Hosts of two over loopback: PE 1 maps PE 0's word, PEs 2 and 3 reach it through UCX; the
    # word takes both kinds of atomic at once.
    n = 1000
    results = _run_placed(loopback, "blocks:2", 2, _fetch_add_permutation, torch.int64,
                          "fetch_add", n, False)
    _check_permutation([result for result, _ in results], 4, n)
    for rank in (2, 3):
        assert results[rank][1]["atomics"] >= n, (rank, results[rank][1])


@host_only
@needs_ucx
def test_compare_swap_lock_every_peer_remote_over_loopback(loopback):
    rounds = 50
    results = _run_placed(loopback, "all", None, _spin_lock, rounds)
    assert results[0][0] == (4 * rounds, [0, 0]), results[0][0]


@host_only
@needs_ucx
def test_fence_ordering_every_peer_remote_over_loopback(loopback):
    assert all(result for result, _ in _run_placed(loopback, "all", None, _fence_ordering, 60, 10))


@host_only
@needs_ucx
def test_put_nbi_get_nbi_every_peer_remote_over_loopback(loopback):
    results = _run_placed(loopback, "all", None, _nbi, 1000, 100)
    assert all(result for result, _ in results)
    for rank, (_, ops) in enumerate(results):
        assert ops["puts"] >= 1000 + 100 and ops["gets"] >= 100, (rank, ops)


@host_only
@needs_ucx
def test_bitwise_and_floats_every_peer_remote_over_loopback(loopback):
    # Values with the top bit set and floats through the network path's encoding.
    assert all(result for result, _ in _run_placed(loopback, "all", None, _bitwise, torch.int64))
    assert all(result for result, _ in _run_placed(loopback, "all", None, _floats, torch.float64))


# ---- debug_state shows what a wait on several words waits for -------------------------------

def _wait_signals_shows_in_debug_state(rank, size):
    with shmem.acquire_shmem():
        sigs = shmem.empty(4, dtype=torch.int64)
        sigs.zero_()
        shmem.barrier()
        thread, errors = in_background(
            lambda: shmem.wait_signal_all(sigs, 3, mask=[True, False, True, False]))
        assert eventually(lambda: shmem.debug_state()["blocked"]), "the wait shows up"
        blocked = shmem.debug_state()["blocked"][0]
        assert blocked["operation"] == "wait_signals", blocked
        assert blocked["waiting_for"] == (f"signals={hex(sigs.data_ptr())} (4 words), wait=all, "
                                          "comparison=ge, expected=3, observed=[0,-,0,-]"), blocked
        shmem.atomic_set(sigs[0], 3, rank)
        shmem.atomic_set(sigs[2], 4, rank)  # this thread releases the other one, same PE
        thread.join(60)
        assert not thread.is_alive() and errors == [], errors
        assert shmem.debug_state()["blocked"] == []
        shmem.barrier()
        shmem.free(sigs)
    return True


def test_a_wait_on_several_words_shows_what_it_waits_for(pes):
    assert all(pes(2).run(_wait_signals_shows_in_debug_state))


# ---- every backend: fence, quiet and put_nbi; atomics where built ----------------------------

def _per_backend(rank, size):
    with shmem.acquire_shmem():
        word = shmem.empty((), dtype=torch.int64)
        box = shmem.empty(64, dtype=torch.int64)
        word.zero_()
        box.zero_()
        shmem.barrier()
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        shmem.put_nbi(box, torch.full((64,), rank + 1, dtype=torch.int64), nxt)
        shmem.fence()
        shmem.quiet()
        shmem.barrier()
        assert box.eq(prv + 1).all(), box
        if shmem.backend_info().name == "host":
            assert int(shmem.atomic_fetch_add(word, 1, nxt)) in range(size)
        else:  # not built for device backends yet (docs/atomics.md, "Backends")
            expect_shmem_error("UNSUPPORTED_CAPABILITY", shmem.atomic_fetch_add, word, 1, nxt)
            expect_shmem_error("UNSUPPORTED_CAPABILITY", shmem.wait_signal_all,
                               box[:1], 0)
        shmem.barrier()
        shmem.free(box)
        shmem.free(word)
    return True


@pytest.mark.cann_fake
def test_fence_quiet_and_put_nbi_on_every_backend_atomics_where_built(pes):
    assert all(pes(2).run(_per_backend))


def _compiled_answers_are_tensors(rank, size):
    # Inside a compiled function the data-dependent answers come back as tensors: an int64
    # index, a bool tensor of the satisfying words, a 0-dim bool (docs/atomics.md).
    with shmem.acquire_shmem():
        sigs = shmem.empty(4, dtype=torch.int64)
        box = shmem.empty(16, dtype=torch.int64)
        sigs.zero_()
        box.zero_()
        nxt = (rank + 1) % size

        def step(local):
            shmem.signal(sigs[1], 5, nxt)
            shmem.signal(sigs[3], 7, nxt)
            shmem.get_nbi(local, box, nxt)
            shmem.quiet()
            index = shmem.wait_signal_any(sigs, 5)
            some = shmem.wait_signal_some(sigs, 5)
            now = shmem.test_signal(sigs[3], 7, comparison="eq")
            return index, some, now, local + 1

        results = []
        for compile_it in (False, True):
            shmem.barrier()
            sigs.zero_()
            box.fill_(rank * 10)
            shmem.barrier()
            fn = torch.compile(step, fullgraph=True, backend="eager") if compile_it else step
            torch._dynamo.reset()
            results.append(fn(torch.zeros(16, dtype=torch.int64)))
            shmem.barrier()
        (index, some, now, local), (c_index, c_some, c_now, c_local) = results
        assert index == 1 and some == [1, 3] and now is True, (index, some, now)
        assert isinstance(c_index, torch.Tensor) and c_index.dtype == torch.int64
        assert int(c_index) == index
        assert c_some.dtype == torch.bool and c_some.nonzero().reshape(-1).tolist() == some
        assert c_now.dtype == torch.bool and bool(c_now) is True
        assert torch.equal(local, c_local) and local.eq(nxt * 10 + 1).all(), local
        shmem.barrier()
        shmem.free(box)
        shmem.free(sigs)
    return True


def test_compiled_multi_signal_waits_and_test_signal_answer_with_tensors(pes):
    assert all(pes(2).run(_compiled_answers_are_tensors))
