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


def main() -> int:
    scenario = sys.argv[1]
    torch.set_num_threads(1)
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    per_host = int(os.environ.get("SCALE_OUT_PES_PER_HOST", "1"))
    init_process_group_from_environment(timeout_s=120)
    try:
        {"suite": suite, "sleeper": sleeper, "waiter": waiter, "mega_moe": mega_moe,
         "timeout": timeout}[scenario](
            rank, size, per_host)
    except BaseException:  # noqa: BLE001 (printed for the test)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        os._exit(1)
    say("OK")
    if scenario != "waiter":
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # a waiter's group may have lost a peer: do not wait on it at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
