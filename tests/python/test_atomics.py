"""Atomics on one element of a symmetric tensor (docs/atomics.md): every fetch_add's old value
handed out once, a lock that keeps a read-modify-write whole, swaps that lose no value, bitwise
operations with the top bit set, wrap-around, floats, every rejection, team numbering, and the
network path: every peer remote over loopback (HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all), with
fence ordering and put_nbi there too, and hosts of two PEs beside each other on one word
(REMOTE_PEERS=blocks:2). fence, quiet, the non-blocking transfers and the waits on several words
on one host, and under torch.compile: test_ordering.py.

The loopback tests start pools of their own (PePool takes an environment), one per setting,
shared by this file's tests; they are host_only and need UCX, as test_scale_out.py does.
"""

from __future__ import annotations

import math
import os
import time

import pytest
import torch

from hyper_parallel.core.multicore import shmem
from pe_pool import PePool
from test_ordering import _fence_ordering, _is_old_value, _nbi

# Every rejection below is INVALID_ARGUMENT, raised as ShmemValueError: a ShmemError and a
# ValueError at once (docs/api.md, "Errors and logs").
RAISES = shmem.ShmemValueError

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


def _uint64_above_int64(rank, size):
    """uint64 values from 2^63 to 2^64 - 1 go in as Python ints and come back out through
    .item() (docs/atomics.md): int() of such a tensor fails in torch."""
    top = (1 << 64) - 1
    with shmem.acquire_shmem():
        word = shmem.empty((), dtype=torch.uint64)
        word.zero_()
        shmem.barrier()
        peer = (rank + 1) % size
        if rank == 0:
            shmem.atomic_set(word, top, peer)
            shmem.quiet()
            old = shmem.atomic_fetch(word, peer)
            _is_old_value(old, torch.uint64)
            assert old.item() == top and old.tolist() == top, old
            assert shmem.atomic_swap(word, 1 << 63, peer).item() == top
            assert shmem.atomic_compare_swap(word, 1 << 63, top - 1, peer).item() == 1 << 63
            assert shmem.atomic_fetch_add(word, 2, peer).item() == top - 1  # wraps to 0
            assert shmem.atomic_fetch(word, peer).item() == 0
            with pytest.raises(shmem.ShmemValueError, match="value must be representable in "
                                                            "64 bits, but got 18446744073709551616"):
                shmem.atomic_set(word, 1 << 64, peer)
        shmem.barrier()
        shmem.free(word)
    return True


@pytest.mark.skipif(getattr(torch, "uint64", None) is None, reason="torch without uint64")
def test_uint64_values_above_int64(pes):
    assert all(pes(2).run(_uint64_above_int64))


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
        shmem.barrier()  # every PE has looked before any adds to it
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
