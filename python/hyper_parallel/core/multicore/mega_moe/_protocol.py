"""MegaMoE's counter protocol: the per-step count exchange, the layout every PE derives from it,
and the monotonic counters that order one call's dispatch, experts and combine, and the next
call's dispatch after them.

Symmetric memory of the protocol, allocated once:
  - the count matrix [P, E + 1] the per-step count exchange (shmem.all_gather) fills: each
    PE's counts per expert, then the code of the dtype its rows travel in (every PE checks
    that they agree before any row moves);
  - counters, one 64-byte line each: per direction, a dispatch counter and a "done" counter
    per local expert, one return counter and one "free" counter. They are monotonic (targets
    grow, nothing is reset), so no step zeroes anything a peer may be writing.

One call of a direction: its targets grow by what the layout expects (expect); the dispatch
adds to each owner's dispatch counters as rows land (dispatch); a local expert computes once
its dispatch counter reaches its target (wait_rows) and then raises its "done" counter
(expert_done); the combine sends each expert's results back once it is done, adding to the
sender's return counter, which finish() waits for (combine, wait_returned).

The experts write their results over the rows they received, and the combine sends them from
the receive buffer. So that no PE's next dispatch lands in a receive buffer whose combine is
still sending, every owner adds 1 to every PE's "free" counter of the direction once its
combine is done, and a dispatch first waits until every owner's previous combine has (in
practice already true: the wait costs one read) (wait_free).

Every native MegaMoE kernel (layout, dispatch, combine) is called from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import shmem
from ._native import native

COUNTER_ELEMENTS = 8  # int64 per counter: one 64-byte line


@dataclass
class Direction:
    """The buffers and counters of one direction (forward or backward). The buffers are
    _buffers.Buffers's to allocate, grow and free; the counters and targets are the
    protocol's."""

    first_counter: int  # row of its first counter in the counters tensor
    recv: torch.Tensor | None = None
    # Views of its counters, made once: [L, 8] dispatch and done counters, [1, 8] return
    # counter, each counter's first word, and the dispatch counters' first words as [L].
    dispatch_counters: torch.Tensor | None = None
    done_counters: torch.Tensor | None = None
    return_counter: torch.Tensor | None = None
    dispatch_words: list = field(default_factory=list)
    done_words: list = field(default_factory=list)
    return_word: torch.Tensor | None = None
    free_word: torch.Tensor | None = None
    arrivals: torch.Tensor | None = None
    returned: torch.Tensor | None = None
    dispatch_targets: list = field(default_factory=list)
    done_targets: list = field(default_factory=list)
    return_target: int = 0
    free_target: int = 0


class Protocol:
    """The count matrix, the counters of both directions and the operations on them, for `pes`
    PEs (this one `rank`) and `num_experts` experts in blocks of num_experts / pes per PE.
    allocate() makes the symmetric memory (collective), free() frees it.

    `team`: the shmem Team the PEs are (None: the WORLD). PE numbers are the team's; the count
    exchange, the barriers, the signals and the kernels run over it. The symmetric memory is
    allocated and freed over the WORLD (the heap is the WORLD's)."""

    def __init__(self, pes: int, rank: int, num_experts: int, chunk_rows: int, *,
                 team=None) -> None:
        self.pes, self.rank = pes, rank
        self.num_experts, self.chunk_rows = num_experts, chunk_rows
        self.local_experts = num_experts // pes
        self.team = team
        # The keyword of the shmem calls that take a team: none over the WORLD (as before teams).
        self._over = {} if team is None else {"team": team}
        self.counts = self.counters = None
        self.directions = {}

    def barrier(self) -> None:
        """Collective over the team: every PE's puts and signals so far are visible."""
        shmem.barrier(**self._over)

    def allocate(self) -> None:
        """Collective: the count matrix, then the counters (over the WORLD), zeroed on every PE
        before a barrier (the team's: only its PEs add to them), and each direction's views of
        them."""
        self.counts = shmem.empty(self.pes * (self.num_experts + 1), dtype=torch.int64)
        L = self.local_experts
        per_direction = 2 * L + 2
        self.counters = shmem.empty(2 * per_direction, COUNTER_ELEMENTS, dtype=torch.int64)
        self.counters.zero_()
        self.barrier()  # zeroed on every PE before any peer adds to them
        self.directions = {"forward": Direction(0), "backward": Direction(per_direction)}
        for direction in self.directions.values():
            direction.dispatch_targets = [0] * L
            direction.done_targets = [0] * L
            first = direction.first_counter
            direction.dispatch_counters = self.counters[first:first + L]
            direction.done_counters = self.counters[first + L:first + 2 * L]
            direction.return_counter = self.counters[first + 2 * L:first + 2 * L + 1]
            direction.dispatch_words = [self.counters[first + i, 0:1] for i in range(L)]
            direction.done_words = [self.counters[first + L + i, 0:1] for i in range(L)]
            direction.return_word = self.counters[first + 2 * L, 0:1]
            direction.free_word = self.counters[first + 2 * L + 1, 0:1]
            direction.arrivals = self.counters[first:first + L, 0]

    @property
    def held_bytes(self) -> int:
        """Symmetric heap bytes of the count matrix and the counters."""
        return self.counts.numel() * 8 + self.counters.numel() * 8

    def free(self) -> None:
        """Collective: frees the counters, then the count matrix (what exists of them)."""
        for name in ("counters", "counts"):
            if getattr(self, name) is not None:
                shmem.free(getattr(self, name))
                setattr(self, name, None)

    # ---- the count exchange and the layout --------------------------------------------------

    def exchange_counts(self, counts_local: torch.Tensor, dtype_code: int) -> tuple:
        """Collective over the team: (every PE's counts per expert, as a [P, E] int64 CPU
        tensor, rows in team-PE order; every PE's `dtype_code`, a list in team-PE order)."""
        counts_local = counts_local.reshape(-1).to(torch.int64)
        mine = torch.cat([counts_local, counts_local.new_tensor([dtype_code])])
        shmem.all_gather(self.counts, mine, **self._over)
        table = self.counts.view(self.pes, self.num_experts + 1).to("cpu", copy=True)
        return table[:, :self.num_experts].contiguous(), table[:, self.num_experts].tolist()

    def layout(self, counts: torch.Tensor) -> dict:
        """The layout of a call (the same on every PE, from the same counts): each PE's send
        rows, each local expert's rows and where they land, the chunks each expects."""
        return native.moe_layout(counts.reshape(-1), self.num_experts, self.chunk_rows,
                                 team=self.team)

    # ---- one call ---------------------------------------------------------------------------

    def expect(self, d: Direction, layout: dict) -> None:
        """The targets of a call of `layout` in direction `d`: what each counter reaches once
        the call's rows have landed, its experts are done and its results are back."""
        for local in range(self.local_experts):
            d.dispatch_targets[local] += layout["expected_chunks"][local]
            d.done_targets[local] += 1
        d.return_target += self.num_experts

    def wait_free(self, d: Direction) -> None:
        """Waits until every owner's previous combine of `d` is out of its receive buffer, and
        expects this call's."""
        if d.free_target:  # every owner's previous combine out of its receive buffer is done
            shmem.wait_signal(d.free_word, d.free_target, comparison="ge")
        d.free_target += self.pes

    def dispatch(self, d: Direction, rows: torch.Tensor, flat_counts: torch.Tensor) -> None:
        """Sends this PE's expert-sorted rows into their owners' receive buffers, raising the
        owners' dispatch counters (on the current stream)."""
        native.moe_dispatch(rows, flat_counts, d.recv, d.dispatch_counters,
                            self.num_experts, self.chunk_rows, team=self.team)

    def combine(self, d: Direction, flat_counts: torch.Tensor) -> None:
        """Sends each local expert's results back once it is done, from the receive buffer,
        where the experts wrote them; then this buffer is free for every PE's next dispatch
        (on the current stream)."""
        native.moe_combine(d.recv, flat_counts, d.returned, d.return_counter,
                           d.done_counters, list(d.done_targets), self.num_experts,
                           self.chunk_rows, team=self.team)
        for pe in range(self.pes):
            shmem.signal(d.free_word, 1, pe, operation="add", **self._over)

    def wait_rows(self, d: Direction, local: int) -> None:
        """Waits until every row of local expert `local` has landed."""
        shmem.wait_signal(d.dispatch_words[local], d.dispatch_targets[local], comparison="ge")

    def later_rows_pending(self, d: Direction, local: int) -> bool:
        """Whether a local expert after `local` is still receiving rows (computation then
        overlaps arrival). Read where the counters are host memory only; on a GPU the waits
        are queued and reading would stall: False there."""
        locals_, targets = self.local_experts, d.dispatch_targets
        if local + 1 < locals_ and d.arrivals.is_cpu:
            arrived = d.arrivals.tolist()
            return any(arrived[j] < targets[j] for j in range(local + 1, locals_))
        return False

    def expert_done(self, d: Direction, local: int) -> None:
        """Local expert `local` has written its results: the combine may send them."""
        shmem.signal(d.done_words[local], 1, self.rank, operation="add", **self._over)

    def wait_returned(self, d: Direction) -> None:
        """Waits until every result of this PE's rows is back in its return buffer."""
        shmem.wait_signal(d.return_word, d.return_target, comparison="ge")
