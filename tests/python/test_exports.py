"""The protection chain beyond torch views: exports refused, freed memory quarantined and
poisoned, and the heap's addresses kept reserved after shutdown."""

from __future__ import annotations

import ctypes
import math
import os

import numpy as np
import pytest
import torch
import torch.utils.dlpack

from helpers import expect_shmem_error
from hyper_parallel.core.multicore import shmem

EXPORTS = {
    "numpy": lambda t: t.numpy(),
    "numpy_force": lambda t: t.numpy(force=True),
    "np.asarray": np.asarray,
    "np.array": np.array,
    "__array__": lambda t: t.__array__(),
    "__dlpack__": lambda t: t.__dlpack__(),
    "to_dlpack": torch.utils.dlpack.to_dlpack,
    "torch.to_dlpack": torch.to_dlpack,
    "from_dlpack": torch.from_dlpack,
}


def _exports_are_refused(rank, size):
    with shmem.acquire_shmem():
        t = shmem.empty(4, 6, dtype=torch.float32)
        t.fill_(1.0)
        views = {"tensor": t, "row": t[1], "slice": t[:, 2:], "view": t.view(24),
                 "transpose": t.t(), "reshape": t.reshape(2, 12)}
        for view_name, view in views.items():
            for export_name, export in EXPORTS.items():
                error = expect_shmem_error("INVALID_ARGUMENT", export, view)
                assert "call .clone() first" in str(error), (view_name, export_name, str(error))
        # A clone is ordinary memory: every export works on it.
        copy = t.clone()
        assert copy.numpy().sum() == 24 and np.asarray(copy).shape == (4, 6)
        assert torch.from_dlpack(torch.utils.dlpack.to_dlpack(copy)).sum() == 24
        # A DLPack export that copies aliases nothing, so it is allowed.
        assert torch.from_dlpack(t.__dlpack__(copy=True)).sum() == 24
        # Tensors are not buffers: the buffer protocol offers no way in.
        with pytest.raises(TypeError):
            memoryview(t)
        # Re-sharing the storage is a torch alias: invalidated at free like a view.
        alias = torch.empty(0).set_(t.untyped_storage(), 0, (24,))
        assert alias.sum() == 24
        shmem.free(t)
        for stale in (alias, t, views["row"]):
            with pytest.raises(RuntimeError, match="USE_AFTER_FREE.*tensor was freed by shmem.free"):
                stale.sum()
        # Ordinary tensors are untouched by the guard.
        plain = torch.ones(3)
        assert plain.numpy().tolist() == [1.0, 1.0, 1.0] and np.asarray(plain).sum() == 3
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_exports_of_symmetric_tensors_are_refused(pes, size):
    assert all(pes(size).run(_exports_are_refused))


def _read_floats(address, count):
    return list((ctypes.c_float * count).from_address(address))


def _quarantine_and_poison(rank, size):
    with shmem.acquire_shmem():
        budget = shmem.debug_state()["config"]["quarantine_bytes"]
        assert budget == 268435456 // 8, budget  # an eighth of the default heap
        t = shmem.empty(4, dtype=torch.float32)
        t.fill_(1.0)
        i = shmem.empty(4, dtype=torch.int32)
        i.fill_(5)
        raw, raw_int = t.data_ptr(), i.data_ptr()  # a raw alias no guard can see
        shmem.free(t)
        shmem.free(i)
        heap = shmem.debug_state()["heap"]
        assert heap["quarantined"] == 128 and heap["quarantined_blocks"] == 2, heap
        # The stale alias reads the poison: NaN for floats, -1 for signed integers.
        assert all(math.isnan(value) for value in _read_floats(raw, 4))
        assert list((ctypes.c_int32 * 4).from_address(raw_int)) == [-1] * 4
        # The next allocation does not get the block just freed, and writing it leaves the
        # stale alias alone.
        u = shmem.empty(4, dtype=torch.float32)
        u.fill_(7.0)
        assert u.data_ptr() not in (raw, raw_int)
        assert all(math.isnan(value) for value in _read_floats(raw, 4))
        shmem.free(u)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_freed_memory_is_quarantined_and_poisoned(pes, size):
    assert all(pes(size).run(_quarantine_and_poison))


def _quarantine_off(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_QUARANTINE_BYTES"] = "0"
    with shmem.acquire_shmem():
        assert shmem.debug_state()["config"]["quarantine_bytes"] == 0
        t = shmem.empty(4)
        raw = t.data_ptr()
        shmem.free(t)
        assert shmem.debug_state()["heap"]["quarantined"] == 0
        u = shmem.empty(4)
        reused = u.data_ptr() == raw  # best fit takes the block back at once
        shmem.free(u)
    return reused


def test_the_quarantine_can_be_turned_off(pes):
    assert all(pes(2).run(_quarantine_off))


def _alias_after_shutdown(rank, size):
    handle = shmem.acquire_shmem()
    t = shmem.empty(1024, dtype=torch.float32)
    t.fill_(3.0)
    raw = t.data_ptr()
    shmem.free(t)
    handle.close()
    # The heap is unmapped, but its addresses stay reserved as zero pages: a stale alias reads
    # zeros (and may write) instead of taking the process down.
    values = _read_floats(raw, 1024)
    assert values == [0.0] * 1024, values[:4]
    (ctypes.c_float * 4).from_address(raw)[0] = 1.5
    assert _read_floats(raw, 1)[0] == 1.5
    # A new lifecycle maps its heap elsewhere and works normally.
    with shmem.acquire_shmem():
        again = shmem.empty(4)
        again.fill_(2.0)
        assert again.data_ptr() != raw and again.sum() == 8
        shmem.free(again)
    return True


@pytest.mark.host_only("the host backend keeps the closed heap's addresses reserved")
@pytest.mark.parametrize("size", [1, 2])
def test_a_stale_alias_after_shutdown_does_not_crash(pes, size):
    assert all(pes(size).run(_alias_after_shutdown))
