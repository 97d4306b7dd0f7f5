"""MegaMoE's pipeline statistics: PipelineStats, and the recorder that fills it.

The pipeline reports named events (a call began, an expert's rows arrived, an expert started
while later rows were still arriving, the experts are done, start() returns) and spans (the
count exchange, an expert's computation, finish()) to a StatsRecorder; the recorder is the
only place that reads the clock (time.perf_counter, or a clock it is given). The counter
protocol reads no clock at all.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass


@dataclass
class PipelineStats:
    """How the last calls overlapped: experts that started computing while rows of a later
    local expert had not all arrived yet (computation overlapping arrival), of all experts.
    On a device heap (CUDA, or CANN with torch_npu) the waits and the experts are queued on
    the stream: the times are the host's time to queue them, and started_early is not counted
    (reading the counters would block the host)."""

    calls: int = 0
    experts: int = 0
    started_early: int = 0
    dispatch_s: float = 0.0   # from dispatch enqueued to the last local expert's rows in
    compute_s: float = 0.0    # inside the local experts' computations
    wait_return_s: float = 0.0  # from the last expert done to every result back
    run_s: float = 0.0        # the whole calls (dispatch to every result back)
    exchange_s: float = 0.0   # the per-step count exchanges
    overlapped_s: float = 0.0  # the caller's own work between start() and finish()

    @property
    def communication_s(self) -> float:
        """Time the calls spent outside the experts' computations: what communication and
        synchronisation left in the step (count exchanges included; the caller's own work
        between start() and finish() is not the calls')."""
        return self.run_s - self.compute_s + self.exchange_s


class CallTimes:
    """The first half of one call (start()) as the pipeline reports it: its moments
    (started_at, done_at, ended_at: clock times, as PendingCall carries them) and the spans
    that become its share of the statistics once start() is through (a call that fails
    before adds no times)."""

    __slots__ = ("_recorder", "_clock", "started_at", "done_at", "ended_at", "_arrived_s",
                 "_compute_s", "_tick")

    def __init__(self, recorder: "StatsRecorder") -> None:
        self._recorder, self._clock = recorder, recorder.clock
        self.started_at = self._clock()  # before the wait for the owners' previous combine
        self.done_at = self.ended_at = 0.0
        self._arrived_s = self._compute_s = self._tick = 0.0

    def rows_arrived(self) -> None:
        """A local expert's rows have all landed (the last one's counts as the dispatch's
        time)."""
        self._arrived_s = self._clock() - self.started_at

    def started_early(self) -> None:
        """A local expert starts computing while a later one's rows are still arriving."""
        self._recorder.stats.started_early += 1

    def computing(self) -> "CallTimes":
        """`with times.computing():` spans one local expert's computation (and the copy of
        its results into the receive buffer)."""
        return self

    def __enter__(self) -> "CallTimes":
        self._tick = self._clock()
        return self

    def __exit__(self, kind, error, trace) -> bool:
        if kind is None:
            self._compute_s += self._clock() - self._tick
        return False

    def experts_done(self) -> None:
        """Every local expert is done (its "done" counter raised)."""
        self.done_at = self._clock()

    def started(self) -> None:
        """start() is through (the combine started, or done): its times join the stats."""
        stats = self._recorder.stats
        stats.dispatch_s += self._arrived_s
        stats.compute_s += self._compute_s
        self.ended_at = self._clock()


class StatsRecorder:
    """Fills `stats` (a PipelineStats; assigning a new one starts afresh) from the pipeline's
    events; `clock` is time.perf_counter unless given."""

    def __init__(self, clock=time.perf_counter) -> None:
        self.stats = PipelineStats()
        self.clock = clock

    @contextlib.contextmanager
    def exchange(self):
        """Spans one per-step count exchange."""
        started = self.clock()
        yield
        self.stats.exchange_s += self.clock() - started

    def call(self) -> CallTimes:
        """A call's first half begins: the times it reports."""
        return CallTimes(self)

    @contextlib.contextmanager
    def finishing(self, pending, experts: int):
        """Spans finish() of `pending` (a PendingCall: its started_at, done_at and ended_at),
        a call of `experts` local experts. The time between start() and finish() was the
        caller's, not the call's."""
        resumed = self.clock()
        yield
        finished = self.clock()
        stats = self.stats
        stats.calls += 1
        stats.experts += experts
        stats.overlapped_s += resumed - pending.ended_at
        stats.wait_return_s += (pending.ended_at - pending.done_at) + (finished - resumed)
        stats.run_s += (pending.ended_at - pending.started_at) + (finished - resumed)
