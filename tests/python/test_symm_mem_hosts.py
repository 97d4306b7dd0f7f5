"""torch's symmetric-memory API on this runtime across hosts: two namespace hosts
(netns_hosts.py), their PEs joined by a gloo group whose store is on host 0, remote peers
reached over UCX (docs/scale-out.md, docs/api.md "torch's symmetric-memory API").

- examples/symm_mem_torch.py, unchanged, at 2 hosts x 1 PE and 2 hosts x 2 PEs: it checks
  itself against gloo and prints its success line.
- The operators, bitwise against gloo on the same inputs (integer-valued floats): the PE
  functions of test_symm_mem.py (the one-host tests), run across the hosts, and a few of this
  file's own (experts that receive nothing, the fused matmuls, a subgroup of one PE per host).
- The handle across hosts: buffer_ptrs 0 for a peer of the other host and a pointer for one of
  this host, get_buffer of a remote peer raising torch's "across nodes" error, put_signal,
  wait_signal and barrier to remote peers, and get_signal_pad of a remote peer raising.

This file is also the PE: `python test_symm_mem_hosts.py matrix` runs every case of its layout
in one process per PE and prints `CASE <name> <seconds> ok|FAIL <error>`; the tests read those
(one launch per layout, shared by that layout's tests). Every launch ends with its processes
exited, the hosts' private /dev/shm empty, no namespace left and nothing new in this machine's
/dev/shm; every wait is bounded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import netns_hosts  # noqa: E402
from netns_hosts import NetnsHosts  # noqa: E402

SELF = os.path.abspath(__file__)
EXAMPLE = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "symm_mem_torch.py"))
LAYOUTS = {"2x1": 1, "2x2": 2}  # two hosts of this many PEs each
PE_TIMEOUT_SEC = 20  # the runtime's bound on every wait (HYPER_PARALLEL_SHMEM_TIMEOUT_SEC)
LAUNCH_TIMEOUT_S = 75  # a launch's bound, from the first PE's start to the last PE's exit

CASES = [
    "placement_and_handle",
    "get_signal_pad_of_a_remote_peer_raises",
    "all_to_all_vdev[float32]",
    "all_to_all_vdev[int64]",
    "all_to_all_vdev_2d[align=1]",
    "all_to_all_vdev_2d[align=16]",
    "all_to_all_vdev_2d_empty_experts[align=1]",
    "all_to_all_vdev_2d_empty_experts[align=16]",
    "all_to_all_vdev_2d_offset[float32]",
    "all_to_all_vdev_2d_offset[int64]",
    "reductions[float32]",
    "reductions[bfloat16]",
    "fused_matmuls",
]
# The cases of each layout: at 2 x 2 also a subgroup of one PE from each host.
LAYOUT_CASES = {"2x1": CASES, "2x2": CASES + ["subgroup_across_hosts"]}


# ---- the PE side (this file run as a script on a namespace host) --------------------------


def _pe_cases(rank: int, size: int, per_host: int) -> list:
    """(name, function, args) of every case; _run_case makes each a symm_mem session."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from hyper_parallel.core.multicore import shmem

    import test_symm_mem as one_host  # the one-host tests' PE functions, reused

    def same_host(a: int, b: int) -> bool:
        return a // per_host == b // per_host

    def placement_and_handle(rank, size):
        t = symm_mem.empty(64, dtype=torch.float32, device="cpu").fill_(rank + 1)
        # The runtime put this host's PEs in shared memory and the other host's behind UCX.
        peers = shmem.debug_state()["peers"]
        for peer in peers:
            want = ("self" if peer["pe"] == rank else
                    "shared memory" if same_host(peer["pe"], rank) else "ucx")
            assert peer["transport"] == want, (peer, want)
        hdl = symm_mem.rendezvous(t, dist.group.WORLD)
        assert hdl.rank == rank and hdl.world_size == size
        ptrs, pads = list(hdl.buffer_ptrs), list(hdl.signal_pad_ptrs)
        assert len(ptrs) == size and len(pads) == size, (ptrs, pads)
        assert ptrs[rank] == t.data_ptr(), (ptrs, t.data_ptr())
        for peer in range(size):
            if same_host(peer, rank):
                assert ptrs[peer] != 0 and pads[peer] != 0, (peer, ptrs, pads)
            else:
                assert ptrs[peer] == 0 and pads[peer] == 0, (peer, ptrs, pads)
        hdl.barrier(channel=0)
        remote = [peer for peer in range(size) if not same_host(peer, rank)]
        local = [peer for peer in range(size) if same_host(peer, rank)]
        for peer in local:  # a peer of this host: its buffer, mapped here
            assert torch.equal(hdl.get_buffer(peer, (64,), torch.float32),
                               torch.full((64,), float(peer + 1)))
        for peer in remote:  # a peer of the other host: torch's own error
            with pytest.raises(RuntimeError, match="across nodes"):
                hdl.get_buffer(peer, (64,), torch.float32)
        with pytest.raises(RuntimeError, match="across nodes"):
            torch.ops.symm_mem.get_remote_tensors(t, dist.group.WORLD.group_name)
        # put_signal / wait_signal with the peers of the other host, on two channels.
        for peer in remote:
            hdl.put_signal(peer, channel=2)
            hdl.put_signal(peer, channel=3, timeout_ms=10_000)
        for peer in remote:
            hdl.wait_signal(peer, channel=3, timeout_ms=10_000)
            hdl.wait_signal(peer, channel=2)
        hdl.barrier(channel=1)
        hdl.barrier(channel=1, timeout_ms=10_000)  # the slots were reset: a second one pairs
        # Data to the other host, then its signal: there when the signal is (small and 1 MiB).
        right = (rank + per_host) % size  # the same local rank on the other host
        left = (rank - per_host) % size
        big = symm_mem.empty(1 << 18, dtype=torch.float32, device="cpu").fill_(-1)
        hb = symm_mem.rendezvous(big, dist.group.WORLD)
        for count, channel in ((16, 4), (1 << 18, 5)):
            payload = torch.arange(count, dtype=torch.float32) + 1000 * rank + channel
            shmem.put(big[:count], payload, pe=right)
            hb.put_signal(right, channel=channel)
            hb.wait_signal(left, channel=channel)
            want = torch.arange(count, dtype=torch.float32) + 1000 * left + channel
            assert torch.equal(big[:count], want), (count, big[:count])
            hb.barrier(channel=6)  # every check done before the next write
        # The pads are zero after the synchronisations (torch's note).
        hdl.barrier(channel=7)
        shmem.barrier()
        assert int(hdl.get_signal_pad(rank).sum()) == 0
        assert int(hb.get_signal_pad(rank).sum()) == 0
        shmem.barrier()
        del hdl, hb
        return True

    def vdev_2d_empty_experts(rank, size, align):
        # Expert 1 receives no row from anyone, rank 0 sends nothing at all, zeros elsewhere.
        experts = 3
        nsplits = experts * size
        group = dist.group.WORLD.group_name
        split_list = [0 if rank == 0 or i % experts == 1 else (i * 3 + rank) % 5
                      for i in range(nsplits)]
        capacity = 8 * nsplits
        inp = symm_mem.empty(capacity, 4, dtype=torch.float32, device="cpu")
        inp.copy_(one_host._rows(rank + 11, capacity, 4, torch.float32))
        out = symm_mem.empty(capacity * size + align * experts, 4, dtype=torch.float32,
                             device="cpu").fill_(-1)
        in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device="cpu")
        in_splits.copy_(torch.tensor(split_list))
        out_so = symm_mem.empty(2, nsplits, dtype=torch.int64, device="cpu").fill_(-1)
        torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_so, group,
                                              major_align=align)
        out_splits = torch.zeros(nsplits, dtype=torch.int64)
        dist.all_to_all_single(out_splits, torch.tensor(split_list))
        by_expert = out_splits.view(size, experts).t()
        assert torch.equal(out_so[0], by_expert.reshape(-1)), (out_so, by_expert)
        assert int(by_expert[1].sum()) == 0
        padded = by_expert.clone()
        for e in range(experts):
            total = int(by_expert[e].sum())
            padded[e, -1] += max((total + align - 1) // align * align, align) - total
        flat = padded.reshape(-1)
        assert torch.equal(out_so[1], torch.cumsum(flat, 0) - flat), (out_so, flat)
        sent = torch.tensor(split_list).view(size, experts).sum(1)
        got = out_splits.view(size, experts).sum(1)
        expected = torch.empty(int(got.sum()), 4, dtype=torch.float32)
        dist.all_to_all_single(expected, inp[: int(sent.sum())].clone(), got.tolist(),
                               sent.tolist())
        ends = torch.cumsum(out_splits, 0)
        written = torch.zeros(out.shape[0], dtype=torch.bool)
        for e in range(experts):
            for src in range(size):
                chunk = src * experts + e
                piece = expected[int(ends[chunk] - out_splits[chunk]): int(ends[chunk])]
                start = int(out_so[1][e * size + src])
                assert torch.equal(out[start: start + piece.shape[0]], piece), (e, src)
                written[start: start + piece.shape[0]] = True
        assert bool((out[~written] == -1).all()), "nothing written outside the chunks"
        return True

    def fused_matmuls(rank, size):
        group = dist.group.WORLD.group_name
        gen = torch.Generator().manual_seed(rank)

        def ints(*shape):  # integer-valued: every sum exact, whatever the order
            return torch.randint(-4, 5, shape, generator=gen).float()

        for gather_dim in (0, 1):
            A_shard = ints(4, 6, 8)
            Bs = [ints(8, 5), ints(8, 3)]
            A, res = torch.ops.symm_mem.fused_all_gather_matmul(A_shard, Bs, gather_dim, group)
            A_ref, res_ref = symm_mem._fused_all_gather_matmul_fallback(A_shard, Bs,
                                                                       gather_dim, group)
            assert torch.equal(A, A_ref), gather_dim
            for got, want in zip(res, res_ref):
                assert torch.equal(got, want), gather_dim
        A = ints(4 * size, 6)
        B = ints(6, 2 * size)
        for scatter_dim in (0, 1):
            got = torch.ops.symm_mem.fused_matmul_reduce_scatter(A, B, "sum", scatter_dim, group)
            want = symm_mem._fused_matmul_reduce_scatter_fallback(A, B, "sum", scatter_dim,
                                                                 group)
            assert torch.equal(got, want), scatter_dim
        return True

    def signal_pad_of_a_remote_peer(rank, size):
        # torch's get_buffer raises for a peer of another host; its get_signal_pad should too,
        # rather than hand back a tensor over address 0 (never read here).
        t = symm_mem.empty(8, dtype=torch.float32, device="cpu")
        hdl = symm_mem.rendezvous(t, dist.group.WORLD)
        remote = (rank + per_host) % size
        assert hdl.signal_pad_ptrs[remote] == 0
        pad = None
        try:
            pad = hdl.get_signal_pad(remote)
        except RuntimeError as error:
            assert "across nodes" in str(error), error
        assert pad is None, (f"get_signal_pad({remote}) of a peer on the other host returned "
                             f"a tensor of shape {tuple(pad.shape)} at data_ptr "
                             f"{pad.data_ptr():#x} instead of raising")
        return True

    def subgroup_across_hosts(rank, size):
        # Groups of one PE from each host ({0, 2} and {1, 3}): the handle maps no peer, and the
        # operators over the subgroup's team equal gloo's over the same group.
        groups = [dist.new_group(list(range(first, size, per_host)))
                  for first in range(per_host)]
        mine = groups[rank % per_host]
        name = mine.group_name
        members = 2
        t = symm_mem.empty(6, dtype=torch.float32, device="cpu").fill_(rank + 1)
        hdl = symm_mem.rendezvous(t, mine)
        assert hdl.world_size == members and hdl.rank == rank // per_host
        partner = 1 - hdl.rank
        assert hdl.buffer_ptrs[partner] == 0 and hdl.buffer_ptrs[hdl.rank] == t.data_ptr()
        with pytest.raises(RuntimeError, match="across nodes"):
            hdl.get_buffer(partner, (6,), torch.float32)
        hdl.put_signal(partner, channel=1)
        hdl.wait_signal(partner, channel=1)
        hdl.barrier(channel=2)
        summed = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", name)
        want = t.clone()
        dist.all_reduce(want, group=mine)
        assert torch.equal(summed, want), (summed, want)
        splits_list = [3, 0] if hdl.rank == 0 else [2, 5]
        inp = symm_mem.empty(8, 2, dtype=torch.float32, device="cpu")
        inp.copy_(one_host._rows(rank, 8, 2, torch.float32))
        out = symm_mem.empty(16, 2, dtype=torch.float32, device="cpu").fill_(-1)
        splits = symm_mem.empty(members, dtype=torch.int64, device="cpu")
        splits.copy_(torch.tensor(splits_list))
        out_so = symm_mem.empty(2, members, dtype=torch.int64, device="cpu")
        torch.ops.symm_mem.all_to_all_vdev(inp, out, splits, out_so, name)
        got_splits = torch.zeros(members, dtype=torch.int64)
        dist.all_to_all_single(got_splits, torch.tensor(splits_list), group=mine)
        assert torch.equal(out_so[0], got_splits), (out_so, got_splits)
        expected = torch.empty(int(got_splits.sum()), 2)
        dist.all_to_all_single(expected, inp[: sum(splits_list)].clone(), got_splits.tolist(),
                               splits_list, group=mine)
        assert torch.equal(out[: expected.shape[0]], expected), (out, expected)
        del hdl
        return True

    def unwrapped(function):  # test_symm_mem's PE function without its symm_session
        return function.__wrapped__

    return [
        ("placement_and_handle", placement_and_handle, ()),
        ("get_signal_pad_of_a_remote_peer_raises", signal_pad_of_a_remote_peer, ()),
        ("all_to_all_vdev[float32]", unwrapped(one_host._vdev), (torch.float32, 3)),
        ("all_to_all_vdev[int64]", unwrapped(one_host._vdev), (torch.int64, 3)),
        ("all_to_all_vdev_2d[align=1]", unwrapped(one_host._vdev_2d), (torch.float32, 1, 3)),
        ("all_to_all_vdev_2d[align=16]", unwrapped(one_host._vdev_2d),
         (torch.float32, 16, 3)),
        ("all_to_all_vdev_2d_empty_experts[align=1]", vdev_2d_empty_experts, (1,)),
        ("all_to_all_vdev_2d_empty_experts[align=16]", vdev_2d_empty_experts, (16,)),
        ("all_to_all_vdev_2d_offset[float32]", unwrapped(one_host._vdev_2d_offset),
         (torch.float32, 2)),
        ("all_to_all_vdev_2d_offset[int64]", unwrapped(one_host._vdev_2d_offset),
         (torch.int64, 2)),
        ("reductions[float32]", unwrapped(one_host._reductions), (torch.float32,)),
        ("reductions[bfloat16]", unwrapped(one_host._reductions), (torch.bfloat16,)),
        ("fused_matmuls", fused_matmuls, ()),
    ] + ([("subgroup_across_hosts", subgroup_across_hosts, ())] if per_host == 2 else [])


def _run_case(function, rank: int, size: int, args: tuple) -> str:
    """One case as a whole symm_mem session: "ok", or "FAIL <error>". The case's frames (and
    the tensors they hold) are gone before the session's collective shutdown, also when the
    case raised, so one failing case does not keep the runtime up for the next."""
    import gc
    import traceback

    from hyper_parallel.core.multicore import shmem

    failure = None
    try:
        function(rank, size, *args)
    except BaseException as error:  # noqa: BLE001 (reported to the test, which fails)
        traceback.print_exc(file=sys.stdout)
        failure = f"{type(error).__name__}: {error}"
    gc.collect()
    try:
        shmem.symm_mem_shutdown()
        state = shmem.debug_state()
        assert state["state"] == "uninitialized" and state["reference_count"] == 0, \
            f"the runtime is left {state['state']} after the case"
    except BaseException as error:  # noqa: BLE001
        traceback.print_exc(file=sys.stdout)
        failure = (failure + "; then " if failure else "") + f"{type(error).__name__}: {error}"
    return "ok" if failure is None else "FAIL " + " ".join(failure.split())[:2000]


def _pe_main() -> int:
    import torch
    import torch.distributed as dist

    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    per_host = int(os.environ["LOCAL_WORLD_SIZE"])
    init_process_group_from_environment(timeout_s=60)
    cases = _pe_cases(rank, size, per_host)
    assert [name for name, _, _ in cases] == LAYOUT_CASES[f"2x{per_host}"]
    for name, function, args in cases:
        started = time.monotonic()
        verdict = _run_case(function, rank, size, args)
        print(f"CASE {name} {time.monotonic() - started:.2f} {verdict}", flush=True)
        dist.barrier()  # the PEs leave every case together, whatever happened in it
    print("DONE", flush=True)
    dist.destroy_process_group()
    return 0


# ---- the test side -------------------------------------------------------------------------


def _ucx_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libucp.so.0")
        return True
    except OSError:
        return False


pytestmark = [
    pytest.mark.host_only("torch's symm_mem on the CPU across hosts"),
    pytest.mark.skipif(netns_hosts.available() is not None,
                       reason=str(netns_hosts.available())),
    pytest.mark.skipif(not _ucx_present(),
                       reason="UCX (libucp.so.0) is not installed: scripts/setup_deps.sh"),
]


class _Pe:
    """One PE process whose stdout lines are collected as they come."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            self.process.kill()  # the host's close kills whatever it left
            self.process.wait(timeout=10)
            return -9
        finally:
            self._reader.join(timeout=5)

    def text(self) -> str:
        return "\n".join(self.lines)


class Launch:
    """What one launch on two namespace hosts left: each PE's exit code and output, and what
    was left behind (the hosts' /dev/shm before they closed, namespaces, processes, files)."""

    def __init__(self, codes: list, outputs: list, leftovers: list, seconds: float) -> None:
        self.codes = codes
        self.outputs = outputs
        self.leftovers = leftovers
        self.seconds = seconds

    def report(self) -> str:
        return "\n".join(f"--- PE {rank} exited {code}:\n{text}" for rank, (code, text)
                         in enumerate(zip(self.codes, self.outputs)))

    def cases(self, rank: int) -> dict:
        """{case: (verdict, seconds)} from PE `rank`'s CASE lines."""
        found = {}
        for line in self.outputs[rank].splitlines():
            match = re.match(r"CASE (\S+) (\S+) (.*)$", line)
            if match:
                found[match.group(1)] = (match.group(3), float(match.group(2)))
        return found


def _env(rank: int, world: int, per_host: int, master: str) -> dict:
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
               LOCAL_RANK=str(rank % per_host), LOCAL_WORLD_SIZE=str(per_host),
               MASTER_ADDR=master, MASTER_PORT="29500", GLOO_SOCKET_IFNAME="eth0",
               PYTHONUNBUFFERED="1", HYPER_PARALLEL_SHMEM_TIMEOUT_SEC=str(PE_TIMEOUT_SEC),
               # TCP over the hosts' link, as the scale-out tests (test_scale_out.py).
               UCX_TLS="tcp,self", UCX_NET_DEVICES="eth0")
    env.pop("HYPER_PARALLEL_SHMEM_BACKEND", None)
    env.pop("HYPER_PARALLEL_SHMEM_REMOTE_PEERS", None)
    return env


def _our_processes(command: list) -> list:
    """Processes of this machine whose command line holds `command` (a PE left running)."""
    wanted = [arg.encode() for arg in command]
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(argv[i:i + len(wanted)] == wanted for i in range(len(argv))):
            found.append(int(pid))
    return found


def _launch(argv: list, per_host: int) -> Launch:
    """argv (a script and its arguments) as one PE per rank on two namespace hosts; waits at
    most LAUNCH_TIMEOUT_S for all of them."""
    shm_before = set(os.listdir("/dev/shm"))
    started = time.monotonic()
    leftovers = []
    with NetnsHosts(2) as hosts:
        world = 2 * per_host
        pes = [_Pe(hosts.popen(rank // per_host, [sys.executable, *argv],
                               env=_env(rank, world, per_host, hosts.address(0)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
               for rank in range(world)]
        deadline = started + LAUNCH_TIMEOUT_S
        codes = [pe.finish(deadline - time.monotonic()) for pe in pes]
        for host in range(2):  # each host's private /dev/shm, once its PEs are gone
            listing = hosts.run(host, ["ls", "-A", "/dev/shm"], timeout=20)
            if listing.stdout.split():
                leftovers.append(f"host {host}'s /dev/shm: {listing.stdout.split()}")
    seconds = time.monotonic() - started
    if hosts.residue():
        leftovers.append(f"namespaces: {hosts.residue()}")
    running = _our_processes([sys.executable, *argv])
    if running:
        leftovers.append(f"processes still running {argv}: {running}")
    new_files = sorted(set(os.listdir("/dev/shm")) - shm_before)
    if new_files:
        leftovers.append(f"new files in /dev/shm: {new_files}")
    return Launch(codes, [pe.text() for pe in pes], leftovers, seconds)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_torch_only_example_runs_unchanged_across_two_hosts(layout):
    per_host = LAYOUTS[layout]
    launch = _launch([EXAMPLE], per_host)
    assert launch.codes == [0] * 2 * per_host, launch.report()
    # Its success line, printed by rank 0 (or by every rank, naming itself).
    success = re.compile(rf"symm_mem on HPS\W.*\b{2 * per_host} ranks\b.*"
                         r"dispatch, combine and all-reduce equal gloo's")
    assert any(success.search(line) for line in launch.outputs[0].splitlines()), \
        launch.report()
    assert launch.leftovers == [], launch.leftovers


@pytest.fixture(scope="module")
def matrix():
    """matrix(layout) -> the Launch of this file's PEs in that layout (one launch per layout,
    kept for the module)."""
    launches: dict = {}

    def run(layout: str) -> Launch:
        if layout not in launches:
            try:
                launches[layout] = _launch([SELF, "matrix"], LAYOUTS[layout])
            except Exception as error:  # noqa: BLE001 (kept: the layout's tests fail alike)
                launches[layout] = f"the {layout} launch failed: {type(error).__name__}: {error}"
        if isinstance(launches[layout], str):
            pytest.fail(launches[layout])
        return launches[layout]

    return run


def _case_params():
    params = []
    for layout in LAYOUTS:
        for case in LAYOUT_CASES[layout]:
            params.append(pytest.param(layout, case, id=f"{layout}-{case}"))
    return params


@pytest.mark.parametrize("layout,case", _case_params())
def test_operator_across_two_hosts_equals_gloo(matrix, layout, case):
    launch = matrix(layout)
    verdicts = [launch.cases(rank).get(case, ("missing", 0.0))[0]
                for rank in range(2 * LAYOUTS[layout])]
    assert verdicts == ["ok"] * len(verdicts), \
        f"{case} at {layout}: {verdicts}\n{launch.report()}"


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_operator_pes_exit_cleanly_and_leave_nothing_behind(matrix, layout):
    launch = matrix(layout)
    assert launch.codes == [0] * 2 * LAYOUTS[layout], launch.report()
    assert all("DONE" in text.splitlines() for text in launch.outputs), launch.report()
    assert launch.leftovers == [], launch.leftovers


if __name__ == "__main__":
    if sys.argv[1:] != ["matrix"]:
        sys.exit(f"usage: {sys.argv[0]} matrix (one PE of test_symm_mem_hosts.py)")
    sys.exit(_pe_main())
