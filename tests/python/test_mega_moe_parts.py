"""MegaMoEResources' pieces on their own, in one process without a runtime: the statistics
recorder against a clock the test drives, the buffers' sizing, growth, OUT_OF_MEMORY text
against a heap the test describes and their views in a narrower row dtype, the protocol's targets and its arrival check, and the
pipeline's order of protocol steps and statistics events over a protocol that logs them."""

from __future__ import annotations

import pytest
import torch

from helpers import expect_shmem_error
from hyper_parallel.core.multicore.mega_moe import PendingCall, PipelineStats
from hyper_parallel.core.multicore.mega_moe._buffers import Buffers, _rows_view
from hyper_parallel.core.multicore.mega_moe._pipeline import Pipeline
from hyper_parallel.core.multicore.mega_moe._protocol import Direction, Protocol
from hyper_parallel.core.multicore.mega_moe._stats import StatsRecorder


class _Clock:
    """A clock that reads what the test set."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _directions() -> dict:
    return {"forward": Direction(0), "backward": Direction(4)}


# ---- statistics -------------------------------------------------------------------------------


def test_the_recorder_turns_events_into_the_stats_of_one_call():
    clock = _Clock()
    recorder = StatsRecorder(clock)
    clock.now = 1.0
    with recorder.exchange():
        clock.now = 1.5
    clock.now = 2.0
    times = recorder.call()                 # started_at 2
    for arrived, (begin, end) in ((3.0, (3.0, 4.0)), (5.0, (5.5, 7.0))):
        clock.now = arrived
        times.rows_arrived()
        clock.now = begin
        with times.computing():
            clock.now = end
    times.started_early()
    clock.now = 8.0
    times.experts_done()
    clock.now = 9.0
    times.started()
    pending = PendingCall("forward", 4, times.started_at, times.done_at, times.ended_at)
    assert (pending.started_at, pending.done_at, pending.ended_at) == (2.0, 8.0, 9.0)
    stats = recorder.stats
    assert (stats.dispatch_s, stats.compute_s, stats.calls) == (3.0, 2.5, 0)
    clock.now = 12.0                        # the caller's own work: 3 s
    with recorder.finishing(pending, experts=2):
        clock.now = 12.25
    assert stats == PipelineStats(calls=1, experts=2, started_early=1, dispatch_s=3.0,
                                  compute_s=2.5, wait_return_s=1.25, run_s=7.25,
                                  exchange_s=0.5, overlapped_s=3.0)
    assert stats.communication_s == 7.25 - 2.5 + 0.5


def test_a_failed_computation_or_wait_adds_no_times():
    clock = _Clock()
    recorder = StatsRecorder(clock)
    times = recorder.call()
    with pytest.raises(RuntimeError):
        with times.computing():
            clock.now = 5.0
            raise RuntimeError("expert failed")
    pending = PendingCall("forward", 1, 0.0, 0.0, 0.0)
    with pytest.raises(RuntimeError):
        with recorder.finishing(pending, experts=1):
            raise RuntimeError("wait failed")
    times.started()
    assert recorder.stats == PipelineStats()


def test_assigning_new_stats_starts_afresh_mid_call():
    recorder = StatsRecorder(_Clock())
    times = recorder.call()
    fresh = recorder.stats = PipelineStats()
    times.started_early()
    assert fresh.started_early == 1


# ---- buffers ----------------------------------------------------------------------------------


def _buffers(capacity_factor=None, heap=None, pes=2) -> Buffers:
    return Buffers(_directions(), 64, torch.float32, pes, capacity_factor, 64,
                   heap or (lambda: {"heap_size": 1 << 20, "largest_free_block": 1 << 20}))


def _layout(send: int, recv: int) -> dict:
    return {"max_send_rows": send, "max_recv_rows": recv}


def test_sizes_lossless_and_with_a_capacity_factor():
    assert _buffers().capacity_for(10) == 20                      # P * R
    assert _buffers(capacity_factor=0.5).capacity_for(11) == 6   # ceil(R * factor)
    assert _buffers(capacity_factor=0.01).capacity_for(1) == 1
    assert _buffers().heap_bytes(4096, 2048) == 2 * (4096 + 2048) * 64 * 4
    assert _buffers().heap_bytes(0, 1) == 2 * (64 + 256)          # a granule at least
    coarse = Buffers(_directions(), 64, torch.float32, 2, None, 1024, lambda: {})
    assert coarse.heap_bytes(0, 1) == 2 * (1024 + 1024)  # the granule the runtime reports
    assert _buffers().held_bytes == 0


def test_buffers_hold_rows_of_their_dtype_or_a_narrower_one_in_views_of_one_allocation():
    fp32 = _buffers()
    assert [fp32.holds(t) for t in (torch.float32, torch.bfloat16, torch.float16)] == [True] * 3
    assert not fp32.holds(torch.float64) and not fp32.holds(torch.int32)
    assert not fp32.holds(torch.float8_e4m3fn)  # 1 byte, but no row dtype of the layer's
    bf16 = Buffers(_directions(), 64, torch.bfloat16, 2, None, 64, lambda: {})
    assert bf16.holds(torch.float16) and not bf16.holds(torch.float32)
    allocation = torch.zeros(4, 6)
    view = _rows_view(allocation, torch.bfloat16)
    assert view.shape == (4, 6) and view.dtype == torch.bfloat16 and view.is_contiguous()
    assert view.untyped_storage().data_ptr() == allocation.untyped_storage().data_ptr()
    view.fill_(1.0)  # the first half of the allocation's bytes, nothing past them
    assert allocation.view(-1)[12:].eq(0).all() and allocation.view(-1)[:12].ne(0).all()
    assert _rows_view(allocation, torch.float32) is allocation


def test_growth_is_alike_everywhere_at_least_a_quarter_and_never_shrinks():
    buffers = _buffers(capacity_factor=0.5)
    assert buffers.grown_sizes(_layout(0, 0)) == (1, 1)          # nothing yet: one row
    buffers.capacity, buffers.return_rows = 40, 100
    assert buffers.grown_sizes(_layout(100, 40)) is None
    assert buffers.grown_sizes(_layout(101, 10)) == (63, 125)    # 1.25x; capacity follows
    assert buffers.grown_sizes(_layout(300, 10)) == (150, 300)   # what the call needs
    assert buffers.grown_sizes(_layout(10, 41)) == (50, 100)     # receive rows alone
    assert buffers.grown_sizes(_layout(10, 90)) == (90, 100)


def test_a_heap_too_small_names_the_bytes_needed_before_allocating_anything():
    heap = {"heap_size": 1 << 20, "largest_free_block": 1000}
    buffers = _buffers(heap=lambda: heap)
    buffers.capacity, buffers.return_rows = 8, 4                 # resize() starts afresh
    error = expect_shmem_error("OUT_OF_MEMORY", buffers.resize, 4096, 2048)
    needed = buffers.heap_bytes(4096, 2048)
    assert str(error).endswith(
        "the symmetric heap is too small for the MegaMoE buffers: "
        f"needed_bytes={needed}, largest_free_block=1000, heap_size={1 << 20}, "
        f"receive_rows=4096, return_rows=2048, "
        f"set_HYPER_PARALLEL_SHMEM_HEAP_SIZE_to_at_least={(1 << 20) - 1000 + needed}"), error
    assert (buffers.capacity, buffers.return_rows) == (0, 0)
    assert all(d.recv is None and d.returned is None for d in buffers._directions.values())


# ---- protocol ---------------------------------------------------------------------------------


def _protocol_with_arrivals(arrived: list) -> tuple:
    protocol = Protocol(pes=2, rank=0, num_experts=2 * len(arrived), chunk_rows=4)
    d = Direction(0, dispatch_targets=[0] * len(arrived), done_targets=[0] * len(arrived))
    d.arrivals = torch.tensor(arrived, dtype=torch.int64)
    return protocol, d


def test_targets_grow_by_what_each_call_expects():
    protocol, d = _protocol_with_arrivals([0, 0, 0])
    layout = {"expected_chunks": [2, 0, 5]}
    protocol.expect(d, layout)
    protocol.expect(d, layout)
    assert d.dispatch_targets == [4, 0, 10] and d.done_targets == [2, 2, 2]
    assert d.return_target == 2 * protocol.num_experts


def test_an_expert_starts_early_while_a_later_one_is_still_receiving():
    protocol, d = _protocol_with_arrivals([2, 1, 3])
    d.dispatch_targets = [2, 2, 3]
    assert protocol.later_rows_pending(d, 0)       # expert 1 has 1 of 2 chunks
    assert not protocol.later_rows_pending(d, 1)   # expert 2 is complete
    assert not protocol.later_rows_pending(d, 2)   # the last expert: none later


# ---- pipeline ---------------------------------------------------------------------------------


class _LoggedProtocol:
    """A protocol of two local experts that logs each step instead of moving rows."""

    local_experts = 2

    def __init__(self, log: list) -> None:
        self.log = log
        self.directions = _directions()
        for d in self.directions.values():
            d.recv = d.returned = torch.arange(8.0).reshape(4, 2)  # as if combined in place

    def __getattr__(self, step):
        def logged(d, *args):
            self.log.append((step,) + tuple(a for a in args if isinstance(a, int)))
            return step == "later_rows_pending"
        return logged


class _Fits:
    def __init__(self) -> None:
        self.used = []

    def grown_sizes(self, layout):
        return None

    def use(self, direction_name, dtype):
        self.used.append((direction_name, dtype))


def test_the_pipeline_runs_each_expert_as_its_rows_land_and_reports_as_it_goes():
    log, clock = [], _Clock()
    recorder = StatsRecorder(clock)
    buffers = _Fits()
    pipeline = Pipeline(_LoggedProtocol(log), buffers, None, recorder)
    layout = {"expert_row": [0, 1], "expert_rows": [1, 3], "send_rows": 3}

    def compute(local, received):
        log.append(("compute", local, received.shape[0]))
        clock.now += 1.0
        return received * 10 if local else None

    rows = torch.zeros(3, 2, dtype=torch.bfloat16)
    pending = pipeline.begin("forward", rows, torch.zeros(2, 4), layout, compute)
    assert buffers.used == [("forward", torch.bfloat16)]  # the buffers viewed in the rows' dtype
    assert log == [("expect",), ("wait_free",), ("dispatch",),
                   ("wait_rows", 0), ("later_rows_pending", 0), ("compute", 0, 1),
                   ("expert_done", 0),
                   ("wait_rows", 1), ("later_rows_pending", 1), ("compute", 1, 3),
                   ("expert_done", 1), ("combine",)]
    assert pipeline.is_pending(pending) and pending.send_rows == 3
    assert recorder.stats.started_early == 2 and recorder.stats.compute_s == 2.0
    out = pipeline.finish(pending)
    assert log[-1] == ("wait_returned",) and not pipeline.is_pending(pending)
    assert torch.equal(out, torch.tensor([[0.0, 1.0], [20.0, 30.0], [40.0, 50.0]]))
    assert recorder.stats.calls == 1 and recorder.stats.experts == 2
