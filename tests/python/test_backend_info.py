"""shmem.backend_info(), my_pe() and n_pes(): what a layer built on shmem may ask, typed, with no
diagnostic text to parse."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from hyper_parallel.core.multicore import shmem

pytestmark = pytest.mark.cann_fake


def _describe(rank, size):
    for ask in (shmem.backend_info, shmem.my_pe, shmem.n_pes):
        with pytest.raises(shmem.ShmemError) as outside:
            ask()
        assert outside.value.error_code == "INVALID_STATE", outside.value
    with shmem.acquire_shmem():
        info = shmem.backend_info()
        state = shmem.debug_state()
        assert isinstance(info, shmem.BackendInfo)
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.name = "other"
        assert shmem.my_pe() == rank == state["root_rank"]
        assert shmem.n_pes() == size == state["root_size"]
        assert info.name == state["backend"]
        assert info.host_addressable_heap is True  # the host backend and the CANN fake
        assert info.timeout_s == float(state["config"]["timeout_sec"])
        # The granule is what the heap reserves for the smallest allocation.
        before = state["heap"]["allocated"]
        t = shmem.empty(1, dtype=torch.uint8)
        assert shmem.debug_state()["heap"]["allocated"] - before == info.granule_bytes == 64
        shmem.free(t)
        pinned = state["wait"]["pinned"]
        assert info.own_core == (not pinned.startswith("none")), (info, pinned)
        if info.name == "host":
            assert info.own_core == (size <= os.cpu_count())
        else:
            assert info.own_core is False
    with pytest.raises(shmem.ShmemError):
        shmem.backend_info()
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_backend_info_describes_the_running_backend(pes, size):
    assert all(pes(size).run(_describe))
