"""The bad-input campaign: misuse of every part of the Python API, one case per test.

Each case runs on a pool of 2 PEs. Local misuse is made by PE 0 alone while PE 1 waits; each
gets its documented error (its exact class, error code, message), PE 0's live allocations are unchanged,
PE 0 stays usable and PE 1 is unaffected: after the case both PEs exchange data and check it.
Cases on both PEs (calls from two threads at once, a close while another thread waits) check
that every PE ends in the same documented state. Lifecycle-order and configuration cases run
while no runtime is live.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
import torch

from helpers import eventually, in_background
from hyper_parallel.core.multicore import shmem

MIB = 1 << 20


@dataclass
class Operands:
    """What a case may misuse: live symmetric tensors, freed ones, one of an earlier lifecycle."""

    t: torch.Tensor
    ints: torch.Tensor
    sig64: torch.Tensor
    sig32: torch.Tensor
    out: torch.Tensor
    freed: torch.Tensor
    freed_view: torch.Tensor  # a view made before the free
    freed_sig: torch.Tensor
    stale: torch.Tensor
    size: int


# The class each code is raised as (docs/api.md, "Errors and logs"): a bad argument is also a
# ValueError; every other code a plain ShmemError.
CLASS_OF_CODE = {"INVALID_ARGUMENT": shmem.ShmemValueError,
                 "USE_AFTER_FREE": shmem.ShmemValueError,
                 "DOUBLE_FREE": shmem.ShmemValueError,
                 "STALE_LIFECYCLE": shmem.ShmemValueError}


@dataclass
class Case:
    name: str
    call: object                 # fn(ops) for "local", fn() for "outside"
    error: type | None = None    # the exact class: None for the one `code` is raised as
    code: str = "INVALID_ARGUMENT"  # the ShmemError code
    text: str = ""               # a part of the message
    where: str = "local"         # local: PE 0 inside a lifecycle; outside: PE 0, no lifecycle
    env: dict = field(default_factory=dict)

    @property
    def peer(self):
        """PE 1's correct call of the same collective, for a collective refused on PE 0: the
        refusal keeps its place, so PE 1's call fails naming it (docs/api.md, "Collectives are
        checked before data moves"). None for a call that is not collective."""
        if self.where != "local":
            return None
        for prefix, call in PEER_CALLS.items():
            if self.name.startswith(prefix):
                return call
        return None


# The correct call PE 1 makes while PE 0 makes a collective's misuse: it must fail, naming
# PE 0's refusal, and change nothing.
PEER_CALLS = {
    "empty_": lambda o: shmem.empty(16),
    "free_": lambda o: shmem.free(o.ints),
    "all_gather_": lambda o: shmem.all_gather(o.out, torch.ones(8)),
}


def _view(ops):
    return ops.t.view(4, 4)


CASES = [
    # ---- argument types -------------------------------------------------------------------
    Case("put_dst_not_a_tensor", lambda o: shmem.put(3, torch.ones(16), 1), shmem.ShmemTypeError,
         text="dst must be a torch.Tensor, but got int"),
    Case("put_src_a_list", lambda o: shmem.put(o.t, [1.0] * 16, 1), shmem.ShmemTypeError,
         text="src must be a torch.Tensor, but got list"),
    Case("put_pe_a_float", lambda o: shmem.put(o.t, torch.ones(16), 1.0), shmem.ShmemTypeError,
         text="pe must be an int, but got float 1.0"),
    Case("put_pe_a_bool", lambda o: shmem.put(o.t, torch.ones(16), True), shmem.ShmemTypeError,
         text="pe must be an int, but got bool True"),
    Case("get_pe_a_str", lambda o: shmem.get(torch.ones(16), o.t, "1"), shmem.ShmemTypeError,
         text="pe must be an int"),
    Case("signal_value_a_float", lambda o: shmem.signal(o.sig64, 1.5, 1), shmem.ShmemTypeError,
         text="value must be an int, but got float 1.5"),
    Case("signal_value_a_str", lambda o: shmem.signal(o.sig64, "1", 1), shmem.ShmemTypeError,
         text="value must be an int"),
    Case("signal_sig_not_a_tensor", lambda o: shmem.signal(7, 1, 1), shmem.ShmemTypeError,
         text="sig must be a torch.Tensor, but got int"),
    Case("signal_sig_float_dtype", lambda o: shmem.signal(o.t[:1], 1, 1), shmem.ShmemValueError,
         text="sig dtype must be torch.int32 or torch.int64, but got torch.float32"),
    Case("signal_operation_an_int", lambda o: shmem.signal(o.sig64, 1, 1, operation=1),
         shmem.ShmemTypeError, text="operation must be a str, but got int"),
    Case("wait_value_none", lambda o: shmem.wait_signal(o.sig64, None), shmem.ShmemTypeError,
         text="value must be an int, but got NoneType None"),
    Case("wait_comparison_an_int", lambda o: shmem.wait_signal(o.sig64, 0, comparison=0),
         shmem.ShmemTypeError, text="comparison must be a str, but got int"),
    Case("empty_size_a_str", lambda o: shmem.empty("16"), shmem.ShmemTypeError,
         text="size must be a sequence of ints, but got str '16'"),
    Case("empty_size_a_float", lambda o: shmem.empty(16.0), shmem.ShmemTypeError,
         text="size must be a sequence of ints, but got float 16.0"),
    Case("empty_size_a_bool", lambda o: shmem.empty(True), shmem.ShmemTypeError,
         text="size must be a sequence of ints, but got bool True"),
    Case("empty_dtype_a_str", lambda o: shmem.empty(16, dtype="float32"), shmem.ShmemTypeError,
         text="dtype must be a torch.dtype or None, but got str"),
    Case("empty_alignment_a_float", lambda o: shmem.empty(16, alignment=64.0), shmem.ShmemTypeError,
         text="alignment must be an int, but got float 64.0"),
    Case("empty_alignment_a_bool", lambda o: shmem.empty(16, alignment=True), shmem.ShmemTypeError,
         text="alignment must be an int, but got bool True"),
    Case("free_not_a_tensor", lambda o: shmem.free(None), shmem.ShmemTypeError,
         text="tensor must be a torch.Tensor, but got NoneType"),
    Case("all_gather_output_an_int", lambda o: shmem.all_gather(3, torch.ones(16)),
         shmem.ShmemTypeError,
         text="output must be a torch.Tensor, but got int"),
    Case("stream_not_a_stream", lambda o: shmem.stream("s").__enter__(), shmem.ShmemTypeError,
         text="stream must be a shmem.Stream or None, but got str"),
    Case("event_record_on_an_int", lambda o: shmem.Event().record(3), shmem.ShmemTypeError,
         text="stream must be a shmem.Stream or None, but got int"),
    Case("event_wait_on_a_str", lambda o: shmem.Event().wait("s"), shmem.ShmemTypeError,
         text="stream must be a shmem.Stream or None, but got str"),
    # ---- argument values ------------------------------------------------------------------
    Case("empty_negative_size", lambda o: shmem.empty(4, -1), shmem.ShmemValueError,
         text="size must be non-negative, but got -1"),
    Case("empty_alignment_zero", lambda o: shmem.empty(16, alignment=0), shmem.ShmemValueError,
         text="alignment must be a positive power of two, but got 0"),
    Case("empty_alignment_negative", lambda o: shmem.empty(16, alignment=-64),
         shmem.ShmemValueError,
         text="alignment must be a positive power of two, but got -64"),
    Case("signal_value_above_int64", lambda o: shmem.signal(o.sig64, 1 << 63, 1),
         shmem.ShmemValueError,
         text="value must be representable as int64"),
    Case("wait_value_below_int64", lambda o: shmem.wait_signal(o.sig64, -(1 << 63) - 1),
         shmem.ShmemValueError, text="value must be representable as int64"),
    Case("signal_operation_xor", lambda o: shmem.signal(o.sig64, 1, 1, operation="xor"),
         shmem.ShmemValueError, text="operation must be one of set, add, but got 'xor'"),
    Case("wait_comparison_gte", lambda o: shmem.wait_signal(o.sig64, 0, comparison="gte"),
         shmem.ShmemValueError,
         text="comparison must be one of eq, ne, gt, ge, lt, le, but got 'gte'"),
    Case("signal_two_elements", lambda o: shmem.signal(o.ints[:2], 1, 1), shmem.ShmemValueError,
         text="sig must be a one-element tensor, but got 2 elements"),
    Case("put_signal_operation_or", lambda o: shmem.put_signal(o.t, torch.ones(16), o.sig64, 1,
                                                               1, operation="or"),
         shmem.ShmemValueError, text="operation must be one of set, add"),
    # ---- the protection chain and operand contracts ---------------------------------------
    Case("empty_alignment_three", lambda o: shmem.empty(16, alignment=3), code="INVALID_ARGUMENT",
         text="alignment must be a power of two no greater than 2097152, but got 3"),
    Case("empty_alignment_4mib", lambda o: shmem.empty(16, alignment=4 * MIB),
         code="INVALID_ARGUMENT", text="alignment must be a power of two no greater than"),
    Case("empty_larger_than_the_heap", lambda o: shmem.empty(1 << 40, dtype=torch.uint8),
         code="OUT_OF_MEMORY", text="symmetric heap exhausted: requested_bytes=1099511627776"),
    Case("put_pe_equal_to_size", lambda o: shmem.put(o.t, torch.ones(16), o.size),
         code="INVALID_ARGUMENT", text="pe must be in [0, 2), but got 2"),
    Case("put_pe_negative", lambda o: shmem.put(o.t, torch.ones(16), -1),
         code="INVALID_ARGUMENT", text="pe must be in [0, 2), but got -1"),
    Case("get_pe_far_away", lambda o: shmem.get(torch.ones(16), o.t, 99),
         code="INVALID_ARGUMENT", text="pe must be in [0, 2), but got 99"),
    Case("signal_pe_out_of_range", lambda o: shmem.signal(o.sig64, 1, 2),
         code="INVALID_ARGUMENT", text="pe must be in [0, 2), but got 2"),
    Case("put_signal_pe_out_of_range", lambda o: shmem.put_signal(o.t, torch.ones(16), o.sig64,
                                                                  1, 5),
         code="INVALID_ARGUMENT", text="pe must be in [0, 2), but got 5"),
    Case("put_dst_not_symmetric", lambda o: shmem.put(torch.zeros(16), torch.ones(16), 1),
         code="INVALID_ARGUMENT", text="dst must be a symmetric tensor from shmem.empty"),
    Case("get_src_not_symmetric", lambda o: shmem.get(torch.zeros(16), torch.ones(16), 1),
         code="INVALID_ARGUMENT", text="src must be a symmetric tensor from shmem.empty"),
    Case("signal_sig_not_symmetric", lambda o: shmem.signal(torch.zeros(1, dtype=torch.int64),
                                                            1, 1),
         code="INVALID_ARGUMENT", text="sig must be a symmetric tensor from shmem.empty"),
    Case("wait_sig_not_symmetric", lambda o: shmem.wait_signal(torch.zeros(1, dtype=torch.int32),
                                                               0),
         code="INVALID_ARGUMENT", text="sig must be a symmetric tensor from shmem.empty"),
    Case("put_dtype_differs", lambda o: shmem.put(o.t, torch.ones(16, dtype=torch.float64), 1),
         code="INVALID_ARGUMENT", text="src dtype must be dst's dtype Float, but got Double"),
    Case("put_size_differs", lambda o: shmem.put(o.t, torch.ones(15), 1),
         code="INVALID_ARGUMENT", text="src byte size must be dst's byte size 64, but got 60"),
    Case("put_empty_src_to_full_dst", lambda o: shmem.put(o.t, torch.ones(0), 1),
         code="INVALID_ARGUMENT", text="src byte size must be dst's byte size 64, but got 0"),
    Case("put_dst_not_contiguous", lambda o: shmem.put(_view(o).t(), torch.ones(4, 4), 1),
         code="INVALID_ARGUMENT", text="dst must be contiguous"),
    Case("put_src_not_contiguous", lambda o: shmem.put(o.t, torch.ones(32)[::2], 1),
         code="INVALID_ARGUMENT", text="src must be contiguous"),
    Case("put_dst_on_meta", lambda o: shmem.put(torch.empty(16, device="meta"), torch.ones(16), 1),
         code="INVALID_ARGUMENT", text="dst must be a tensor on the runtime's device (cpu)"),
    Case("put_to_freed", lambda o: shmem.put(o.freed, torch.ones(16), 1), code="USE_AFTER_FREE",
         text="allocation"),
    Case("put_to_view_of_freed", lambda o: shmem.put(o.freed_view, torch.ones(4), 1),
         code="USE_AFTER_FREE"),
    Case("put_from_freed", lambda o: shmem.put(o.t, o.freed, 1), code="USE_AFTER_FREE",
         text="tensor was freed by shmem.free: operand=src"),
    Case("get_from_freed", lambda o: shmem.get(torch.ones(16), o.freed, 1),
         code="USE_AFTER_FREE"),
    Case("signal_freed", lambda o: shmem.signal(o.freed_sig, 1, 1), code="USE_AFTER_FREE"),
    Case("wait_on_freed", lambda o: shmem.wait_signal(o.freed_sig, 0), code="USE_AFTER_FREE"),
    Case("all_gather_into_freed", lambda o: shmem.all_gather(o.freed, torch.ones(8)),
         code="USE_AFTER_FREE"),
    Case("free_a_view", lambda o: shmem.free(_view(o)), code="INVALID_ARGUMENT",
         text="freed tensor must be the tensor shmem.empty returned (not a view, slice or "
              "reshape of it)"),
    Case("free_a_slice", lambda o: shmem.free(o.t[2:]), code="INVALID_ARGUMENT",
         text="not a view, slice or reshape"),
    Case("free_a_reshape", lambda o: shmem.free(o.t.reshape(2, 8)), code="INVALID_ARGUMENT",
         text="not a view, slice or reshape"),
    Case("free_twice", lambda o: shmem.free(o.freed), code="DOUBLE_FREE"),
    Case("free_not_symmetric", lambda o: shmem.free(torch.zeros(4)), code="INVALID_ARGUMENT",
         text="tensor must be a symmetric tensor from shmem.empty"),
    Case("put_stale_lifecycle", lambda o: shmem.put(o.stale, torch.ones(16), 1),
         code="STALE_LIFECYCLE"),
    Case("free_stale_lifecycle", lambda o: shmem.free(o.stale), code="STALE_LIFECYCLE"),
    Case("signal_int32_value_too_big", lambda o: shmem.signal(o.sig32, 1 << 40, 1),
         code="INVALID_ARGUMENT", text="signal value must be representable as int32"),
    Case("all_gather_wrong_numel", lambda o: shmem.all_gather(o.out, torch.ones(7)),
         code="INVALID_ARGUMENT", text="output numel must be input numel * root size (7 * 2)"),
    Case("all_gather_dtype_differs", lambda o: shmem.all_gather(o.out, torch.ones(8).int()),
         code="INVALID_ARGUMENT", text="input dtype must be output's dtype Float, but got Int"),
    Case("all_gather_output_not_symmetric", lambda o: shmem.all_gather(torch.zeros(16),
                                                                       torch.ones(8)),
         code="INVALID_ARGUMENT", text="output must be a symmetric tensor from shmem.empty"),
    Case("all_gather_input_overlaps_output", lambda o: shmem.all_gather(o.out, o.out[4:12]),
         code="INVALID_ARGUMENT", text="all_gather input must be disjoint from the output"),
    Case("all_gather_output_not_contiguous", lambda o: shmem.all_gather(o.out.view(2, 8).t(),
                                                                        torch.ones(8)),
         code="INVALID_ARGUMENT", text="output must be contiguous"),
    # ---- calls out of lifecycle order, and configuration --------------------------------
    Case("empty_before_acquire", lambda: shmem.empty(4), code="INVALID_STATE",
         text="runtime is not initialised", where="outside"),
    Case("barrier_before_acquire", lambda: shmem.barrier(), code="INVALID_STATE",
         text="runtime is not initialised: operation=barrier", where="outside"),
    Case("wait_signal_before_acquire", lambda: shmem.wait_signal(torch.zeros(1, dtype=torch.int64),
                                                                  0),
         code="INVALID_ARGUMENT", text="sig must be a symmetric tensor from shmem.empty",
         where="outside"),
    Case("acquire_with_a_str_group", lambda: shmem.acquire_shmem("world"), shmem.ShmemTypeError,
         text="root_group must be a torch.distributed ProcessGroup or None, but got str",
         where="outside"),
    Case("heap_size_not_a_number", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text='HYPER_PARALLEL_SHMEM_HEAP_SIZE must be a positive decimal integer',
         where="outside", env={"HYPER_PARALLEL_SHMEM_HEAP_SIZE": "12ab"}),
    Case("heap_size_leading_zero", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text='but got "0100"', where="outside", env={"HYPER_PARALLEL_SHMEM_HEAP_SIZE": "0100"}),
    Case("timeout_zero", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text="HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", where="outside",
         env={"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC": "0"}),
    Case("log_level_three", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text="HYPER_PARALLEL_SHMEM_LOG_LEVEL", where="outside",
         env={"HYPER_PARALLEL_SHMEM_LOG_LEVEL": "3"}),
    Case("backend_unknown", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text="HYPER_PARALLEL_SHMEM_BACKEND", where="outside",
         env={"HYPER_PARALLEL_SHMEM_BACKEND": "gpu"}),
    Case("backend_not_built", lambda: shmem.acquire_shmem(), code="UNSUPPORTED_CAPABILITY",
         text="HYPER_PARALLEL_SHMEM_BACKEND must be a backend this build provides",
         where="outside", env={"HYPER_PARALLEL_SHMEM_BACKEND": "cuda"}),
    Case("copy_workers_too_many", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text="HYPER_PARALLEL_SHMEM_COPY_WORKERS", where="outside",
         env={"HYPER_PARALLEL_SHMEM_COPY_WORKERS": "65"}),
    Case("wait_policy_unknown", lambda: shmem.acquire_shmem(), code="INVALID_CONFIG",
         text='HYPER_PARALLEL_SHMEM_WAIT must be one of auto, spin, block, but got "busy"',
         where="outside", env={"HYPER_PARALLEL_SHMEM_WAIT": "busy"}),
]


def _exchange_check(rank, inbox, flag, round_):
    """Both PEs send a row to each other and check what arrived: both are usable."""
    peer = 1 - rank
    shmem.put(inbox, torch.full((16,), float(100 * round_ + rank)), peer)
    shmem.signal(flag, round_, peer)
    shmem.wait_signal(flag, round_)
    assert inbox.tolist() == [float(100 * round_ + peer)] * 16, inbox.tolist()


def _stale_tensor():
    """A tensor of an earlier lifecycle (collective: both PEs call it)."""
    with shmem.acquire_shmem():
        old = shmem.empty(16)
        shmem.free(old)
    return old


def _check_error(case, error):
    """The exact class, the code and the message's shape and text of a case's error."""
    expected = case.error or CLASS_OF_CODE.get(case.code, shmem.ShmemError)
    message = str(error)
    assert type(error) is expected, (type(error), expected, message)
    assert isinstance(error, shmem.ShmemError), message
    assert error.error_code == case.code, message
    assert message.startswith(f"[HYPER_PARALLEL_SHMEM_ERROR] error_code={case.code} "), message
    assert case.text in message, (case.text, message)


def _run_case(rank, size, name):
    case = next(c for c in CASES if c.name == name)
    if case.where == "outside":
        return _run_outside(rank, case)
    stale = _stale_tensor()
    with shmem.acquire_shmem():
        inbox = shmem.empty(16)
        flag = shmem.empty(1, dtype=torch.int64)
        t, ints = shmem.empty(16), shmem.empty(16, dtype=torch.int64)
        sig64, sig32 = shmem.empty(1, dtype=torch.int64), shmem.empty(1, dtype=torch.int32)
        out = shmem.empty(16)
        freed = shmem.empty(16)
        freed_sig = shmem.empty(1, dtype=torch.int64)
        flag.zero_()
        freed_view = freed[4:8]
        shmem.free(freed)
        shmem.free(freed_sig)
        shmem.barrier()
        ops = Operands(t, ints, sig64, sig32, out, freed, freed_view, freed_sig, stale, size)
        before = shmem.debug_state()
        if rank == 0:
            with pytest.raises(shmem.ShmemError) as caught:
                case.call(ops)
            _check_error(case, caught.value)
        elif case.peer is not None:
            with pytest.raises(shmem.ShmemError) as caught:
                case.peer(ops)
            message = str(caught.value)
            assert caught.value.error_code == "COLLECTIVE_MISMATCH", message
            assert f"was refused on PE 0: {case.code or ''}" in message, message
        after = shmem.debug_state()
        assert after["live_allocations"] == before["live_allocations"], "nothing allocated"
        # A collective refused on PE 0 took its number on both PEs (it kept its place).
        taken = 1 if case.peer is not None else 0
        assert after["collectives"]["sequence"] == before["collectives"]["sequence"] + taken
        assert after["state"] == "ready"
        _exchange_check(rank, inbox, flag, 1)  # PE 0 usable, PE 1 unaffected
        shmem.barrier()
        for tensor in (out, sig32, sig64, ints, t, flag, inbox):
            shmem.free(tensor)
    return True


def _run_outside(rank, case):
    if rank == 0:
        saved = {key: os.environ.get(key) for key in case.env}
        os.environ.update(case.env)
        try:
            with pytest.raises(shmem.ShmemError) as caught:
                case.call()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        _check_error(case, caught.value)
        assert shmem.debug_state()["state"] == "uninitialized"
        assert shmem.debug_state()["reference_count"] == 0
    # Both PEs can still start a lifecycle together and exchange data.
    with shmem.acquire_shmem():
        inbox = shmem.empty(16)
        flag = shmem.empty(1, dtype=torch.int64)
        flag.zero_()
        shmem.barrier()
        _exchange_check(rank, inbox, flag, 2)
        shmem.barrier()
        shmem.free(flag)
        shmem.free(inbox)
    return True


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_misuse(pes, name):
    assert all(pes(2).run(_run_case, name))


# ---- cases on both PEs: calls from two threads at once ------------------------------------


def _second_thread_collective(rank, size, second):
    """PE 0's first thread blocks in a collective (PE 1 enters late); a second thread's
    collective meanwhile is refused; then PE 1 enters and the first completes."""
    with shmem.acquire_shmem():
        gate = shmem.empty(1, dtype=torch.int64)
        victim = shmem.empty(8)
        gate.zero_()
        shmem.barrier()
        if rank == 0:
            thread, errors = in_background(shmem.barrier)
            assert eventually(lambda: shmem.debug_state()["blocked"])
            before = shmem.debug_state()
            with pytest.raises(shmem.ShmemError) as caught:
                second(victim)
            assert caught.value.error_code == "INVALID_STATE", str(caught.value)
            assert "a collective of this PE is already in flight" in str(caught.value)
            assert "in_flight_on=default (thread " in str(caught.value)
            after = shmem.debug_state()
            assert after["live_allocations"] == before["live_allocations"]
            assert after["collectives"]["sequence"] == before["collectives"]["sequence"]
            shmem.signal(gate, 1, 1)
            thread.join(60)
            assert errors == [], errors
        else:
            shmem.wait_signal(gate, 1)
            shmem.barrier()
        shmem.barrier()
        shmem.free(victim)
        shmem.free(gate)
    return True


def _close_while_another_thread_waits(rank, size):
    """Every PE refuses the close alike while PE 0 has a call in flight, and stays ready."""
    handle = shmem.acquire_shmem()
    sig = shmem.empty(1, dtype=torch.int64)
    sig.zero_()
    shmem.barrier()
    thread = None
    if rank == 0:
        thread, errors = in_background(shmem.wait_signal, sig, 1)
        assert eventually(lambda: shmem.debug_state()["calls_in_flight"] == 1)
    shmem.barrier()
    live = shmem.debug_state()["live_allocations"]
    with pytest.raises(shmem.ShmemError) as caught:
        handle.close()
    assert caught.value.error_code == "INVALID_STATE", str(caught.value)
    assert "shutdown refused: PEs still had calls in flight" in str(caught.value)
    assert "pes=[0]" in str(caught.value), str(caught.value)
    assert not handle.closed and shmem.debug_state()["state"] == "ready"
    assert shmem.debug_state()["live_allocations"] == live
    if rank == 1:
        shmem.signal(sig, 1, 0)
    else:
        thread.join(60)
        assert errors == [], errors
    shmem.barrier()
    shmem.free(sig)
    handle.close()
    assert handle.closed
    return True


BOTH_PE_CASES = {
    "barrier_from_a_second_thread": lambda r, s: _second_thread_collective(
        r, s, lambda victim: shmem.barrier()),
    "empty_from_a_second_thread": lambda r, s: _second_thread_collective(
        r, s, lambda victim: shmem.empty(4)),
    "free_from_a_second_thread": lambda r, s: _second_thread_collective(
        r, s, lambda victim: shmem.free(victim)),
    "all_gather_from_a_second_thread": lambda r, s: _second_thread_collective(
        r, s, lambda victim: shmem.all_gather(victim, torch.ones(4))),
    "close_while_another_thread_waits": _close_while_another_thread_waits,
}


def _run_both(rank, size, name):
    return BOTH_PE_CASES[name](rank, size)


@pytest.mark.parametrize("name", list(BOTH_PE_CASES))
def test_misuse_from_two_threads(pes, name):
    assert all(pes(2).run(_run_both, name))


def test_the_campaign_has_at_least_sixty_cases():
    assert len(CASES) + len(BOTH_PE_CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)
