"""MegaMoE's expert pipeline: one call, dispatch -> the local experts -> combine, in two halves.

begin() (MegaMoEResources.start()) sends this PE's expert-sorted rows to their experts' owners,
runs each local expert's computation as soon as its rows have landed and starts the combine,
which sends each expert's results back (on a combine stream of its own, as soon as that expert
is done, while later experts compute; without one, once every local expert is done). finish()
waits for every result to come back. The caller's own work between the two halves fills the
time this PE would otherwise wait for the other PEs' experts.

The combine stream is a shmem.Stream (the host backend's) or, where the heap's tensors are NPU
tensors (CANN with torch_npu), a torch.npu.Stream: the framework's (CombineStream). On an NPU
nothing here blocks the host: the waits, each expert's computation (queued behind its own
wait) and its "done" signal are enqueued on the caller's current stream, the combine kernel on
the combine stream, where it waits for each expert's "done" counter and sends that expert's
results; finish() enqueues the wait for the results and orders the caller's stream after the
combine stream (wait_stream), with no host synchronization.

The counters that order all this are _protocol's; the buffers, and their growth before a call
that needs more, _buffers'. The pipeline reports what happens to a _stats.StatsRecorder (named
events and spans) and reads no clock itself.

Under torch.profiler each phase is a named range (phase()): hps_moe::count_exchange,
hps_moe::wait_rows and hps_moe::expert_<l> (local expert l's computation) per local expert,
hps_moe::wait_results; the native kernels add hps_moe::dispatch and hps_moe::combine on the
thread that runs them (the combine stream's executor when there is one).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from .. import shmem


_NO_RANGE = contextlib.nullcontext()


def phase(name: str):
    """A torch.profiler range named `name` while a profiler records; else nothing (a range
    costs some microseconds even with no profiler on, so eager calls pay only this check)."""
    if torch._C._autograd._profiler_enabled():
        return torch.profiler.record_function(name)
    return _NO_RANGE


class CombineStream:
    """The stream the combine runs on: `stream` is a shmem.Stream (the backend's own, entered
    with shmem.stream()) or a framework stream (a torch.npu.Stream, entered with
    torch.npu.stream()), whose combine orders the caller's stream after it instead of
    synchronizing the host."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.framework = not isinstance(stream, shmem.Stream)

    def entered(self):
        """The context under which calls are enqueued on the combine stream."""
        if self.framework:
            return torch.npu.stream(self.stream)
        return shmem.stream(self.stream)

    def join(self) -> None:
        """What the caller's stream does after a call's results came back: on the host
        backend, waits for the combine stream's executor (the host is the caller's stream);
        with a framework stream, orders the caller's current stream after the combine stream
        (an event wait on the device: the host goes on at once)."""
        if self.framework:
            torch.npu.current_stream().wait_stream(self.stream)
        else:
            self.stream.synchronize()

    def synchronize(self) -> None:
        """Blocks the host until the combine stream has run everything enqueued on it."""
        self.stream.synchronize()


@dataclass
class PendingCall:
    """A call start() began and finish() ends (perf_counter() times)."""

    direction_name: str
    send_rows: int
    started_at: float
    done_at: float   # the last local expert done
    ended_at: float  # start() returned


class Pipeline:
    """Runs the calls of both directions over `protocol` (a _protocol.Protocol) and `buffers`
    (a _buffers.Buffers), the combine on `combine_stream` (a shmem.Stream or a
    torch.npu.Stream, or None: on the caller's stream after the last expert), reporting to
    `recorder` (a _stats.StatsRecorder).
    At most one call per direction is pending (begun, not finished) at a time."""

    def __init__(self, protocol, buffers, combine_stream, recorder) -> None:
        self._protocol, self._buffers = protocol, buffers
        self._combine_stream = None if combine_stream is None else CombineStream(combine_stream)
        self._recorder = recorder
        self._pending = {}  # direction name -> the call start() began, not finished

    def exchange_counts(self, counts_local: torch.Tensor, dtype_code: int) -> tuple:
        """Collective: the per-step count exchange (_protocol.Protocol.exchange_counts)."""
        with self._recorder.exchange(), phase("hps_moe::count_exchange"):
            return self._protocol.exchange_counts(counts_local, dtype_code)

    def is_pending(self, pending: PendingCall) -> bool:
        """Whether `pending` is its direction's call that nothing finished yet."""
        return self._pending.get(pending.direction_name) is pending

    def begin(self, direction_name: str, rows: torch.Tensor, counts: torch.Tensor,
              layout: dict, compute) -> PendingCall:
        """The first half of a call in `direction_name` (a valid one). An earlier call of the
        direction that nothing finished is finished first (its results are dropped); when the
        buffers must grow for this call, every pending call is finished first (nothing may
        land in freed buffers) and they grow on every PE alike. The direction's buffers are
        then viewed in the rows' dtype (_buffers.Buffers.use)."""
        earlier = self._pending.get(direction_name)
        if earlier is not None:
            self.finish(earlier)
        grown = self._buffers.grown_sizes(layout)
        if grown is not None:
            grown = self._buffers.agreed_sizes(grown)  # over a team: the WORLD's, or raises
            for pending in list(self._pending.values()):  # nothing may land in freed buffers
                self.finish(pending)
            self._buffers.resize(*grown)
        self._buffers.use(direction_name, rows.dtype)  # the rows travel in their own dtype
        pending = self._start(direction_name, rows, counts, layout, compute)
        self._pending[direction_name] = pending
        return pending

    def _start(self, direction_name, rows, counts, layout, compute) -> PendingCall:
        protocol = self._protocol
        d = protocol.directions[direction_name]
        protocol.expect(d, layout)
        flat_counts = counts.reshape(-1)
        times = self._recorder.call()
        protocol.wait_free(d)
        # Dispatch on the caller's current stream (on the host's default stream: this thread,
        # which has nothing else to do until rows land; on an NPU, the current NPU stream),
        # first, so the rows leave before anything else runs; then the combine on its own
        # stream, which sends each expert's results back as soon as that expert is done (its
        # kernel waits for each expert's "done" counter), while later experts compute.
        protocol.dispatch(d, rows, flat_counts)
        if self._combine_stream is not None:
            with self._combine_stream.entered():
                protocol.combine(d, flat_counts)
        for local in range(protocol.local_experts):
            with phase("hps_moe::wait_rows"):
                protocol.wait_rows(d, local)
            times.rows_arrived()
            if protocol.later_rows_pending(d, local):  # computation overlaps arrival
                times.started_early()
            begin, count = layout["expert_row"][local], layout["expert_rows"][local]
            with times.computing(), phase(f"hps_moe::expert_{local}"):
                if count:
                    received = d.recv[begin:begin + count]
                    result = compute(local, received)
                    if result is not None and result.data_ptr() != received.data_ptr():
                        received.copy_(result)
            protocol.expert_done(d, local)
        times.experts_done()
        if self._combine_stream is None:  # every expert is done: the combine waits for nothing
            protocol.combine(d, flat_counts)
        times.started()
        return PendingCall(direction_name, layout["send_rows"], times.started_at, times.done_at,
                           times.ended_at)

    def finish(self, pending: PendingCall, copy: bool = True) -> torch.Tensor:
        """The second half of `pending` (a pending call): waits for every result to come back
        and returns them, copied (copy=True) or as the view of the return buffer."""
        del self._pending[pending.direction_name]
        d = self._protocol.directions[pending.direction_name]
        with self._recorder.finishing(pending, self._protocol.local_experts), \
                phase("hps_moe::wait_results"):
            self._protocol.wait_returned(d)
            out = d.returned[:pending.send_rows]
            if copy:
                out = out.clone()
            if self._combine_stream is not None:
                self._combine_stream.join()
        return out

    def quiesce(self) -> None:
        """Finishes every call start() began and nothing finished (their results are dropped),
        then synchronizes the combine stream."""
        for pending in list(self._pending.values()):  # begun by start(), not finished
            self.finish(pending)
        if self._combine_stream is not None:
            self._combine_stream.synchronize()
