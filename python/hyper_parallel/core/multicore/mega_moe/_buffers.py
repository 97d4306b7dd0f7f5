"""MegaMoE's resident buffers: per direction (forward, backward) a receive buffer [C, H] (C:
capacity in rows) and a return buffer [R, H] (R: the most rows any PE routes in one call), their
sizing, their growth and the heap bytes they take.

Sizing: R = max_tokens * top_k (or the first call's largest), C = P * R when lossless
(capacity_factor=None: every row of every PE could go to one owner), else ceil(R *
capacity_factor). When a call needs more (a PE routes more rows, an owner receives more than
C), every PE sees the same counts, so every PE grows alike (at least 1.25x, never shrinking)
before any row moves: nothing is dropped. A heap too small fails on every PE with the number of
bytes needed (OUT_OF_MEMORY).

Over a team (an expert-parallel group smaller than the WORLD) the buffers are still WORLD
allocations, but only the team's PEs see a call's counts: the first sizing takes the largest
need of every PE of the WORLD (every PE's first call, one WORLD all-gather), and a later call
that needs more raises INVALID_STATE on every PE of its team alike, before any row moves
(growing would need every EP group at a call only one of them makes). max_tokens sizes them at
construction; lossless, they never grow while no PE routes more rows than that.

Row dtype: the buffers are allocated in the resources' dtype, and a call runs in its rows'
dtype, that one or a narrower one (use()): under torch.autocast a float32 layer's experts
compute in bfloat16 and its rows travel as bfloat16, in views of the same allocations (a row
then takes half the bytes; the sizes in rows do not change).
"""

from __future__ import annotations

import math

import torch

from .. import shmem
from ..shmem.errors import assertion, value_error

GROWTH = 1.25
ROW_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


def _rows_view(allocation: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The allocation's rows [rows, hidden] as rows of `dtype` (no wider): a view of its first
    bytes, the same symmetric allocation."""
    if allocation.dtype == dtype:
        return allocation
    rows, hidden = allocation.shape
    flat = allocation.view(-1).view(torch.uint8)[:rows * hidden * dtype.itemsize]
    return flat.view(dtype).view(rows, hidden)


class Buffers:
    """Both directions' receive and return buffers, `capacity` receive rows and `return_rows`
    return rows each (0 and 0 until the first resize()).

    `directions`: direction name -> the _protocol.Direction whose `recv` and `returned` these
    buffers are. `granule`: the heap's allocation granule in bytes (shmem.backend_info()).
    `heap`: a callable that returns the symmetric heap's state now (a dict with
    heap_size and largest_free_block); resize() reads it once the old buffers are freed.
    `agree`: over a team, a callable that returns the elementwise largest of every WORLD PE's
    list of ints (collective over the WORLD); None over the WORLD (every PE sees the counts)."""

    def __init__(self, directions: dict, hidden_size: int, dtype: torch.dtype, pes: int,
                 capacity_factor: float | None, granule: int, heap, *, agree=None) -> None:
        self._directions = directions
        self.hidden_size, self.dtype, self.pes = hidden_size, dtype, pes
        self.capacity_factor = capacity_factor
        self._granule = granule
        self._heap = heap
        self._agree = agree
        self.capacity = 0      # receive rows
        self.return_rows = 0   # return rows
        self._allocations = {}  # direction name -> (recv, returned), in self.dtype

    def holds(self, dtype: torch.dtype) -> bool:
        """Whether a call may run in rows of `dtype`: float64, float32, bfloat16 or float16,
        no wider than the buffers' own."""
        return dtype in ROW_DTYPES and dtype.itemsize <= self.dtype.itemsize

    def use(self, direction_name: str, dtype: torch.dtype) -> None:
        """Makes the direction's `recv` and `returned` the views of its allocations in rows of
        `dtype` (holds(dtype)): the same rows, in the first bytes of each allocation."""
        if not self.holds(dtype):
            raise value_error("mega_moe", "dtype", f"float64, float32, bfloat16 or float16, no "
                                          f"wider than the buffers' {self.dtype}", dtype)
        direction = self._directions[direction_name]
        recv, returned = self._allocations[direction_name]
        direction.recv, direction.returned = _rows_view(recv, dtype), _rows_view(returned, dtype)

    def capacity_for(self, return_rows: int) -> int:
        """The receive rows for `return_rows` return rows."""
        if self.capacity_factor is None:
            return self.pes * return_rows  # lossless: every row of every PE to one owner
        return max(1, math.ceil(return_rows * self.capacity_factor))

    def heap_bytes(self, capacity: int, return_rows: int) -> int:
        """Symmetric heap bytes the receive and return buffers of both directions take for
        `capacity` receive rows and `return_rows` return rows (whole granules, as the heap
        reserves them)."""
        element = torch.empty(0, dtype=self.dtype).element_size()
        granule = self._granule

        def granules(nbytes: int) -> int:
            return max(granule, -(-nbytes // granule) * granule)

        return 2 * (granules(capacity * self.hidden_size * element)
                    + granules(return_rows * self.hidden_size * element))

    @property
    def held_bytes(self) -> int:
        """Symmetric heap bytes the buffers take now (0 before the first resize())."""
        return self.heap_bytes(self.capacity, self.return_rows) if self.capacity else 0

    def grown_sizes(self, layout: dict) -> tuple | None:
        """(capacity, return_rows) this call needs the buffers grown to (at least 1.25x, never
        shrinking), or None when they fit: the same answer on every PE."""
        send, recv = max(1, layout["max_send_rows"]), max(1, layout["max_recv_rows"])
        if send <= self.return_rows and recv <= self.capacity:
            return None
        return_rows = self.return_rows
        if send > return_rows:
            return_rows = max(send, math.ceil(return_rows * GROWTH))
        capacity = max(self.capacity, self.capacity_for(return_rows))
        if recv > capacity:
            capacity = max(recv, math.ceil(capacity * GROWTH))
        return capacity, return_rows

    def agreed_sizes(self, grown: tuple) -> tuple:
        """The sizes to grow to, given grown_sizes()'s answer on this PE: that answer over the
        WORLD; over a team, at the first sizing the largest of every WORLD PE's (collective
        over the WORLD), and later INVALID_STATE (every PE of the team alike)."""
        if self._agree is None:
            return grown
        if self.capacity == 0:  # every PE's first call: one WORLD all-gather
            return tuple(self._agree(list(grown)))
        raise shmem.ShmemError.make(
            "INVALID_STATE", "mega_moe", "validate",
            assertion("a MegaMoE call over a team needs larger buffers, which grow only with "
                      "every PE of the WORLD: size them with MegaMoEResources(max_tokens=...), "
                      "or use capacity_factor=None",
                      receive_rows=grown[0], capacity=self.capacity, return_rows_needed=grown[1],
                      return_rows=self.return_rows))

    def resize(self, capacity: int, return_rows: int) -> None:
        """Collective: replaces both directions' buffers with ones of the given sizes."""
        self.free()
        self.capacity = self.return_rows = 0
        heap = self._heap()
        needed = self.heap_bytes(capacity, return_rows)
        if needed > heap["largest_free_block"]:
            total = heap["heap_size"] - heap["largest_free_block"] + needed
            raise shmem.ShmemError.make(
                "OUT_OF_MEMORY", "mega_moe", "allocate",
                assertion("the symmetric heap is too small for the MegaMoE buffers",
                          needed_bytes=needed, largest_free_block=heap["largest_free_block"],
                          heap_size=heap["heap_size"], receive_rows=capacity,
                          return_rows=return_rows,
                          set_HYPER_PARALLEL_SHMEM_HEAP_SIZE_to_at_least=total))
        for name, direction in self._directions.items():
            direction.recv = shmem.empty(capacity, self.hidden_size, dtype=self.dtype)
            direction.returned = shmem.empty(return_rows, self.hidden_size, dtype=self.dtype)
            self._allocations[name] = (direction.recv, direction.returned)
        self.capacity, self.return_rows = capacity, return_rows

    def free(self) -> None:
        """Collective: frees what exists of the buffers, in a fixed order (backward's, then
        forward's; each direction's return buffer, then its receive buffer)."""
        for name in ("backward", "forward"):
            direction = self._directions[name]
            recv, returned = self._allocations.pop(name, (direction.recv, direction.returned))
            direction.recv = direction.returned = None
            for tensor in (returned, recv):
                if tensor is not None:
                    shmem.free(tensor)
