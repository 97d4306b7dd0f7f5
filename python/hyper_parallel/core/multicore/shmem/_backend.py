"""What a layer built on shmem may ask about the running backend and this PE, so that it needs
neither shmem's private modules nor debug_state()'s texts, nor restates what the native
runtime decides (the allocation granule, the timeout in force).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._runtime import native


@dataclass(frozen=True)
class BackendInfo:
    """The running backend, as backend_info() describes it.

    name: "host", "cuda" or "cann".
    own_core: this PE's thread was pinned to cores of its own (the host backend's automatic
        wait setting, where the PEs fit the machine's cores); False where PEs share their
        cores, or where a device backend runs the queued work.
    host_addressable_heap: the heap is memory this process reads and writes from the CPU
        (the host backend; CANN's and CUDA's fakes); False for device memory.
    granule_bytes: every symmetric allocation reserves a multiple of this many bytes.
    timeout_s: the bound on every wait (HYPER_PARALLEL_SHMEM_TIMEOUT_SEC; 120 unless set).
    """

    name: str
    own_core: bool
    host_addressable_heap: bool
    granule_bytes: int
    timeout_s: float


def backend_info() -> BackendInfo:
    """The running backend's description. Not collective; raises ShmemError INVALID_STATE
    outside a lifecycle (before the first acquire_shmem() or after the last close)."""
    return BackendInfo(**native.backend_description("backend_info"))


def _ready_snapshot(operation: str) -> dict:
    """The native snapshot of a ready Runtime; outside a lifecycle, the description's
    INVALID_STATE is raised instead, naming `operation` (the caller's name)."""
    snapshot = native.snapshot()
    if snapshot["state"] != "ready":
        native.backend_description(operation)  # raises INVALID_STATE naming the state
    return snapshot


def my_pe() -> int:
    """This PE's number in the root group (0 .. n_pes() - 1), as `pe=` arguments read it.
    Raises ShmemError INVALID_STATE outside a lifecycle."""
    return int(_ready_snapshot("my_pe")["root_rank"])


def n_pes() -> int:
    """The number of PEs in the root group. Raises ShmemError INVALID_STATE outside a
    lifecycle."""
    return int(_ready_snapshot("n_pes")["root_size"])
