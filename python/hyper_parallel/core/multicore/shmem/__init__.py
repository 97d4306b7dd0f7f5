"""Hyper-Parallel SHMEM: one-sided communication on a symmetric heap for torch PEs.

    handle = shmem.acquire_shmem()            # first handle initialises (collective)
    t = shmem.empty(world, 1024, dtype=torch.int32)  # collective, symmetric
    shmem.put(t[rank], torch.arange(1024, dtype=torch.int32), pe=(rank + 1) % world)
    shmem.barrier()                           # every PE's puts are visible everywhere
    out = shmem.empty(world * 1024, dtype=torch.int32)
    shmem.all_gather(out, t[rank])            # collective, like all_gather_into_tensor
    shmem.all_to_all(out, torch.arange(world * 1024, dtype=torch.int32))  # block j to PE j
    shmem.free(out); shmem.free(t)            # collective
    handle.close()                            # last handle shuts down (collective)

Teams are subsets of the PEs with collectives of their own (barrier, all_gather and all_to_all
take team=; put, get, signal and put_signal read pe as a team PE number with team=):

    row, column = shmem.team_split_2d(shmem.TEAM_WORLD, 2)  # collective over the parent
    shmem.all_gather(out[: 2 * 1024], t[rank], team=row)   # row PEs' inputs, in team order
    with shmem.team(group) as g:              # a process group's ranks (collective over them)
        shmem.barrier(team=g)                 # leaving the block destroys the team

shmem.my_pe(), shmem.n_pes() and shmem.backend_info() (a BackendInfo) describe this PE and the
running backend. Every error is a ShmemError; a bad argument is also a ValueError
(ShmemValueError) or a TypeError (ShmemTypeError). shmem.errors holds them and the two message
shapes for layers built on shmem.

Importing this package makes the runtime a backend of torch's own symmetric-memory API
(torch.distributed._symmetric_memory): symm_mem.empty(device="cpu"), rendezvous and the
torch.ops.symm_mem operators run on it; symm_mem_shutdown() ends that use (docs/api.md).

Every operation is enqueued on the current stream: the default host stream is the calling
thread; `with shmem.stream(shmem.Stream()):` queues work on an executor thread instead.
"""

from ._api import (
    Event,
    all_gather,
    all_to_all,
    Stream,
    barrier,
    current_stream,
    empty,
    free,
    get,
    put,
    put_signal,
    signal,
    stream,
    synchronize,
    wait_signal,
)
from ._atomics import (
    atomic_add,
    atomic_and,
    atomic_compare_swap,
    atomic_fetch,
    atomic_fetch_add,
    atomic_fetch_and,
    atomic_fetch_inc,
    atomic_fetch_or,
    atomic_fetch_xor,
    atomic_inc,
    atomic_or,
    atomic_set,
    atomic_swap,
    atomic_xor,
    fence,
    get_nbi,
    put_nbi,
    quiet,
    test_signal,
    wait_signal_all,
    wait_signal_any,
    wait_signal_some,
)
from ._collectives import all_gather_v, all_reduce, broadcast, reduce_scatter
from ._backend import BackendInfo, backend_info, my_pe, n_pes
from ._debug import DebugState, debug_state
from ._lifecycle import Handle, acquire_shmem
from ._ops import order_token
from ._teams import TEAM_NODE, TEAM_WORLD, Team, team, team_split_2d, team_split_strided
from .errors import ShmemError, ShmemTypeError, ShmemValueError
from . import _exports, _symm_mem, errors
from ._symm_mem import shutdown as symm_mem_shutdown

_exports.install()
_symm_mem._register()  # torch's symm_mem API: "HPS" for the CPU (docs/api.md)

__all__ = [
    "BackendInfo",
    "DebugState",
    "Event",
    "Handle",
    "ShmemError",
    "ShmemTypeError",
    "ShmemValueError",
    "Stream",
    "TEAM_NODE",
    "TEAM_WORLD",
    "Team",
    "acquire_shmem",
    "all_gather",
    "all_gather_v",
    "all_reduce",
    "all_to_all",
    "atomic_add",
    "atomic_and",
    "atomic_compare_swap",
    "atomic_fetch",
    "atomic_fetch_add",
    "atomic_fetch_and",
    "atomic_fetch_inc",
    "atomic_fetch_or",
    "atomic_fetch_xor",
    "atomic_inc",
    "atomic_or",
    "atomic_set",
    "atomic_swap",
    "atomic_xor",
    "backend_info",
    "barrier",
    "broadcast",
    "current_stream",
    "debug_state",
    "empty",
    "errors",
    "fence",
    "free",
    "get",
    "get_nbi",
    "my_pe",
    "n_pes",
    "order_token",
    "put",
    "put_nbi",
    "put_signal",
    "quiet",
    "reduce_scatter",
    "signal",
    "stream",
    "synchronize",
    "team",
    "team_split_2d",
    "team_split_strided",
    "test_signal",
    "wait_signal",
    "wait_signal_all",
    "wait_signal_any",
    "wait_signal_some",
]
