"""Several threads per PE: nothing waits holding the entry lock, debug_state() answers while
calls block, collectives are checked before data moves, and a random mix from 8 threads per PE
stays correct."""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch

from helpers import eventually, expect_shmem_error, in_background
from hyper_parallel.core.multicore import shmem


def _thread_releases_wait(rank, size):
    with shmem.acquire_shmem():
        sig = shmem.empty(1, dtype=torch.int64)
        sig.zero_()
        shmem.barrier()
        thread, errors = in_background(shmem.wait_signal, sig, 5)
        assert eventually(lambda: shmem.debug_state()["blocked"]), "the wait shows up"
        blocked = shmem.debug_state()["blocked"][0]
        assert blocked["operation"] == "wait_signal", blocked
        assert blocked["stream"].startswith("default (thread "), blocked
        assert blocked["waiting_for"] == (f"signal={hex(sig.data_ptr())}, comparison=eq, "
                                          "expected=5, observed=0"), blocked
        assert blocked["waited_s"] >= 0 and "T" in blocked["since"], blocked
        assert shmem.debug_state()["calls_in_flight"] == 1
        shmem.signal(sig, 5, rank)  # this thread releases the other one, same PE
        thread.join(60)
        assert not thread.is_alive() and errors == [], errors
        assert shmem.debug_state()["blocked"] == []
        shmem.barrier()
        shmem.free(sig)
    return True


def test_a_thread_releases_another_threads_wait(pes):
    assert all(pes(2).run(_thread_releases_wait))


def _collective_shows_missing_pes(rank, size):
    with shmem.acquire_shmem():
        gate = shmem.empty(1, dtype=torch.int64)
        gate.zero_()
        shmem.barrier()  # collective #2
        if rank == size - 1:
            # Enters barrier #3 only once every other PE saw itself blocked in it.
            shmem.wait_signal(gate, size - 1)
            shmem.barrier()
        else:
            thread, errors = in_background(shmem.barrier)
            missing = f"missing_pes=[{size - 1}]"
            assert eventually(lambda: any(missing in b["waiting_for"]
                                           for b in shmem.debug_state()["blocked"]))
            state = shmem.debug_state()
            blocked = state["blocked"][0]
            assert blocked["operation"] == "barrier", blocked
            assert blocked["waiting_for"] == f"collective=barrier #3, {missing}", blocked
            assert state["collectives"]["sequence"] == 3 and state["collectives"]["in_flight"] == 1
            assert state["collectives"]["stream"].startswith("default (thread ")
            shmem.signal(gate, 1, size - 1, operation="add")
            thread.join(60)
            assert errors == [], errors
        shmem.free(gate)
    return True


@pytest.mark.parametrize("size", [2, 3])
def test_debug_state_names_the_pes_a_collective_waits_for(pes, size):
    assert all(pes(size).run(_collective_shows_missing_pes))


def _mismatches(rank, size):
    with shmem.acquire_shmem():
        small = shmem.empty(2 * 16, dtype=torch.float32)   # 1
        large = shmem.empty(2 * 32, dtype=torch.float32)   # 2
        small.fill_(-1.0)
        large.fill_(-1.0)
        shmem.barrier()                                    # 3
        mine = torch.full((16,), float(rank))
        if rank == 0:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.barrier)
        else:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, small, mine)
        assert ("collective calls differ across PEs (call: barrier on PE 0, all_gather on PE 1): "
                "sequence=4, field=kind, calls=pe 0: barrier #4; pe 1: all_gather #4 bytes=64 "
                "dtype=float32 offset=0x0") in str(error)
        # Outputs of different sizes: each PE's slot would land in another allocation.
        if rank == 0:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, small, mine)
        else:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, large,
                                       torch.full((32,), float(rank)))
        assert "sequence=5, field=bytes" in str(error), str(error)
        # The same byte count in another dtype (and another output).
        ints = shmem.empty(2 * 16, dtype=torch.int32)     # 6
        ints.fill_(-1)
        if rank == 0:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, small, mine)
        else:
            error = expect_shmem_error("COLLECTIVE_MISMATCH", shmem.all_gather, ints,
                                       mine.to(torch.int32))
        assert "sequence=7, field=dtype" in str(error), str(error)
        assert bool((small == -1.0).all()) and bool((large == -1.0).all()), "no byte moved"
        assert bool((ints == -1).all()), "no byte moved"
        shmem.all_gather(small, mine)  # in step: a matching call works
        assert small.tolist() == [0.0] * 16 + [1.0] * 16
        shmem.barrier()
        for t in (ints, large, small):
            shmem.free(t)
    return True


def test_mismatched_collectives_fail_on_every_pe_and_move_nothing(pes):
    assert all(pes(2).run(_mismatches))


def _two_streams(rank, size):
    with shmem.acquire_shmem():
        gate = shmem.empty(1, dtype=torch.int64)
        gate.zero_()
        shmem.barrier()
        first, second = shmem.Stream(), shmem.Stream()
        with shmem.stream(first):
            shmem.wait_signal(gate, 1)   # holds the stream: its barrier stays in flight
            shmem.barrier()
        with shmem.stream(second):
            error = expect_shmem_error("INVALID_STATE", shmem.barrier)
        assert "a collective of this PE is already in flight on another stream" in str(error)
        assert f"in_flight_on=stream {first._native.id}" in str(error), str(error)
        assert f"this_stream=stream {second._native.id}" in str(error), str(error)
        error = expect_shmem_error("INVALID_STATE", shmem.barrier)  # the caller's stream too
        assert "this_stream=default (thread " in str(error), str(error)
        assert shmem.debug_state()["collectives"]["in_flight"] == 1
        shmem.signal(gate, 1, rank)
        first.synchronize()
        with shmem.stream(second):
            shmem.barrier()              # in step: the rejected calls took no number
        second.synchronize()
        shmem.free(gate)
    return True


def test_collectives_on_two_streams_at_once_are_rejected(pes):
    assert all(pes(2).run(_two_streams))


# ---- 8 threads x 2 PEs, a random mix of one-sided operations ----------------------------

THREADS = 8
BOX = 1024  # int32 elements per message box


def _pair(rank, t, boxes, arrived, acked, scratch, until, counts, errors):
    """Thread t of this PE exchanges messages with thread t of the other PE, in lock step."""
    peer = 1 - rank
    rng = random.Random(rank * 100 + t)
    message = torch.empty(BOX, dtype=torch.int32)
    fetched = torch.empty(BOX, dtype=torch.int32)
    k, ops = 0, 0
    try:
        while True:
            k += 1
            stop = time.monotonic() >= until
            length = rng.randint(4, BOX)
            message[0], message[1], message[2] = k, length, int(stop)
            message[3:length] = torch.arange(3, length, dtype=torch.int32) * (rank + 1) + k * 7 + t
            target = boxes[rank, t, :length]
            choice = rng.randrange(3)
            if choice == 0:
                shmem.put(target, message[:length], peer)
                shmem.signal(arrived[rank, t], 1, peer, operation="add")
                ops += 2
            elif choice == 1:
                shmem.put_signal(target, message[:length], arrived[rank, t], 1, peer,
                                 operation="add")
                ops += 1
            else:
                half = length // 2
                shmem.put(boxes[rank, t, half:length], message[half:length], peer)
                shmem.put(boxes[rank, t, :half], message[:half], peer)
                shmem.signal(arrived[rank, t], 1, peer, operation="add")
                ops += 3
            shmem.wait_signal(arrived[peer, t], k, comparison=rng.choice(["ge", "eq"]))
            if rng.randrange(2):
                shmem.get(fetched, boxes[peer, t], rank)
                received = fetched
                ops += 1
            else:
                received = boxes[peer, t].clone()
            got_length = int(received[1])
            expected = torch.arange(3, got_length, dtype=torch.int32) * (peer + 1) + k * 7 + t
            if int(received[0]) != k or not torch.equal(received[3:got_length], expected):
                errors.append(f"PE {rank} thread {t}: message {k} is wrong")
                return
            peer_stops = bool(received[2])
            shmem.signal(acked[t], k, peer)
            own = torch.full((rng.randint(1, BOX),), k, dtype=torch.int32)
            shmem.put(scratch[t, :own.numel()], own, rank)
            shmem.get(fetched[:own.numel()], scratch[t, :own.numel()], rank)
            if not torch.equal(fetched[:own.numel()], own):
                errors.append(f"PE {rank} thread {t}: self round trip differs")
                return
            shmem.wait_signal(acked[t], k, comparison="ge")
            ops += 5
            if stop or peer_stops:
                counts[t] = (k, ops)
                return
    except BaseException as error:  # reported by the PE body
        errors.append(f"PE {rank} thread {t}: {type(error).__name__}: {error}")


def _stress(rank, size, seconds):
    torch.set_num_threads(1)
    with shmem.acquire_shmem():
        boxes = shmem.empty(2, THREADS, BOX, dtype=torch.int32)
        # Counters 64 bytes apart (8 int64): arrived[src, t] and acked[t].
        arrived_words = shmem.empty(2, THREADS, 8, dtype=torch.int64)
        acked_words = shmem.empty(THREADS, 8, dtype=torch.int64)
        scratch = shmem.empty(THREADS, BOX, dtype=torch.int32)
        arrived_words.zero_()
        acked_words.zero_()
        shmem.barrier()  # zeroed everywhere before any peer writes
        arrived = arrived_words[:, :, 0:1]
        acked = acked_words[:, 0:1]
        until = time.monotonic() + seconds
        counts, errors = [None] * THREADS, []
        threads = [threading.Thread(target=_pair, args=(rank, t, boxes, arrived, acked, scratch,
                                                        until, counts, errors))
                   for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert errors == [], errors
        assert all(c is not None and c[0] > 0 for c in counts), counts
        assert shmem.debug_state()["blocked"] == [] and shmem.debug_state()["calls_in_flight"] == 0
        shmem.barrier()
        for t in (scratch, acked_words, arrived_words, boxes):
            shmem.free(t)
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def test_eight_threads_per_pe_random_mix_every_result_checked(pes):
    results = pes(2).run(_stress, 3.0, timeout=300)
    exchanges = [r[0] for r in results]
    assert exchanges[0] == exchanges[1], "thread pairs run in lock step"
    print(f"\n8 threads x 2 PEs: {exchanges[0]} exchanges per PE, "
          f"{results[0][1] + results[1][1]} operations in all")
