"""Handles over the one Runtime of the process: root identity, initialisation, shutdown order.

The first live handle resolves the root identity and initialises the Runtime (bootstrap over
the root process group, heaps). The last handle to close shuts it down: device quiescent, then
a process-group barrier, then the native teardown (all inside the native shutdown). Nothing
here runs from a destructor, a weak-reference callback or atexit.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from . import _ops
from ._runtime import ShmemError, assertion, end_block, native, type_error, value_error

_lock = threading.RLock()
_count = 0
_identity: "RootIdentity | None" = None
_bootstrap: object = None  # kept alive for the lifecycle


@dataclass(frozen=True)
class RootIdentity:
    """What makes two root groups equivalent: the same global ranks, in order, on one device."""

    global_ranks: tuple
    device: str


def reference_count() -> int:
    """Live handles of this process."""
    return _count


class _LocalBootstrap:
    """The one-PE root of a process without torch.distributed."""

    def all_gather(self, data: bytes, timeout_s: float) -> list:
        return [bytes(data)]

    def barrier(self, timeout_s: float) -> None:
        return None


class _GroupBootstrap:
    """All-gather of bytes and a barrier over a torch.distributed process group (gloo on CPU),
    each bounded by the Runtime's timeout: a missing peer raises TimeoutError, never hangs."""

    def __init__(self, group: "dist.ProcessGroup") -> None:
        self._group = group
        self._size = dist.get_world_size(group)

    @staticmethod
    def _wait(work: "dist.Work", timeout_s: float, step: str) -> None:
        deadline = time.monotonic() + timeout_s
        pause = 1e-4
        while not work.is_completed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"process-group {step} did not complete in {timeout_s} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        work.wait()  # re-raises a failure of the collective

    def all_gather(self, data: bytes, timeout_s: float) -> list:
        length = torch.tensor([len(data)], dtype=torch.int64)
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(self._size)]
        self._wait(dist.all_gather(lengths, length, group=self._group, async_op=True),
                   timeout_s, "all_gather")
        longest = max(1, max(int(item.item()) for item in lengths))
        mine = torch.zeros(longest, dtype=torch.uint8)
        if data:
            mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        gathered = [torch.zeros(longest, dtype=torch.uint8) for _ in range(self._size)]
        self._wait(dist.all_gather(gathered, mine, group=self._group, async_op=True),
                   timeout_s, "all_gather")
        return [bytes(chunk[: int(n.item())].numpy()) for chunk, n in zip(gathered, lengths)]

    def barrier(self, timeout_s: float) -> None:
        self.all_gather(b"", timeout_s)


def check_root_ranks(ranks: tuple, world_size: int) -> None:
    """The root group must cover the whole WORLD, in global-rank order."""
    if sorted(ranks) != list(range(world_size)):
        raise value_error("acquire_shmem", "root group",
                          f"the whole WORLD (global ranks 0..{world_size - 1})", list(ranks))
    if list(ranks) != sorted(ranks):
        raise value_error("acquire_shmem", "root group ranks", "in global-rank order",
                          list(ranks))


def _resolve_root(root_group):
    device = "cpu:0"  # the host backend; the Runtime freezes it at init
    if not (dist.is_available() and dist.is_initialized()):
        if root_group is not None:
            raise value_error("acquire_shmem", "root_group",
                              "None when torch.distributed is not initialised",
                              type(root_group).__name__)
        return RootIdentity((0,), device), _LocalBootstrap(), 0, 1
    group = dist.group.WORLD if root_group is None else root_group
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        # new_group() hands this to processes outside the group.
        raise value_error("acquire_shmem", "root group",
                          f"the whole WORLD (global ranks 0..{dist.get_world_size() - 1})",
                          f"a group without this process (global rank {dist.get_rank()})")
    if not isinstance(group, dist.ProcessGroup):
        raise type_error("acquire_shmem", "root_group", "a torch.distributed ProcessGroup or None",
                         type(root_group).__name__)
    ranks = tuple(dist.get_process_group_ranks(group))
    check_root_ranks(ranks, dist.get_world_size())
    return RootIdentity(ranks, device), _GroupBootstrap(group), dist.get_rank(group), len(ranks)


def _lifecycle_ended() -> None:
    _ops.lifecycle_ended()
    from . import _symm_mem  # imports this module

    _symm_mem.lifecycle_ended()


class Handle:
    """A reference to the process's Runtime. It has no communication methods.

    The last open handle's close() is collective: every PE must close its last handle.
    close() is idempotent; use it directly or as a context manager.
    """

    __slots__ = ("_closed", "__weakref__")

    def __init__(self) -> None:
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Releases this handle; the last one shuts the Runtime down.

        If the shutdown is refused (allocations still live, calls still in flight on other
        threads), every PE raises alike and keeps its handle open, so the caller can free and
        close again. If the runtime is terminal (PEER_LOST, or a collective TIMEOUT), close
        releases this process's resources at once, closes the handle and raises that error.
        """
        global _count, _identity, _bootstrap
        with _lock:
            if self._closed:
                return
            if _count == 1:
                from . import _symm_mem  # imports this module

                # symm_mem's own buffers (handles, the operators' workspaces) are released, so
                # the shutdown reclaims them with what every PE released (docs/api.md).
                _symm_mem.before_close()
                try:
                    native.shutdown()
                except ShmemError:
                    if native.state() == "failed":
                        # Terminal (a peer was lost, a collective timed out): the native side
                        # released what it could; the handle is closed, every later call
                        # raises the same error.
                        _count = 0
                        _identity = None
                        _bootstrap = None
                        _lifecycle_ended()
                        self._closed = True
                    raise
                _identity = None
                _bootstrap = None
                _lifecycle_ended()
            _count -= 1
            self._closed = True

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        # A refused shutdown after an exception leaves the handle open.
        end_block(self.close, exc, "closing the shmem handle")

    def __repr__(self) -> str:
        return f"Handle(closed={self._closed})"


def acquire_shmem(root_group=None) -> Handle:
    """Returns a handle to the process's Runtime, initialising it with the first handle.

    root_group: a torch.distributed ProcessGroup covering the whole WORLD in global-rank order,
    or None for WORLD (or a one-PE root when torch.distributed is not initialised). While a
    Runtime is live, another group with the same ranks shares it; a different root is rejected.
    The first acquire is collective.
    """
    global _count, _identity, _bootstrap
    identity, bootstrap, rank, size = _resolve_root(root_group)
    with _lock:
        if _count == 0:
            native.init(bootstrap, rank, size, list(identity.global_ranks))
            _ops.lifecycle_began()
            _identity = identity
            _bootstrap = bootstrap
        elif identity != _identity:
            raise ShmemError.make(
                "INVALID_STATE", "acquire_shmem", "validate",
                assertion("a live runtime already serves another root",
                          live_global_ranks=list(_identity.global_ranks),
                          requested_global_ranks=list(identity.global_ranks)))
        _count += 1
        return Handle()
