"""MegaMoEResources: the resident symmetric buffers that MegaMoE layers of one shape share.

One object holds one shmem Handle and, allocated once and reused every step (and by every
layer of the same shape that is given it), what these modules make of it:
  - _buffers: per direction (forward, backward), a receive buffer [C, H] (C: capacity in rows)
    and a return buffer [R, H] (R: the most rows any PE routes in one call), their sizing and
    their growth before a call that needs more;
  - _protocol: the count matrix [P, E] the per-step count exchange fills and the monotonic
    counters that order each call's dispatch, experts and combine;
  - _pipeline: one call, dispatch -> the local experts -> combine, in two halves (start(),
    finish()), with the combine on a stream of its own or after the last expert;
  - _stats: PipelineStats, which the pipeline's events fill.

This class puts them together: it validates the arguments, checks that every PE built the
same resources, chooses the combine stream, holds the resources for one call at a time, and
owns the lifecycle.

Over an expert-parallel group smaller than the WORLD (group=pg) the calls run over the
group's shmem team: the count exchange, the barriers, the dispatch and combine kernels and
the protocol's signals, with PEs numbered in the team. The handle is the WORLD's and every
allocation stays collective over every PE: construction (which also checks over the WORLD
that every PE's group can be an EP group and that every PE built the same resources),
the buffers' first sizing and close() are collective over the WORLD, in the same order on
every PE (every EP group builds the same layers in the same order, as data-parallel replicas
do). The buffers then do not grow: growing them would need every EP group at once, at a call
only one group makes, so a call that needs more raises (size them with max_tokens, or keep
the lossless default capacity_factor=None, which never grows while no PE routes more rows).

close() (explicit, or the context manager; never from garbage collection) finishes a call
that start() began and nothing finished, synchronizes the combine stream, passes a barrier
(the team's), frees the buffers in a fixed order, passes a barrier (the WORLD's), destroys
the team and closes the handle: every PE must create and close its resources in the same
order.
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch

from .. import shmem
from ..shmem.errors import assertion, type_error, value_error
from ._buffers import Buffers
from ._groups import FITS, NOT_A_MEMBER, ep_group_of
from ._pipeline import PendingCall, Pipeline
from ._protocol import Protocol
from ._stats import PipelineStats, StatsRecorder

_CONFIG_FIELDS = ("hidden_size", "num_experts", "top_k", "dtype", "chunk_rows",
                  "capacity_permille", "max_tokens", "pes")
_GROUP_FIELD = "group"  # checked first: every PE's group can be an EP group


def _cpus_for_a_combine_thread(pes: int, pinned: bool) -> bool:
    """Whether a host-backend PE has a second CPU of its own for a combine stream's executor.
    `pinned`: the runtime pinned this PE to its share of the cpus (its affinity is then its
    own); else the PEs share the affinity they were started with (a launcher, taskset or a
    container's cpuset), so a PE's own is its part of it. Where a PE has one core, the
    executor shares it with the PE's own thread: the combine then costs a hand-off between
    threads of one core at every expert and overlaps nothing (measured: dispatch + combine
    alone of 1 MiB per PE on 2 PEs, 326 us with the thread against 283 us without; the small
    model's step 22.5 ms against 21 ms)."""
    usable = len(os.sched_getaffinity(0))
    own = usable if pinned else usable // max(1, pes)
    return own >= 2


def _npu_stream():
    """A torch.npu.Stream on the heap's NPU where the heap's tensors are NPU tensors (CANN with
    torch_npu imported: every SHMEM call is enqueued on torch.npu.current_stream()); else
    None."""
    device = str(shmem.debug_state()["device"])
    if not device.startswith("npu") or not hasattr(torch, "npu"):
        return None
    return torch.npu.Stream(device=torch.device(device))


def _own_stream():
    """A stream for the combine, so results go back while later experts compute: the backend's
    own (shmem.Stream), or where the backend refuses streams of its own, the framework's NPU
    stream (CANN with torch_npu: a torch.npu.Stream); None where there is neither (CUDA, whose
    streams are torch's, and CANN without torch_npu), and the combine then runs once every
    local expert is done."""
    try:
        return shmem.Stream()
    except shmem.ShmemError as error:
        if error.error_code != "UNSUPPORTED_CAPABILITY":
            raise
        return _npu_stream()


_DTYPES = ("float32", "float64", "bfloat16", "float16")


def _dtype_code(dtype: torch.dtype) -> int:
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise type_error("mega_moe", "dtype", "one of torch." + ", torch.".join(_DTYPES), dtype)
    return _DTYPES.index(name)


class MegaMoEResources:
    """The resident symmetric buffers and the combine stream of MegaMoE layers of one shape.

    MegaMoEResources(hidden_size, num_experts, top_k, *, dtype=torch.float32,
                     capacity_factor=None, max_tokens=None, chunk_rows=128, group=None,
                     overlap_combine=None)

    overlap_combine: True runs the combine on a stream of its own, which sends each expert's
    results back as soon as that expert is done while later experts compute; False runs it on
    the caller's stream once every local expert is done. None (the default) overlaps on the host
    backend only where the PE has a second CPU of its own for the stream's executor (not
    where a PE has one core of its own, its share of the machine: there the executor shares
    that core and measured slower); on a device heap it asks for a stream: on CANN with
    torch_npu (NPU tensors) a torch.npu.Stream on the heap's NPU, which the combine kernel
    runs on while the experts compute on the caller's current stream; where there is no
    stream to take (CUDA, whose streams are torch's; CANN without torch_npu) it runs the
    combine after the last expert. True on a backend without streams raises
    UNSUPPORTED_CAPABILITY.

    Collective: every PE constructs it with the same arguments, in the same order as its other
    collective calls; a PE whose arguments differ makes every PE raise COLLECTIVE_MISMATCH
    naming the field. Use it as a context manager or call close() explicitly.
    """

    def __init__(self, hidden_size: int, num_experts: int, top_k: int, *,
                 dtype: torch.dtype = torch.float32, capacity_factor: float | None = None,
                 max_tokens: int | None = None, chunk_rows: int = 128, group=None,
                 overlap_combine: bool | None = None) -> None:
        for name, value in (("hidden_size", hidden_size), ("num_experts", num_experts),
                            ("top_k", top_k), ("chunk_rows", chunk_rows)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise type_error("mega_moe", name, "an int", f"{type(value).__name__} {value!r}")
            if value < 1:
                raise value_error("mega_moe", name, "positive", value)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise value_error("mega_moe", "max_tokens", "a positive int or None", repr(max_tokens))
        if capacity_factor is not None and not (isinstance(capacity_factor, (int, float))
                                                and capacity_factor > 0):
            raise value_error("mega_moe", "capacity_factor", "a positive number or None",
                                          repr(capacity_factor))
        if overlap_combine not in (None, True, False):
            raise type_error("mega_moe", "overlap_combine", "True, False or None",
                                         repr(overlap_combine))
        if top_k > num_experts:
            raise value_error("mega_moe", "top_k", f"at most num_experts ({num_experts})", top_k)
        self.hidden_size, self.num_experts, self.top_k = hidden_size, num_experts, top_k
        self.dtype, self.capacity_factor, self.chunk_rows = dtype, capacity_factor, chunk_rows
        dtype_code = _dtype_code(dtype)
        ep = ep_group_of(group)  # local: a group of another type fails before any collective
        self.group, self.ranks = group, ep.ranks
        self.pes, self.rank = ep.size, ep.rank  # the EP group's (its team's) PEs, this PE's
        self._lock = threading.Lock()
        self._closed = False
        self._protocol = self._buffers = self._team = None
        self._handle = shmem.acquire_shmem()  # the WORLD's: the symmetric heap is world-wide
        try:
            backend = shmem.backend_info()
            world = shmem.n_pes()
            # Local, before any collective: a refused stream fails here, with no peer left in
            # a collective this PE will not enter.
            if overlap_combine is None:
                # A device's streams run beside the caller (NPU tensors: torch_npu's, even
                # where the fake's heap is host memory); a host heap's copies need a CPU
                # (every PE of the machine shares its cores, whatever its group).
                self.combine_stream = _npu_stream()
                if self.combine_stream is None:
                    overlap_combine = (not backend.host_addressable_heap
                                       or _cpus_for_a_combine_thread(world, backend.own_core))
                    self.combine_stream = _own_stream() if overlap_combine else None
            elif overlap_combine:
                # UNSUPPORTED_CAPABILITY without streams (an NPU heap takes torch_npu's)
                self.combine_stream = _npu_stream() or shmem.Stream()
            else:
                self.combine_stream = None
            # Over the WORLD: every PE's group can be an EP group (else every PE raises alike)
            # and every PE built the same resources (their buffers are WORLD allocations).
            problem = ep.problem(num_experts)
            self._check_agreement([problem, ep.size], [
                hidden_size, num_experts, top_k, dtype_code, chunk_rows,
                -1 if capacity_factor is None else round(capacity_factor * 1000),
                -1 if max_tokens is None else max_tokens, ep.size])
            self.local_experts = num_experts // self.pes
            if not ep.world:
                self._team = shmem.team(group)  # collective over the group's members
                self._check_team(ep)
            self._protocol = Protocol(self.pes, self.rank, num_experts, chunk_rows,
                                      team=self._team)
            self._protocol.allocate()  # collective: the count matrix and the counters
            self._buffers = Buffers(self._protocol.directions, hidden_size, dtype, self.pes,
                                    capacity_factor, backend.granule_bytes,
                                    lambda: shmem.debug_state()["heap"],
                                    agree=None if self._team is None else self._world_max)
            if max_tokens is not None:
                self._resize(self._buffers.capacity_for(max_tokens * top_k), max_tokens * top_k)
            self._recorder = StatsRecorder()
            self._pipeline = Pipeline(self._protocol, self._buffers, self.combine_stream,
                                      self._recorder)
        except BaseException:
            self._release_after_failure()
            raise

    @property
    def team(self):
        """The shmem Team the calls run over (None: the WORLD's, group None or the WORLD)."""
        return self._team

    # ---- agreement, and the buffers' sizes ---------------------------------------------------

    def _gather_world(self, mine: list) -> list:
        """Collective over the WORLD: every PE's list of ints `mine`, in PE order."""
        world = shmem.n_pes()
        gathered = shmem.empty(world * len(mine), dtype=torch.int64)
        try:
            shmem.all_gather(gathered, torch.tensor(mine, dtype=torch.int64))
            return gathered.view(world, len(mine)).tolist()
        finally:
            shmem.free(gathered)

    def _world_max(self, mine: list) -> list:
        """Collective over the WORLD: the elementwise largest of every PE's `mine` (the
        buffers' first sizing over a team: every EP group sizes its buffers alike)."""
        return [max(column) for column in zip(*self._gather_world(mine))]

    def _check_agreement(self, group: list, config: list) -> None:
        """`group`: why this PE's group cannot be an EP group (FITS when it can) and its size;
        `config`: the configuration fields. Every PE raises alike: ValueError when a PE's group
        cannot be an EP group, COLLECTIVE_MISMATCH naming the first field the PEs disagree on."""
        table = self._gather_world(group + config)
        unfit = [(pe, row[0], row[1]) for pe, row in enumerate(table) if row[0] != FITS]
        if unfit:
            why = "; ".join(
                f"PE {pe}: a group without this rank" if problem == NOT_A_MEMBER else
                f"PE {pe}: a group of {size} PEs, which does not divide num_experts "
                f"({self.num_experts})" for pe, problem, size in unfit)
            raise value_error(
                "mega_moe",
                _GROUP_FIELD, "on every PE an expert-parallel group: one with this rank in it, "
                "whose size divides num_experts", why)
        for index, name in enumerate(_CONFIG_FIELDS):
            values = [row[len(group) + index] for row in table]
            if len(set(values)) > 1:
                raise shmem.ShmemError.make(
                    "COLLECTIVE_MISMATCH", "mega_moe", "validate",
                    assertion("PEs built MegaMoE resources with different configurations",
                              field=name, values_by_pe=values))

    def _check_team(self, ep) -> None:
        """The team numbers its PEs as the group numbers its ranks (the layer takes its experts
        by its rank in the group, the kernels by its team PE)."""
        team = self._team
        if (team.n_pes, team.my_pe, tuple(team.pes)) != (ep.size, ep.rank, tuple(ep.ranks)):
            raise shmem.ShmemError.make(
                "INVALID_STATE", "mega_moe", "validate",
                assertion("the group's shmem team numbers its PEs unlike the group its ranks",
                          team_pes=list(team.pes), team_pe=team.my_pe,
                          group_ranks=list(ep.ranks), group_rank=ep.rank))

    def heap_bytes(self, capacity: int, return_rows: int) -> int:
        """Symmetric heap bytes the receive and return buffers of both directions take for
        `capacity` receive rows and `return_rows` return rows (64-byte granules, as the heap
        reserves them)."""
        return self._buffers.heap_bytes(capacity, return_rows)

    @property
    def symmetric_bytes(self) -> int:
        """Symmetric heap bytes these resources hold now: both directions' buffers, the count
        matrix and the counters."""
        if self._closed:
            return 0
        return self._buffers.held_bytes + self._protocol.held_bytes

    def _resize(self, capacity: int, return_rows: int) -> None:
        """Collective: replaces both directions' buffers with ones of the given sizes."""
        self._buffers.resize(capacity, return_rows)

    # ---- one call: dispatch, compute per local expert as its rows land, combine (_pipeline) --

    def exchange_counts(self, counts_local: torch.Tensor,
                        dtype: torch.dtype | None = None) -> torch.Tensor:
        """Collective: every PE's counts per expert, as a [P, E] int64 CPU tensor (on SHMEM;
        the layout is computed on the host). `dtype` (None: the resources' dtype) is the dtype
        the call's rows travel in, its dtype or a narrower floating one (under torch.autocast
        a float32 layer's rows travel in the autocast dtype): every PE checks that every PE
        gave the same before any row moves, and raises alike COLLECTIVE_MISMATCH field=dtype
        when not (one PE under autocast, another not), ValueError when the buffers cannot hold
        it."""
        dtype = self.dtype if dtype is None else dtype
        # A dtype the buffers cannot hold is sent as -1: every PE raises alike after the exchange.
        code = _dtype_code(dtype) if self._buffers.holds(dtype) else -1
        counts, codes = self._pipeline.exchange_counts(counts_local, code)
        if len(set(codes)) > 1:
            raise shmem.ShmemError.make(
                "COLLECTIVE_MISMATCH", "mega_moe", "validate",
                assertion("PEs made a MegaMoE call with rows of different dtypes (is autocast "
                          "on for some PEs only?)", field="dtype",
                          values_by_pe=[_DTYPES[c] if c >= 0 else "unsupported" for c in codes]))
        if code < 0:
            raise value_error(
                "mega_moe",
                "the call's dtype", f"{self.dtype} or a narrower one of float32, bfloat16, "
                f"float16 (the buffers' own; build the resources, or MegaMoE, with "
                f"dtype={dtype} instead)", dtype)
        return counts

    def layout(self, counts: torch.Tensor) -> dict:
        return self._protocol.layout(counts)

    def run(self, direction_name: str, rows: torch.Tensor, counts: torch.Tensor, layout: dict,
            compute, *, copy: bool = True) -> torch.Tensor:
        """Sends this PE's expert-sorted `rows` to the experts' owners, runs compute(local,
        received) for each local expert as soon as its rows landed (the results go back while
        the next expert computes), and returns this PE's results in the order of `rows`.
        Collective: every PE calls it for the same step. run() is finish(start(...)), in one
        hold of the resources; `copy` as finish() takes it.

        `received` is the view of the receive buffer that holds the expert's rows; compute
        writes the expert's results over it (same shape and dtype) and returns None, or
        returns them and they are copied there. The view is valid during the call only."""
        with self._holding():
            return self._pipeline.finish(self._begin(direction_name, rows, counts, layout,
                                                     compute), copy)

    def start(self, direction_name: str, rows: torch.Tensor, counts: torch.Tensor, layout: dict,
              compute) -> "PendingCall":
        """The first half of run(): the dispatch, every local expert's computation as its rows
        land, and the combine (started on its own stream, or done). What the caller computes
        before finish() fills the time this PE would otherwise spend waiting for the other
        PEs' experts (MegaMoE computes its shared expert there). One call at a time per
        direction (a forward and a backward call may both be pending: they have buffers and
        counters of their own): a start() while an earlier call of its direction was not
        finished finishes that one first (its results are dropped)."""
        with self._holding():
            return self._begin(direction_name, rows, counts, layout, compute)

    def finish(self, pending: "PendingCall", *, copy: bool = True) -> torch.Tensor:
        """The second half of run(): waits for every result to come back and returns this
        PE's results in the order of the rows start() sent: a tensor of its own (copy=True),
        or (copy=False) the view of the return buffer that holds them, without another pass
        over the rows. The view is valid until this PE's next start() of the same direction
        (no owner can send that call's results before this PE's rows of it left); read it
        before then, or copy it."""
        with self._holding():
            if not self._pipeline.is_pending(pending):
                raise shmem.ShmemError.make(
                    "INVALID_STATE", "mega_moe", "validate",
                    assertion("this MegaMoE call was already finished (or a later start() of "
                              "its direction finished it)"))
            return self._pipeline.finish(pending, copy)

    @contextlib.contextmanager
    def _holding(self):
        """Holds the resources for one step of a call; another thread in one at the same time
        gets INVALID_STATE."""
        if not self._lock.acquire(blocking=False):
            raise shmem.ShmemError.make(
                "INVALID_STATE", "mega_moe", "validate",
                assertion("MegaMoE resources are already in a call on another thread: one call "
                          "at a time per resources"))
        try:
            yield
        finally:
            self._lock.release()

    def _begin(self, direction_name, rows, counts, layout, compute):
        if self._closed:
            raise shmem.ShmemError.make("INVALID_STATE", "mega_moe", "validate",
                                        assertion("MegaMoE resources are closed"))
        if direction_name not in self._directions:
            raise value_error("mega_moe", "direction_name", "'forward' or 'backward'",
                                          repr(direction_name))
        if not self._buffers.holds(rows.dtype):
            raise value_error("mega_moe", "rows", f"rows of {self.dtype} or a narrower one of "
                                          f"float32, bfloat16, float16 (the buffers' own)",
                                          rows.dtype)
        return self._pipeline.begin(direction_name, rows, counts, layout, compute)

    # ---- close ------------------------------------------------------------------------------

    def _release_after_failure(self) -> None:
        """After a failed construction: frees what exists and closes the handle, best effort."""
        try:
            if self._buffers is not None:
                self._buffers.free()
            if self._protocol is not None:
                self._protocol.free()
        except shmem.ShmemError:
            pass
        finally:
            try:
                self._destroy_team()
            except shmem.ShmemError:
                pass
            try:
                self._handle.close()
            except shmem.ShmemError:
                pass
            self._closed = True

    def _destroy_team(self) -> None:
        """Collective over the team's PEs: ends this resources' handle of the team."""
        team, self._team = self._team, None
        if team is not None:
            team.destroy()

    @property
    def capacity(self) -> int:
        """Receive rows per direction (0 before the buffers' first sizing)."""
        return self._buffers.capacity

    @property
    def return_rows(self) -> int:
        """Return rows per direction (0 before the buffers' first sizing)."""
        return self._buffers.return_rows

    @property
    def counts(self) -> torch.Tensor | None:
        """The count matrix the per-step count exchange fills (None once closed)."""
        return self._protocol.counts

    @property
    def counters(self) -> torch.Tensor | None:
        """The counters of both directions, one 64-byte line each (None once closed)."""
        return self._protocol.counters

    @property
    def _directions(self) -> dict:
        """Direction name -> its buffers and counters (a _protocol.Direction)."""
        return self._protocol.directions

    @property
    def stats(self) -> PipelineStats:
        """The pipeline's statistics since construction (assign a new PipelineStats to start
        afresh)."""
        return self._recorder.stats

    @stats.setter
    def stats(self, stats: PipelineStats) -> None:
        self._recorder.stats = stats

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Collective: quiesce, barrier (the team's), free in a fixed order (over the WORLD),
        barrier (the WORLD's), destroy the team, close the handle. Idempotent. Call it after
        every backward finished, before the process group is destroyed."""
        with self._holding():
            if self._closed:
                return
            self._pipeline.quiesce()  # finishes what start() began, syncs the combine stream
            self._protocol.barrier()  # no PE of the team sends into these buffers any more
            self._buffers.free()
            self._protocol.free()  # the counters, then the count matrix
            shmem.barrier()
            self._closed = True
            try:
                self._destroy_team()
            finally:
                self._handle.close()

    def __enter__(self) -> "MegaMoEResources":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"MegaMoEResources(hidden_size={self.hidden_size}, num_experts={self.num_experts}, "
                f"top_k={self.top_k}, dtype={self.dtype}, ranks={list(self.ranks)}, "
                f"capacity={self.capacity}, "
                f"return_rows={self.return_rows}, closed={self._closed})")
