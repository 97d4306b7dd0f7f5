"""PEs on several hosts over UCX (docs/scale-out.md): hosts made of namespaces (netns_hosts.py),
and, for a quick check on one host, HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all over loopback.

Each PE is a process running scale_out_pe.py <scenario>; the test reads its lines (READY,
RESULT <json>, OK). Every test ends with no process and no namespace left behind, also when it
fails (NetnsHosts closes in a finally)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import netns_hosts
from netns_hosts import NetnsHosts

HERE = os.path.dirname(os.path.abspath(__file__))
PE = os.path.join(HERE, "scale_out_pe.py")

needs_hosts = pytest.mark.skipif(netns_hosts.available() is not None,
                                 reason=str(netns_hosts.available()))


def _ucx_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libucp.so.0")
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _ucx_present(),
                                reason="UCX (libucp.so.0) is not installed: scripts/setup_deps.sh")


class Pe:
    """One PE process whose stdout lines are collected as they come."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, word: str) -> bool:
        return any(line.startswith(word) for line in self.lines)

    def results(self) -> list[dict]:
        return [json.loads(line[len("RESULT "):]) for line in self.lines
                if line.startswith("RESULT ")]

    def finish(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9
        finally:
            self._reader.join(timeout=5)

    def text(self) -> str:
        return "\n".join(self.lines)


def _env(rank: int, world: int, per_host: int, master: str, port: int, device: str,
         extra: dict | None) -> dict:
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
               LOCAL_RANK=str(rank % per_host), LOCAL_WORLD_SIZE=str(per_host),
               MASTER_ADDR=master, MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=device,
               SCALE_OUT_PES_PER_HOST=str(per_host), PYTHONUNBUFFERED="1",
               HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="20",
               # UCX's own settings: TCP over the hosts' link (shared-memory transports cannot
               # report a lost peer in UCX 1.13, and the hosts share one kernel).
               UCX_TLS="tcp,self", UCX_NET_DEVICES=device)
    env.pop("HYPER_PARALLEL_SHMEM_BACKEND", None)
    env.update(extra or {})
    return env


def _start_on_hosts(hosts: NetnsHosts, scenario: str, per_host: int,
                    extra: dict | None = None) -> list[Pe]:
    world = hosts.count * per_host
    return [Pe(hosts.popen(rank // per_host, [sys.executable, PE, scenario],
                           env=_env(rank, world, per_host, hosts.address(0), 29500, "eth0", extra),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            for rank in range(world)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_here(scenario: str, world: int, extra: dict | None = None,
                per_rank: dict | None = None) -> list[Pe]:
    port = _free_port()
    pes = []
    for rank in range(world):
        env = _env(rank, world, world, "127.0.0.1", port, "lo",
                   {"HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "all", **(extra or {}),
                    **((per_rank or {}).get(rank, {}))})
        pes.append(Pe(subprocess.Popen([sys.executable, PE, scenario], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)))
    return pes


def _all_ok(pes: list[Pe], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    codes = [pe.finish(max(1.0, deadline - time.monotonic())) for pe in pes]
    failed = [rank for rank, (pe, code) in enumerate(zip(pes, codes))
              if code != 0 or not pe.has("OK")]
    assert not failed, "\n".join(f"PE {rank} exited {codes[rank]}:\n{pes[rank].text()}"
                                  for rank in range(len(pes)))


def test_every_peer_remote_over_loopback_runs_the_suite():
    # The quick form: one host, every peer through UCX over lo.
    _all_ok(_start_here("suite", 2, per_rank=None, extra={"SCALE_OUT_PES_PER_HOST": "2"}))


@pytest.mark.parametrize("variable,value,field", [
    ("HYPER_PARALLEL_SHMEM_REMOTE_PEERS", "other-hosts",
     "setting=remote_peers (HYPER_PARALLEL_SHMEM_REMOTE_PEERS)"),
    ("HYPER_PARALLEL_SHMEM_ALGORITHMS", "all_gather=ring",
     "setting=algorithms (HYPER_PARALLEL_SHMEM_ALGORITHMS)")],
    ids=["remote_peers", "algorithms"])
def test_pes_that_disagree_on_a_setting_fail_at_init_on_every_pe(variable, value, field):
    pes = _start_here("suite", 2, extra={"SCALE_OUT_PES_PER_HOST": "2"},
                      per_rank={1: {variable: value}})
    for pe in pes:
        assert pe.finish(120) == 1
        assert "INVALID_CONFIG" in pe.text() and field in pe.text(), pe.text()


@needs_hosts
@pytest.mark.parametrize("per_host,path", [(1, "auto"), (2, "auto"), (1, "rma")],
                         ids=["2x1", "2x2", "2x1-rma-path"])
def test_rma_signals_collectives_and_teams_across_two_hosts(per_host, path):
    # The messages path (the default over TCP), and the rma path forced (docs/scale-out.md).
    with NetnsHosts(2) as hosts:
        _all_ok(_start_on_hosts(hosts, "suite", per_host,
                                {"HYPER_PARALLEL_SHMEM_REMOTE_PATH": path}))
    assert hosts.residue() == []


@needs_hosts
def test_atomics_fence_and_nbi_across_two_hosts_of_two_pes():
    # PE 1 reaches PE 0's word through the mapping, PEs 2 and 3 through UCX, at once
    # (docs/atomics.md).
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "atomics", 2)
        _all_ok(pes)
    assert hosts.residue() == []
    counted = [_merged(pe)["atomics"] for pe in pes]
    # PE 0's and PE 1's words are on host 0: the PEs of host 1 sent every atomic as a message.
    assert counted[2] >= 300 and counted[3] >= 300, counted


def _merged(pe: Pe) -> dict:
    merged: dict = {}
    for found in pe.results():
        merged.update(found)
    return merged


def test_a_world_above_max_pes_fails_at_init_on_every_pe_naming_the_setting():
    pes = _start_here("refused", 3, extra={"SCALE_OUT_PES_PER_HOST": "3",
                                            "HYPER_PARALLEL_SHMEM_MAX_PES": "2"})
    _all_ok(pes)
    for pe in pes:
        outcome = _merged(pe)
        assert outcome["code"] == "INVALID_CONFIG", pe.text()
        assert "HYPER_PARALLEL_SHMEM_MAX_PES" in outcome["message"], pe.text()
        assert "world size" in outcome["message"] and "got 3" in outcome["message"], pe.text()


@pytest.mark.parametrize("size,algorithm", [(8, "direct"), (16, "bruck")])
def test_pes_each_on_a_host_of_its_own_agree_in_log2_rounds(size, algorithm):
    # Every peer remote over loopback: every PE is a host of its own, so a barrier is a
    # dissemination among all of them (docs/architecture.md, "Agreement across hosts").
    # all_gather set to one algorithm for both block sizes (auto takes Bruck for the small one
    # only).
    pes = _start_here("collectives", size, extra={
        "SCALE_OUT_PES_PER_HOST": str(size),
        "HYPER_PARALLEL_SHMEM_ALGORITHMS": f"all_gather={algorithm}"})
    _all_ok(pes, timeout=400)
    bound = 2 * math.ceil(math.log2(size))
    outcomes = [_merged(pe) for pe in pes]
    for rank, outcome in enumerate(outcomes):
        assert outcome["per_barrier"] <= bound, (rank, outcome["per_barrier"], bound)
        assert outcome["per_barrier"] == math.ceil(math.log2(size)), (rank, outcome)
        # Endpoints made when first used: the watch partners (2^k either way) at init, which
        # the barriers' rounds use; every peer once all_to_all has sent to each.
        assert outcome["endpoints_after_barriers"] == len(_watch_partners(rank, size)), \
            (rank, outcome)
        assert outcome["endpoints_after_barriers"] <= bound, (rank, outcome)
        # PE rank + 3 (a get and a put to it) and PE rank - 3 (the answer to its get).
        far = {(rank + 3) % size, (rank - 3) % size} - _watch_partners(rank, size)
        assert outcome["endpoints_after_far_get"] == \
            len(_watch_partners(rank, size)) + len(far), (rank, outcome)
        assert outcome["endpoints_after_all_to_all"] == size - 1, (rank, outcome)
        # A block of several chunks crosses as one message, as a block of one chunk does.
        small, chunked = outcome["gather_operations"]
        assert chunked == small, (rank, outcome["gather_operations"])
        rounds = math.ceil(math.log2(size))
        if algorithm == "direct":  # the agreement's rounds, then a message to every PE
            assert small == rounds + size - 1, (rank, outcome["gather_operations"])
        else:  # and Bruck's rounds, a message each (two where its blocks wrap around)
            assert rounds + rounds <= small <= rounds + 2 * rounds, (rank, small)
        assert outcome["mismatch_code"] == "COLLECTIVE_MISMATCH", outcome
        assert "field=kind" in outcome["mismatch"], outcome
        assert f"pe {size - 1}: all_gather" in outcome["mismatch"], outcome
    assert len(_verdicts(outcomes)) == 1, "every PE says the same"


def _watch_partners(rank: int, size: int) -> set[int]:
    # The PEs at distance 2^k either way (docs/scale-out.md, "Liveness").
    partners = set()
    distance = 1
    while distance < size:
        partners |= {(rank + distance) % size, (rank - distance) % size}
        distance *= 2
    return partners - {rank}


def _verdicts(outcomes: list[dict]) -> set[str]:
    # The verdict each PE reported, past the header (which names the PE's own call).
    return {o["mismatch"][o["mismatch"].index("collective calls differ"):] for o in outcomes}


@pytest.mark.parametrize("size,remote_peers", [(8, "all"), (8, "blocks:7")],
                         ids=["8-hosts-of-1", "hosts-of-7-and-1"])
def test_a_pe_lost_during_a_dissemination_is_peer_lost_on_every_survivor(size, remote_peers):
    # Every PE a host of its own; or PEs 0-6 on one host and PE 7 on another, where PEs 2 and
    # 4, whose watch partners are all on their own host, learn of the loss from a PE of their
    # host (ControlBlock::told_lost).
    pes = _start_here("collectives", size, extra={
        "SCALE_OUT_PES_PER_HOST": str(size), "SCALE_OUT_LOSE_PE": "1",
        "HYPER_PARALLEL_SHMEM_REMOTE_PEERS": remote_peers})
    for pe in pes[:-1]:
        assert pe.finish(300) == 0, pe.text()
    assert pes[-1].finish(60) == -9, pes[-1].text()
    killed_at = float(next(line.split()[1] for line in pes[-1].lines
                           if line.startswith("KILLING")))
    lost = size - 1
    for rank, pe in enumerate(pes[:-1]):
        outcome = _merged(pe)
        assert outcome["lost_code"] == "PEER_LOST", outcome
        assert f"pe={lost}" in outcome["lost"], outcome
        assert outcome["at"] - killed_at < 1.5, (outcome["at"] - killed_at)
        if rank in _watch_partners(lost, size):
            continue
        if remote_peers == "all":
            # PEs 2 and 4 have no endpoint to PE 7: they heard it from a PE that had one.
            assert outcome["endpoints_after_barriers"] == len(_watch_partners(rank, size))
            assert "reported it lost" in outcome["lost"], (rank, outcome)
        else:
            assert outcome["endpoints_after_barriers"] == 0, (rank, outcome)
            assert "a PE of this host passed it on" in outcome["lost"], (rank, outcome)


def _hosts_of_two(algorithm: str, extra: dict | None = None) -> list[Pe]:
    # 8 PEs over loopback as 4 hosts of 2 (REMOTE_PEERS=blocks:2), all_gather's algorithm set.
    return _start_here("collectives", 8, extra={
        "SCALE_OUT_PES_PER_HOST": "2", "HYPER_PARALLEL_SHMEM_REMOTE_PEERS": "blocks:2",
        "HYPER_PARALLEL_SHMEM_ALGORITHMS": f"all_gather={algorithm}", **(extra or {})})


# Remote operations per PE of one all_gather on 4 hosts of 2 PEs, by algorithm and by PE
# (docs/architecture.md, "Collectives across hosts"): the agreement is 2 messages from each
# leader (even PEs). direct: every PE's block to one PE of each other host (3 messages); bruck:
# the leaders' 2 rounds, a message each, but host 0's second round, whose two hosts' blocks
# (hosts 0 and 3) do not continue each other (2 messages); ring: the leaders' 3 rounds.
GATHER_OPERATIONS = {
    "direct": [5, 3, 5, 3, 5, 3, 5, 3],
    "bruck": [5, 0, 4, 0, 4, 0, 4, 0],
    "ring": [5, 0, 5, 0, 5, 0, 5, 0],
}


@pytest.mark.parametrize("algorithm", ["direct", "bruck", "ring"])
def test_all_gather_among_hosts_of_two_pes_in_each_algorithm_then_a_pe_lost(algorithm):
    # The remote operations of each PE, a mismatch named alike on every PE, then PE 7 killed
    # in a loop of 1 MiB all_gathers: PEER_LOST naming it on every survivor.
    pes = _hosts_of_two(algorithm, {"SCALE_OUT_LOSE_PE": "gather"})
    for pe in pes[:-1]:
        assert pe.finish(300) == 0, pe.text()
    assert pes[-1].finish(60) == -9, pes[-1].text()
    outcomes = [_merged(pe) for pe in pes]
    for rank, outcome in enumerate(outcomes):
        assert outcome["per_barrier"] == (2 if rank % 2 == 0 else 0), (rank, outcome)
        # A small block and blocks of several chunks cost the same messages.
        assert outcome["gather_operations"] == [GATHER_OPERATIONS[algorithm][rank]] * 2, \
            (rank, algorithm, outcome["gather_operations"])
        assert outcome["mismatch_code"] == "COLLECTIVE_MISMATCH", outcome
    assert len(_verdicts(outcomes)) == 1, "every PE says the same"
    killed_at = float(next(line.split()[1] for line in pes[-1].lines
                           if line.startswith("KILLING")))
    for outcome in outcomes[:-1]:
        assert outcome["lost_code"] == "PEER_LOST", outcome
        assert "pe=7" in outcome["lost"], outcome
        assert outcome["at"] - killed_at < 1.5, (outcome["at"] - killed_at)


@needs_hosts
@pytest.mark.parametrize("per_host", [2, 4], ids=["2x2", "2x4"])
def test_collectives_across_two_hosts_cross_the_link_once_per_pair_of_hosts(per_host):
    # Each host's leader speaks for its PEs: one message per barrier from each leader, none
    # from the other PEs.
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "collectives", per_host)
        _all_ok(pes, timeout=400)
        outcomes = [_merged(pe) for pe in pes]
    assert hosts.residue() == []
    for rank, outcome in enumerate(outcomes):
        assert outcome["per_barrier"] == (1 if rank % per_host == 0 else 0), (rank, outcome)
        small, chunked = outcome["gather_operations"]
        assert chunked == small, (rank, outcome["gather_operations"])
        assert outcome["mismatch_code"] == "COLLECTIVE_MISMATCH", outcome
    assert len(_verdicts(outcomes)) == 1, "every PE says the same"


@needs_hosts
def test_order_holds_across_hosts_for_every_size_and_through_a_third_pe():
    with NetnsHosts(2) as hosts:
        _all_ok(_start_on_hosts(hosts, "ordering", 2))
    assert hosts.residue() == []


@needs_hosts
def test_many_pes_on_other_hosts_signal_one_waiter():
    with NetnsHosts(4) as hosts:
        pes = _start_on_hosts(hosts, "fan_in", 1)
        _all_ok(pes)
        assert pes[0].results()[0]["counted"] == 200 * 3, pes[0].text()
    assert hosts.residue() == []


@needs_hosts
def test_sleeping_waiters_wake_on_a_remote_write_each_in_turn():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "asleep", 1)
        _all_ok(pes)
        woke = pes[1].results()[0]
        # They slept on the network's events (not only spun), and each woke on its message,
        # long before the wait's 20 s bound.
        assert woke["event_sleeps"] >= 1, woke
        assert all(w is not None and 0 <= w < 2.0 for w in woke["woke_s"]), woke
    assert hosts.residue() == []


@needs_hosts
def test_a_ping_pong_across_hosts_beside_a_cpu_hog_on_each():
    with NetnsHosts(2) as hosts:
        for host in range(2):
            hosts.popen(host, ["sh", "-c", "while :; do :; done"])
        pes = _start_on_hosts(hosts, "pingpong", 1, {"SCALE_OUT_ROUNDS": "2000"})
        _all_ok(pes)
        assert pes[0].results()[0]["rounds"] == 2000, pes[0].text()
    assert hosts.residue() == []


@needs_hosts
def test_a_pe_killed_during_a_bulk_put_signal_is_peer_lost_on_every_waiter():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "bulk_killed", 1)
        survivor = pes[0]
        assert survivor.finish(120) == 0, survivor.text()
        assert pes[1].finish(30) == -9, pes[1].text()
        killed_at = float(next(line.split()[1] for line in pes[1].lines
                               if line.startswith("KILLING")))
        outcomes = [r for r in survivor.results() if "slot" in r]
        assert len(outcomes) == 2, survivor.text()
        for outcome in outcomes:
            assert outcome["code"] == "PEER_LOST", outcome
            assert "pe=1" in outcome["message"], outcome
            assert outcome["at"] - killed_at < 1.0, (outcome["at"] - killed_at)
    assert hosts.residue() == []


@needs_hosts
def test_a_remote_op_completes_while_its_target_computes_outside_the_library():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "sleeper", 1)
        _all_ok(pes)
        sender, target = pes[0].results()[0], pes[1].results()[0]
        assert target["landed_while_away"] is True, pes[1].text()
        assert sender["issued_s"] < 1.0, sender  # the put and signal did not wait for PE 1
        assert 1.9 < sender["answered_s"] < 10, sender
    assert hosts.residue() == []


@needs_hosts
def test_a_wait_on_a_remote_pe_that_computes_times_out_naming_what_it_awaited():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "timeout", 1, {"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "2"})
        _all_ok(pes)
        outcome = pes[0].results()[0]
        assert outcome["code"] == "TIMEOUT", outcome
        assert "wait_signal timed out" in outcome["message"], outcome
        assert "expected=1" in outcome["message"] and "observed=0" in outcome["message"], outcome
        assert 1.9 < outcome["waited_s"] < 10, outcome
    assert hosts.residue() == []


@needs_hosts
def test_a_remote_pe_killed_mid_wait_is_peer_lost_within_a_second():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "waiter", 1, {"SCALE_OUT_SELF_KILL": "1"})
        survivor = pes[0]
        assert survivor.finish(120) == 0, survivor.text()
        assert pes[1].finish(30) == -9
        killed_at = float(next(line.split()[1] for line in pes[1].lines
                               if line.startswith("KILLING")))
        outcome = survivor.results()[0]
        assert outcome["code"] == "PEER_LOST", outcome
        assert "pe=1" in outcome["message"] and "host1" in outcome["message"], outcome
        assert outcome["at"] - killed_at < 1.0, (outcome["at"] - killed_at)
    assert hosts.residue() == []


@needs_hosts
def test_a_host_whose_link_goes_down_is_peer_lost_within_the_silence_bound():
    silence_ms = 1000
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "waiter", 1,
                              {"HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS": str(silence_ms)})
        deadline = time.monotonic() + 120
        while not all(pe.has("READY") for pe in pes):
            assert time.monotonic() < deadline and all(pe.process.poll() is None for pe in pes), \
                [pe.text() for pe in pes]
            time.sleep(0.05)
        time.sleep(0.3)
        pulled = time.time()
        hosts.set_link(1, up=False)
        for rank, pe in enumerate(pes):
            assert pe.finish(60) == 0, pe.text()
            outcome = pe.results()[0]
            assert outcome["code"] == "PEER_LOST", outcome
            assert f"pe={1 - rank}" in outcome["message"], outcome
            assert "no heartbeat" in outcome["message"], outcome
            # The documented bound: the silence plus one heartbeat period, with slack for a
            # loaded machine.
            assert outcome["at"] - pulled < silence_ms / 1000 * 2 + 1.0, outcome["at"] - pulled
            # Closing the terminal runtime does not wait for the silent host.
            closed = [r["close_s"] for r in pe.results() if "close_s" in r]
            assert closed and closed[0] < 5.0, pe.results()
    assert hosts.residue() == []


@needs_hosts
@pytest.mark.parametrize("per_host", [1, 2], ids=["ep-over-2-hosts", "ep-in-host-dp-across"])
def test_mega_moe_across_hosts_matches_the_dense_layer(per_host):
    with NetnsHosts(2) as hosts:
        _all_ok(_start_on_hosts(hosts, "mega_moe", per_host), timeout=400)
    assert hosts.residue() == []


@needs_hosts
def test_without_ucx_every_pe_fails_at_init_naming_the_hosts_and_their_pes():
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "suite", 2,
                              {"HYPER_PARALLEL_SHMEM_UCX_LIBRARY": "/nonexistent/libucp.so.0"})
        for rank, pe in enumerate(pes):
            assert pe.finish(120) == 1, pe.text()
            text = pe.text()
            assert "UNSUPPORTED_CAPABILITY" in text and "could not load" in text, text
            assert "hosts=host0 (net:[" in text and "]): pes 0,1; host1 (net:[" in text, text
            assert "pes_without_ucx=0 (host0" in text, text
    assert hosts.residue() == []


FAKE_CANN = os.path.join(HERE, "..", "..", "build", "backends", "cann", "fake_cann",
                         "libhps_fake_cann_v1_5.so")


@needs_hosts
@pytest.mark.skipif(not os.path.exists(FAKE_CANN), reason="the C++ build's fake CANN library")
def test_a_device_backend_refuses_pes_on_several_hosts_naming_them():
    # The CANN backend (over its fake vendor library) maps device memory: one host only.
    fake = os.path.abspath(FAKE_CANN)
    with NetnsHosts(2) as hosts:
        pes = _start_on_hosts(hosts, "suite", 1, {"HYPER_PARALLEL_SHMEM_BACKEND": "cann",
                                                  "HYPER_PARALLEL_SHMEM_CANN_LIBRARY": fake,
                                                  "HYPER_PARALLEL_SHMEM_ACL_LIBRARY": fake})
        for rank, pe in enumerate(pes):
            assert pe.finish(120) == 1, pe.text()
            text = pe.text()
            assert "UNSUPPORTED_CAPABILITY" in text and "backend=cann" in text, text
            assert "reaches PEs on its own host only" in text, text
            assert f"other_host_pes={1 - rank}" in text and "@host0 (net:[" in text, text
    assert hosts.residue() == []
