"""fence and quiet, put_nbi and get_nbi, and waits on several signal words (docs/atomics.md):
order under fence (a put_nbi of up to 1 MiB before its flag), non-blocking transfers completed by
quiet and by a barrier, wait_signal_any / all / some with and without a mask, test_signal, what
debug_state shows of such a wait, fence, quiet and put_nbi on every backend (atomics where
built), and the same under torch.compile, whose multi-signal answers are tensors. The atomics and
the network path's runs of these: test_atomics.py.
"""

from __future__ import annotations

import os
import time

import pytest
import torch

from helpers import device, eventually, expect_shmem_error, in_background
from hyper_parallel.core.multicore import shmem


def _is_old_value(result, dtype: torch.dtype) -> None:
    """A fetching atomic's result: a 0-dim tensor of dest's dtype (test_atomics.py's too)."""
    assert isinstance(result, torch.Tensor), type(result)
    assert result.dim() == 0 and result.dtype == dtype, (result.shape, result.dtype)


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
        shmem.put_nbi(box, torch.full((64,), rank + 1, dtype=torch.int64, device=device()), nxt)
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
