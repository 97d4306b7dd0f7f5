"""Helpers for PE bodies of the system tests."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time

import pytest
import torch

from hyper_parallel.core.multicore import shmem


# The suite's PEs run on the fake NPU device (pe_pool.py): local tensors go to the NPU too.
ON_NPU = os.environ.get("HPS_TEST_FAKE_NPU") == "1"


def device() -> torch.device:
    """Where this PE's local tensors live: its NPU under HPS_TEST_FAKE_NPU=1, else the CPU."""
    if ON_NPU:
        return torch.device("npu", torch.npu.current_device())
    return torch.device("cpu")


def expect_shmem_error(code: str, fn, *args, **kwargs) -> shmem.ShmemError:
    """Runs fn, which must raise ShmemError with `code`; returns the error."""
    with pytest.raises(shmem.ShmemError) as caught:
        fn(*args, **kwargs)
    error = caught.value
    assert error.error_code == code, str(error)
    assert str(error).startswith(f"[HYPER_PARALLEL_SHMEM_ERROR] error_code={code} "), str(error)
    return error


def state_without_failure() -> dict:
    """debug_state() minus latest_failure, which records every rejection by design, and minus
    the collective sequence number, which a refused collective takes by design (it keeps its
    place: docs/architecture.md, "A refused call keeps its place")."""
    state = dict(shmem.debug_state())
    state.pop("latest_failure")
    state["collectives"] = {key: value for key, value in state["collectives"].items()
                            if key != "sequence"}
    state["teams"] = [{key: value for key, value in team.items() if key != "sequence"}
                      for team in state.get("teams", [])]
    return state


@contextlib.contextmanager
def captured_stderr():
    """Captures what native code writes to fd 2; yields a list filled with the lines on exit."""
    lines: list = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())


def heap_range() -> tuple:
    state = shmem.debug_state()
    return state["heap_base"], state["heap_base"] + state["heap"]["heap_size"]


def eventually(condition, bound_s: float = 20.0) -> bool:
    """Polls condition until it holds or the bound passes (a bound against hangs, not an
    expectation of speed)."""
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def in_background(fn, *args):
    """Runs fn(*args) on a new thread; returns the thread and the list its exception lands in."""
    errors: list = []

    def body():
        try:
            fn(*args)
        except BaseException as error:  # checked by the caller
            errors.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    return thread, errors
