"""One PE of the scale-out tests (test_scale_out.py).

Started by a test on a namespace host (netns_hosts.py), or on this host with
HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all, with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT set. It joins the job's gloo group over the hosts' link, runs one scenario
(argv[1]) and prints lines the test reads: READY once the runtime is up, RESULT <json> with what
it measured, OK at the end. Any exception is printed and the exit code is 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hyper_parallel.core.multicore import shmem  # noqa: E402
from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment  # noqa: E402


def say(*words) -> None:
    print(*words, flush=True)


def result(**values) -> None:
    say("RESULT", json.dumps(values))


def everything_remote() -> bool:
    return os.environ.get("HYPER_PARALLEL_SHMEM_REMOTE_PEERS") == "all"


def check_placement(rank: int, size: int, per_host: int) -> dict:
    """debug_state's peers: same-host PEs mapped, the others through UCX."""
    state = shmem.debug_state()
    peers = state["peers"]
    assert len(peers) == size, peers
    for peer in peers:
        same_host = peer["pe"] // per_host == rank // per_host
        if peer["pe"] == rank:
            want = "self"
        elif same_host and not everything_remote():
            want = "shared memory"
        else:
            want = "ucx"
        assert peer["transport"] == want, (peer, want)
        # A remote peer's path: messages over TCP unless forced (docs/scale-out.md).
        path = os.environ.get("HYPER_PARALLEL_SHMEM_REMOTE_PATH", "auto")
        assert peer["path"] == (None if want != "ucx" else "rma" if path == "rma" else "messages"), \
            (peer, path)
        assert (peer["host"] == peers[rank]["host"]) == same_host, peers
    network = state["network"]
    assert network is not None and network["provider"] == "ucx", network
    return network


def suite(rank: int, size: int, per_host: int) -> None:
    """RMA, signals, barrier, all_gather, all_to_all and teams, over three lifecycles."""
    left, right = (rank - 1) % size, (rank + 1) % size
    for cycle in range(3):
        handle = shmem.acquire_shmem()
        if cycle == 0:
            say("READY")
        before = check_placement(rank, size, per_host)["ops"]
        # Put to the next PE, get back from it; a ring over both hosts.
        box = shmem.empty(1024, dtype=torch.int64)
        box.fill_(-1)
        shmem.barrier()
        mine = torch.arange(1024, dtype=torch.int64) + 10_000 * rank + cycle
        shmem.put(box, mine, right)
        shmem.barrier()
        assert torch.equal(box, torch.arange(1024, dtype=torch.int64) + 10_000 * left + cycle), box
        back = torch.empty(1024, dtype=torch.int64)
        shmem.get(back, box, right)
        assert torch.equal(back, mine), back
        # A 4 MiB put (a rendezvous), then a barrier: there when the barrier returns (in a
        # world of two PEs on two hosts without a flush: the round message lands after it).
        big = shmem.empty(1 << 19, dtype=torch.int64)
        big.fill_(-1)
        shmem.barrier()
        shmem.put(big, torch.arange(1 << 19, dtype=torch.int64) * (rank + 1) + cycle, right)
        shmem.barrier()
        assert torch.equal(big, torch.arange(1 << 19, dtype=torch.int64) * (left + 1) + cycle)
        shmem.barrier()  # read before the next cycle's puts
        shmem.free(big)
        # Signals: set, add, put_signal, each waited for at the target.
        flag = shmem.empty(1, dtype=torch.int64)
        flag.zero_()
        word = shmem.empty(1, dtype=torch.int32)
        word.zero_()
        data = shmem.empty(256, dtype=torch.float32)
        shmem.barrier()
        shmem.signal(flag, 5, right, operation="set")
        shmem.wait_signal(flag, 5, comparison="ge")  # the left PE may be ahead
        shmem.signal(flag, 3, right, operation="add")
        shmem.wait_signal(flag, 8, comparison="ge")
        shmem.signal(word, -7, right, operation="set")
        shmem.wait_signal(word, -7, comparison="eq")
        payload = torch.full((256,), float(rank) + 0.5)
        shmem.put_signal(data, payload, flag, 1, right, operation="add")
        shmem.wait_signal(flag, 9, comparison="ge")
        assert torch.equal(data, torch.full((256,), float(left) + 0.5)), data
        # Collectives over the world.
        gathered = shmem.empty(size * 64, dtype=torch.float32)
        shmem.all_gather(gathered, torch.full((64,), float(rank)))
        want = torch.arange(size, dtype=torch.float32).repeat_interleave(64)
        assert torch.equal(gathered, want), gathered
        exchanged = shmem.empty(size * 32, dtype=torch.int32)
        source = (torch.arange(size * 32, dtype=torch.int32) // 32) * 100 + rank
        shmem.all_to_all(exchanged, source)
        want = torch.tensor([rank * 100 + src for src in range(size) for _ in range(32)],
                            dtype=torch.int32)
        assert torch.equal(exchanged, want), exchanged
        # The node team: this host's PEs; a collective over it stays on the host.
        node = shmem.TEAM_NODE
        assert node.n_pes == per_host, (node.n_pes, per_host)
        first = rank - rank % per_host
        assert tuple(node.pes) == tuple(range(first, first + per_host)), node.pes
        node_out = shmem.empty(per_host * 8, dtype=torch.float32)
        shmem.all_gather(node_out, torch.full((8,), float(rank)), team=node)
        want = torch.arange(first, first + per_host, dtype=torch.float32).repeat_interleave(8)
        assert torch.equal(node_out, want), node_out
        shmem.barrier(team=node)
        # A team across hosts: the PEs of the same local rank on every host (the 2-D split's
        # columns), beside one of the host's PEs (its rows).
        within, across = shmem.team_split_2d(shmem.TEAM_WORLD, per_host)
        assert within.pes == node.pes, (within.pes, node.pes)
        assert across is not None and across.n_pes == size // per_host
        across_out = shmem.empty(across.n_pes * 4, dtype=torch.int64)
        shmem.all_gather(across_out, torch.full((4,), rank, dtype=torch.int64), team=across)
        want = torch.arange(rank % per_host, size, per_host).repeat_interleave(4)
        assert torch.equal(across_out, want), across_out
        shmem.all_to_all(across_out, torch.full((across.n_pes * 4,), rank, dtype=torch.int64),
                         team=across)
        assert torch.equal(across_out, want), across_out
        across.destroy()
        within.destroy()
        after = shmem.debug_state()["network"]["ops"]
        # The collectives pushed to the other host; the ring's get and signals went over the
        # network where the next PE is there.
        assert after["puts"] > before["puts"], (before, after)
        if right // per_host != rank // per_host or everything_remote():
            assert after["atomics"] > before["atomics"] and after["gets"] > before["gets"], \
                (before, after)
        for tensor in (box, flag, word, data, gathered, exchanged, node_out, across_out):
            shmem.free(tensor)
        handle.close()
    result(cycles=3)


def sleeper(rank: int, size: int, per_host: int) -> None:
    """PE 1 computes outside the library for 2 s while PE 0 puts and signals to it: the
    operations complete meanwhile (the progress thread), and PE 0 is not held up."""
    handle = shmem.acquire_shmem()
    data = shmem.empty(4096, dtype=torch.float32)
    flag = shmem.empty(1, dtype=torch.int64)
    data.zero_()
    flag.zero_()
    shmem.barrier()
    say("READY")
    if rank == 0:
        start = time.monotonic()
        shmem.put(data, torch.full((4096,), 3.25), 1)
        shmem.signal(flag, 1, 1, operation="set")
        issued = time.monotonic() - start
        shmem.wait_signal(flag, 1, comparison="eq")  # PE 1's answer
        result(issued_s=issued, answered_s=time.monotonic() - start)
    else:
        time.sleep(2.0)  # computing: no call into the library
        # Read straight from memory, before any library call: the writes already landed.
        landed = int(flag[0]) == 1 and bool(torch.all(data == 3.25))
        shmem.signal(flag, 1, 0, operation="set")
        result(landed_while_away=landed)
    shmem.barrier()
    shmem.free(data)
    shmem.free(flag)
    handle.close()


def timeout(rank: int, size: int, per_host: int) -> None:
    """PE 0 waits for a signal PE 1 never sends while PE 1 computes outside the library: the
    wait ends with TIMEOUT naming what it awaited, and the job goes on (a wait_signal timeout
    is not terminal)."""
    handle = shmem.acquire_shmem()
    flag = shmem.empty(1, dtype=torch.int64)
    flag.zero_()
    shmem.barrier()
    say("READY")
    if rank == 0:
        start = time.monotonic()
        try:
            shmem.wait_signal(flag, 1, comparison="eq")
            say("UNEXPECTED wait returned")
        except shmem.ShmemError as error:
            result(code=error.error_code, message=str(error), waited_s=time.monotonic() - start)
    else:
        time.sleep(float(os.environ["HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"]) + 0.5)
    shmem.barrier()  # both PEs carry on after the timeout
    shmem.free(flag)
    handle.close()


def waiter(rank: int, size: int, per_host: int) -> None:
    """Every PE but the last waits on a signal that never comes; the last is killed (or its
    host's link pulled) by the test. Prints the error the wait raised and when."""
    handle = shmem.acquire_shmem()
    flag = shmem.empty(1, dtype=torch.int64)
    flag.zero_()
    shmem.barrier()
    say("READY")
    if rank == size - 1 and os.environ.get("SCALE_OUT_SELF_KILL") == "1":
        time.sleep(0.5)
        say("KILLING", repr(time.time()))
        os.kill(os.getpid(), 9)
    try:
        shmem.wait_signal(flag, 1, comparison="eq")
        say("UNEXPECTED wait returned")
    except shmem.ShmemError as error:
        result(code=error.error_code, message=str(error), at=time.time())
    closing = time.monotonic()
    try:
        handle.close()
    except shmem.ShmemError as error:
        result(close_code=error.error_code)
    result(close_s=time.monotonic() - closing)


def ordering(rank: int, size: int, per_host: int) -> None:
    """Order on the paths across hosts (2 hosts x 2 PEs): a put_signal's data is all there when
    its signal is, eager and rendezvous sizes alike; signals of every PE into one word; a get
    after one's own put sees it; a third PE's get of a region put_signal wrote, once the target
    passed the word on, sees the data."""
    handle = shmem.acquire_shmem()
    say("READY")
    check_placement(rank, size, per_host)
    far = (rank + per_host) % size  # the same local rank on the other host
    words = 1 << 20  # 4 MiB of int32
    box = shmem.empty(words, dtype=torch.int32)
    flag = shmem.empty(1, dtype=torch.int64)
    box.fill_(-1)
    flag.zero_()
    shmem.barrier()
    for round_, n in enumerate([2, 1024, 16 << 10, 256 << 10, words], 1):
        shmem.put_signal(box[:n], torch.full((n,), rank * 1000 + round_, dtype=torch.int32), flag,
                         round_, far, operation="set")
        shmem.wait_signal(flag, round_, comparison="ge")
        seen = box[:n]
        assert bool(torch.all(seen == far * 1000 + round_)), (n, seen.unique()[:8])
        shmem.barrier()
    # Signals of every PE, remote and local, into PE 0's word, interleaved with puts.
    counter = shmem.empty(1, dtype=torch.int64)
    counter.zero_()
    shmem.barrier()
    adds = 300
    for i in range(adds):
        if i % 50 == 0:
            shmem.put(box[rank * 64:(rank + 1) * 64], torch.full((64,), i, dtype=torch.int32), 0)
        shmem.signal(counter, 1, 0, operation="add")
    if rank == 0:
        shmem.wait_signal(counter, adds * size, comparison="ge")
    shmem.barrier()
    if rank == 0:
        assert int(counter[0]) == adds * size, int(counter[0])
    # A get after this PE's own put to the same remote region sees the put.
    mine = torch.arange(4096, dtype=torch.int32) * (rank + 3)
    shmem.put(box[8192:8192 + 4096], mine, far)
    back = torch.empty(4096, dtype=torch.int32)
    shmem.get(back, box[8192:8192 + 4096], far)
    assert torch.equal(back, mine), back[:8]
    shmem.barrier()
    # A third PE: PE 0 put_signals 1 MiB into PE `target` on the other host, which passes the
    # word on to PE 1 (back on PE 0's host); PE 1 then reads the region from the target.
    target, third = per_host, 1
    relay = shmem.empty(1, dtype=torch.int64)
    relay.zero_()
    shmem.barrier()
    block = torch.arange(1 << 18, dtype=torch.int32) * 7 + 11
    if rank == 0:
        shmem.put_signal(box[:1 << 18], block, flag, 100, target, operation="set")
    elif rank == target:
        shmem.wait_signal(flag, 100, comparison="eq")
        shmem.signal(relay, 1, third, operation="set")
    elif rank == third:
        shmem.wait_signal(relay, 1, comparison="eq")
        read = torch.empty(1 << 18, dtype=torch.int32)
        shmem.get(read, box[:1 << 18], target)
        assert torch.equal(read, block), (read[:4], block[:4])
    shmem.barrier()
    for tensor in (box, flag, counter, relay):
        shmem.free(tensor)
    handle.close()
    result(ok=True)


def asleep(rank: int, size: int, per_host: int) -> None:
    """Waiters that went to sleep wake on a remote write: PE 1's two threads each wait on a
    signal PE 0 sends only after they slept (0.5 s), one after the other, so the second needs
    the first's role handed over. Each message carries PE 0's send time; the waiters report
    how long after it they woke, and the network counters show they slept on its events."""
    import threading

    handle = shmem.acquire_shmem()
    flags = shmem.empty(2 * 8, dtype=torch.int64)  # two words, 64 bytes apart
    stamps = shmem.empty(2 * 8, dtype=torch.int64)
    flags.zero_()
    stamps.zero_()
    shmem.barrier()
    say("READY")
    if rank == 0:
        for slot in (1, 0):
            time.sleep(0.5)
            now = torch.tensor([time.monotonic_ns()], dtype=torch.int64)
            shmem.put_signal(stamps[slot * 8:slot * 8 + 1], now, flags[slot * 8:slot * 8 + 1], 1,
                             1, operation="set")
    elif rank == 1:
        before = shmem.debug_state()["network"]["ops"]["event_sleeps"]
        woke = {}

        def wait(slot):
            shmem.wait_signal(flags[slot * 8:slot * 8 + 1], 1, comparison="eq")
            woke[slot] = (time.monotonic_ns() - int(stamps[slot * 8])) / 1e9

        threads = [threading.Thread(target=wait, args=(slot,)) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        after = shmem.debug_state()["network"]["ops"]["event_sleeps"]
        result(woke_s=[woke.get(0), woke.get(1)], event_sleeps=after - before)
    shmem.barrier()
    shmem.free(flags)
    shmem.free(stamps)
    handle.close()


def fan_in(rank: int, size: int, per_host: int) -> None:
    """Every other PE (one per host) put_signals a block into its own slot at PE 0 and adds 1
    to one counter there, many times; PE 0's single wait sees every block."""
    handle = shmem.acquire_shmem()
    slots = shmem.empty(size * 1024, dtype=torch.int32)
    counter = shmem.empty(1, dtype=torch.int64)
    slots.fill_(-1)
    counter.zero_()
    shmem.barrier()
    say("READY")
    rounds = 200
    if rank != 0:
        for i in range(rounds):
            shmem.put_signal(slots[rank * 1024:(rank + 1) * 1024],
                             torch.full((1024,), rank * 10_000 + i, dtype=torch.int32), counter,
                             1, 0, operation="add")
    else:
        shmem.wait_signal(counter, rounds * (size - 1), comparison="eq")
        for pe in range(1, size):
            # Each source's blocks land in order: its slot holds its last one.
            assert bool(torch.all(slots[pe * 1024:(pe + 1) * 1024] == pe * 10_000 + rounds - 1)), pe
        result(counted=int(counter[0]))
    shmem.barrier()
    shmem.free(slots)
    shmem.free(counter)
    handle.close()


def pingpong(rank: int, size: int, per_host: int) -> None:
    """PE 0 and PE 1 bounce put_signal back and forth (the test may run a CPU hog on each host
    meanwhile); every round's data is checked."""
    handle = shmem.acquire_shmem()
    box = shmem.empty(64, dtype=torch.int64)
    flag = shmem.empty(1, dtype=torch.int64)
    box.zero_()
    flag.zero_()
    shmem.barrier()
    say("READY")
    rounds = int(os.environ.get("SCALE_OUT_ROUNDS", "2000"))
    peer = 1 - rank
    start = time.monotonic()
    for i in range(1, rounds + 1):
        # Each PE checks what it received before it answers (the next write waits for that).
        if rank == 0:
            shmem.put_signal(box, torch.full((64,), i, dtype=torch.int64), flag, i, peer)
            shmem.wait_signal(flag, i, comparison="eq")
            assert int(box[63]) == -i, (i, int(box[63]))
        else:
            shmem.wait_signal(flag, i, comparison="eq")
            assert int(box[63]) == i, (i, int(box[63]))
            shmem.put_signal(box, torch.full((64,), -i, dtype=torch.int64), flag, i, peer)
    result(rounds=rounds, seconds=time.monotonic() - start)
    shmem.barrier()
    shmem.free(box)
    shmem.free(flag)
    handle.close()


def bulk_killed(rank: int, size: int, per_host: int) -> None:
    """PE 1 is killed while its 64 MiB put_signal to PE 0 is on the wire; PE 0's two waiters
    (the signal that data carries, and another) both end in PEER_LOST."""
    import threading

    handle = shmem.acquire_shmem()
    big = shmem.empty(16 << 20, dtype=torch.int32)
    flags = shmem.empty(16, dtype=torch.int64)
    flags.zero_()
    shmem.barrier()
    say("READY")
    if rank == 1:
        source = torch.ones(16 << 20, dtype=torch.int32)

        def kill_soon():
            time.sleep(0.01)
            say("KILLING", repr(time.time()))
            os.kill(os.getpid(), 9)

        threading.Thread(target=kill_soon, daemon=True).start()
        while True:
            shmem.put_signal(big, source, flags[:1], 1, 0, operation="add")
    outcomes = {}

    def wait(slot):
        try:
            shmem.wait_signal(flags[slot * 8:slot * 8 + 1], 1 << 40, comparison="ge")
            outcomes[slot] = ("UNEXPECTED", "", 0.0)
        except shmem.ShmemError as error:
            outcomes[slot] = (error.error_code, str(error), time.time())

    threads = [threading.Thread(target=wait, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for slot in (0, 1):
        code, message, at = outcomes.get(slot, ("HUNG", "", 0.0))
        result(slot=slot, code=code, message=message, at=at)
    try:
        handle.close()
    except shmem.ShmemError as error:
        result(close_code=error.error_code)


def mega_moe(rank: int, size: int, per_host: int) -> None:
    """MegaMoE forward and backward across hosts against the dense layer: EP over every PE
    (1 PE per host), or EP within each host with DP across hosts (2 PEs per host)."""
    import test_mega_moe_teams as teams  # the checks of the single-host tests, reused

    from hyper_parallel.core.multicore.mega_moe import MegaMoE

    say("READY")
    if per_host > 1:  # EP within each host (a team), DP across the hosts
        report = teams._ep_dp_layer(rank, size, per_host, [37, 5, 0, 64][:size], 8)
        result(**{k: v for k, v in report.items() if isinstance(v, (int, float, bool))})
        return
    # EP over every PE, one per host: the layer against the dense layer on this PE's tokens,
    # and every expert's gradient at its owner against the dense gradients of all tokens.
    counts = [29, 11]
    torch.manual_seed(7)
    layer = MegaMoE(teams.H, teams.I, 2 * size, 2, shared_intermediate_size=teams.IS,
                    gated_shared_expert=True)
    dense = layer.dense_weights()
    x = teams._tokens(rank, counts[rank]).requires_grad_(True)
    g = teams._grad_out(rank, counts[rank])
    y = layer(x)
    (y * g).sum().backward()
    weights = teams._leaf(dense)
    xr = x.detach().clone().requires_grad_(True)
    yr = teams._dense(layer, weights, xr)
    (yr * g).sum().backward()
    assert teams._close(y, yr), (y - yr).abs().max()
    assert teams._close(x.grad, xr.grad), (x.grad - xr.grad).abs().max()
    every = teams._leaf(dense)
    for source in range(size):
        (teams._dense(layer, every, teams._tokens(source, counts[source]))
         * teams._grad_out(source, counts[source])).sum().backward()
    local = slice(rank * layer.local_experts, (rank + 1) * layer.local_experts)
    for name in ("gate_proj", "up_proj", "down_proj"):
        assert teams._close(getattr(layer, name).grad.to_local(), every[name].grad[local],
                            atol=1e-5), name
    result(worst_vs_dense=float((y - yr).detach().abs().max()))
    layer.close()


def refused(rank: int, size: int, per_host: int) -> None:
    """acquire_shmem must fail: prints the error, then meets the other PEs (torch's group) so no
    PE leaves while another still joins the group."""
    try:
        shmem.acquire_shmem().close()
        say("UNEXPECTED acquire_shmem succeeded")
    except shmem.ShmemError as error:
        result(code=error.error_code, message=str(error))
    dist.barrier()


def collectives(rank: int, size: int, per_host: int) -> None:
    """Collectives of a group across hosts agree in rounds through the hosts' leaders
    (docs/architecture.md, "Agreement across hosts"): the remote operations a barrier sends,
    all_gather and all_to_all over the world and over a strided team, a mismatch named alike on
    every PE (the job goes on), and, with SCALE_OUT_LOSE_PE set, a PE lost during a barrier
    ("1") or during a loop of all_gathers ("gather")."""
    handle = shmem.acquire_shmem()
    say("READY")

    def sent() -> dict:
        return shmem.debug_state()["network"]["ops"]

    def operations(ops: dict) -> int:
        return ops["puts"] + ops["gets"] + ops["atomics"]

    shmem.barrier()
    before = sent()
    barriers = 20
    for _ in range(barriers):
        shmem.barrier()
    after = sent()
    result(per_barrier=(operations(after) - operations(before)) / barriers,
           heartbeats=after["heartbeats"] - before["heartbeats"],
           endpoints_after_barriers=shmem.debug_state()["network"]["endpoints"])
    if os.environ.get("SCALE_OUT_LOSE_PE") == "1":
        # Only barriers before the loss: the PEs that are not the last one's watch partners
        # have no endpoint to it, and learn of the loss from those that do.
        lose_during_a_barrier(handle, rank, size)
        return
    # A get from, and a put to, a PE at distance 3 (not a watch partner from 8 PEs on): this
    # PE makes an endpoint to it on first use, and the PE 3 before it, which gets from this
    # one, is answered through an endpoint made when its request came.
    far = (rank + 3) % size
    box = shmem.empty(4, dtype=torch.int64)
    box.fill_(rank)
    shmem.barrier()
    got = torch.empty(4, dtype=torch.int64)
    shmem.get(got, box, far)
    assert torch.equal(got, torch.full((4,), far, dtype=torch.int64)), got
    shmem.barrier()
    shmem.put(box, torch.full((4,), 100 + rank, dtype=torch.int64), far)
    shmem.barrier()
    assert torch.equal(box, torch.full((4,), 100 + (rank - 3) % size, dtype=torch.int64)), box
    shmem.free(box)
    result(endpoints_after_far_get=shmem.debug_state()["network"]["endpoints"])
    gather_operations = []
    for elements in (2, 70_000):  # a small block, and blocks of several chunks
        gathered = shmem.empty(size * elements, dtype=torch.float32)
        before = operations(sent())
        shmem.all_gather(gathered, torch.full((elements,), float(rank)))
        gather_operations.append(operations(sent()) - before)
        want = torch.arange(size, dtype=torch.float32).repeat_interleave(elements)
        assert torch.equal(gathered, want), gathered
        exchanged = shmem.empty(size * elements, dtype=torch.int32)
        source = (torch.arange(size * elements, dtype=torch.int32) // elements) * 100 + rank
        shmem.all_to_all(exchanged, source)
        want = torch.tensor([rank * 100 + src for src in range(size)],
                            dtype=torch.int32).repeat_interleave(elements)
        assert torch.equal(exchanged, want), exchanged
        shmem.free(gathered)
        shmem.free(exchanged)
    # A block of several chunks still crosses to each host as one message.
    result(gather_operations=gather_operations,
           endpoints_after_all_to_all=shmem.debug_state()["network"]["endpoints"])
    if size >= 4:  # the odd PEs: a team whose every member is on another host than the next
        out = shmem.empty(size // 2 * 3, dtype=torch.int64)  # allocations are the world's
        odd = shmem.team_split_strided(shmem.TEAM_WORLD, 1, 2, size // 2)
        if odd is not None:
            shmem.all_gather(out, torch.full((3,), rank, dtype=torch.int64), team=odd)
            assert torch.equal(out, torch.arange(1, size, 2).repeat_interleave(3)), out
            shmem.barrier(team=odd)
            odd.destroy()
        shmem.free(out)
    # The last PE calls all_gather while the others call barrier: every PE is told, alike.
    gathered = shmem.empty(size * 4, dtype=torch.float32)
    try:
        if rank == size - 1:
            shmem.all_gather(gathered, torch.zeros(4))
        else:
            shmem.barrier()
        say("UNEXPECTED the mismatched calls passed")
    except shmem.ShmemError as error:
        result(mismatch_code=error.error_code, mismatch=str(error))
    shmem.barrier()  # a mismatch is not terminal
    shmem.free(gathered)
    if os.environ.get("SCALE_OUT_LOSE_PE") == "gather":
        # The last PE dies while every PE is in a loop of 1 MiB all_gathers (in whatever round
        # of whatever algorithm HYPER_PARALLEL_SHMEM_ALGORITHMS chose).
        import threading

        gathered = shmem.empty(size << 18, dtype=torch.float32)
        block = torch.full((1 << 18,), float(rank))
        shmem.barrier()
        if rank == size - 1:
            def kill_soon():
                time.sleep(0.3)
                say("KILLING", repr(time.time()))
                os.kill(os.getpid(), 9)

            threading.Thread(target=kill_soon, daemon=True).start()
        def gather_for_a_minute():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                shmem.all_gather(gathered, block)

        until_lost(handle, gather_for_a_minute, "the all_gathers went on")
        return
    handle.close()


def atomics(rank: int, size: int, per_host: int) -> None:
    """Atomics on one word of PE 0 from PEs of its host (mapped) and of the other (UCX) at once,
    a lock on compare_swap, put_nbi then fence then a flag, and a wait on several words
    (docs/atomics.md)."""
    with shmem.acquire_shmem():
        say("READY")
        before = check_placement(rank, size, per_host)["ops"]
        counter = shmem.empty((), dtype=torch.int64)
        lock = shmem.empty((), dtype=torch.int64)
        total = shmem.empty((), dtype=torch.int64)
        flags = shmem.empty(size, dtype=torch.int64)
        data = shmem.empty(1 << 17, dtype=torch.int64)  # 1 MiB: a rendezvous across hosts
        for tensor in (counter, lock, total, flags):
            tensor.zero_()
        shmem.barrier()
        n = 300
        seen = [int(shmem.atomic_fetch_add(counter, 1, 0)) for _ in range(n)]
        assert seen == sorted(seen) and len(set(seen)) == n, seen[:10]
        for _ in range(20):  # a critical section across hosts: get, add, put under the lock
            while int(shmem.atomic_compare_swap(lock, 0, rank + 1, 0)) != 0:
                pass
            value = torch.empty((), dtype=torch.int64)
            shmem.get(value, total, 0)
            shmem.put(total, value + 1, 0)
            shmem.quiet()
            shmem.atomic_set(lock, 0, 0)
        shmem.barrier()
        if rank == 0:
            assert int(counter) == n * size and int(total) == 20 * size, (counter, total)
        # put_nbi of 1 MiB, fence, then the flag word (a put, not a signal) at the next PE.
        right, left = (rank + 1) % size, (rank - 1) % size
        shmem.put_nbi(data, torch.arange(1 << 17, dtype=torch.int64) + rank, right)
        shmem.fence()
        shmem.put(flags[rank], torch.tensor(1, dtype=torch.int64), right)
        index = shmem.wait_signal_any(flags, 1)
        assert index == left, (index, left)
        assert torch.equal(data, torch.arange(1 << 17, dtype=torch.int64) + left)
        shmem.quiet()
        shmem.barrier()
        after = shmem.debug_state()["network"]["ops"]
        result(atomics=after["atomics"] - before["atomics"])
        for tensor in (data, flags, total, lock, counter):
            shmem.free(tensor)


def until_lost(handle, body, unexpected: str) -> None:
    """Runs `body`, which a lost PE should end: reports the PEER_LOST (code, message, when),
    or says UNEXPECTED `unexpected` when it returns; then closes what can be closed."""
    try:
        body()
        say("UNEXPECTED", unexpected)
    except shmem.ShmemError as error:
        result(lost_code=error.error_code, lost=str(error), at=time.time())
    try:
        handle.close()
    except shmem.ShmemError:
        pass


def lose_during_a_barrier(handle, rank: int, size: int) -> None:
    """The last PE is killed while the others wait in a barrier; each survivor reports its
    PEER_LOST and when it came."""
    if rank == size - 1:
        time.sleep(0.5)
        say("KILLING", repr(time.time()))
        os.kill(os.getpid(), 9)
    until_lost(handle, shmem.barrier, "the barrier returned")


def main() -> int:
    scenario = sys.argv[1]
    torch.set_num_threads(1)
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    per_host = int(os.environ.get("SCALE_OUT_PES_PER_HOST", "1"))
    init_process_group_from_environment(timeout_s=120)
    try:
        {"suite": suite, "sleeper": sleeper, "waiter": waiter, "mega_moe": mega_moe,
         "timeout": timeout, "ordering": ordering, "asleep": asleep, "fan_in": fan_in,
         "pingpong": pingpong, "bulk_killed": bulk_killed,
         "collectives": collectives, "refused": refused,
         "atomics": atomics}[scenario](rank, size, per_host)
    except BaseException:  # noqa: BLE001 (printed for the test)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        os._exit(1)
    say("OK")
    if scenario not in ("waiter", "bulk_killed") and not os.environ.get("SCALE_OUT_LOSE_PE"):
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # a waiter's group may have lost a peer: do not wait on it at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
