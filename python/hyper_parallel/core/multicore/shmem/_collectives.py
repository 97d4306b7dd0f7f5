"""broadcast, all_reduce, reduce_scatter and all_gather_v (docs/api.md; how the reductions run:
docs/architecture.md, "Reductions").

Each passes its arguments to the native module, which checks them in C++ (dtype, operator,
sizes, root, overlap: INVALID_ARGUMENT on the calling PE before anything is exchanged); PEs
whose calls differ (size, dtype, operator, root) all raise COLLECTIVE_MISMATCH before any byte
moves. Under torch.compile each calls its custom op (torch.ops.hps.<op>.default) with the order
token first (docs/compile.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import _ops
from ._runtime import native

if TYPE_CHECKING:
    from ._teams import Team

_hps = torch.ops.hps


def broadcast(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
              root: int, team: Team | None = None) -> None:
    """Collective: root's input lands in every PE's output, root's own included.

    output is symmetric and contiguous; input is any contiguous tensor of the same dtype and
    numel, or output itself (in place, as torch.distributed.broadcast). Every PE passes one;
    only root's is read. root is a PE of the team (team PE numbering with a team). When it has
    completed on the stream, every output holds root's input.
    """
    native.collective("broadcast", output, input, team, root=root)


def all_reduce(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
               op: str = "sum", team: Team | None = None) -> None:
    """Collective: every PE's output becomes the element-wise reduction of every PE's input.

    op: "sum", "prod", "min", "max" (every dtype below), "and", "or", "xor" (integers only).
    dtypes: float16, bfloat16, float32, float64, int8, uint8, int16, uint16, int32, uint32,
    int64, uint64. output is symmetric and contiguous; input has its dtype and numel and is
    output itself (in place) or does not overlap it. Every PE gets the bitwise same result, and
    the same inputs give the same result run after run: each element is reduced once, in an
    order fixed by the team's size; half-precision values accumulate in float32 and round once.
    """
    native.collective("all_reduce", output, input, team, op=op)


def reduce_scatter(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
                   op: str = "sum", team: Team | None = None) -> None:
    """Collective: PE j's output becomes the reduction of block j of every PE's input.

    The contract of torch.distributed.reduce_scatter_tensor: input.numel() == output.numel() *
    team size, cut into team-size equal blocks; output is symmetric and does not overlap
    input. Operators, dtypes and the fixed reduction order as in all_reduce.
    """
    native.collective("reduce_scatter", output, input, team, op=op)


def all_gather_v(output: torch.Tensor, input: torch.Tensor,  # noqa: A002 (torch's name)
                 team: Team | None = None) -> list:
    """Collective: every PE's rows (dim 0) land packed, in PE order, in every PE's output;
    returns every PE's row count (OpenSHMEM's collect).

    input has output's dtype and shape past dim 0, any number of rows (zero too), and does not
    overlap output (symmetric). Every PE's output must hold all rows together: if one does not,
    every PE raises INVALID_ARGUMENT naming it and the size needed, and nothing is written. On
    the default stream only (the counts are known when it has run). Under torch.compile the
    counts come back as an int64 tensor of team size.
    """
    return native.all_gather_v(output, input, team)


_substitute = torch._dynamo.substitute_in_graph


@_substitute(broadcast)
def _broadcast_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                        root: int, team: Team | None = None) -> None:
    _hps.broadcast.default(_ops.order_token(), output, input, root, _ops.team_code(team))


@_substitute(all_reduce)
def _all_reduce_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                         op: str = "sum", team: Team | None = None) -> None:
    _hps.all_reduce.default(_ops.order_token(), output, input, op, _ops.team_code(team))


@_substitute(reduce_scatter)
def _reduce_scatter_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                             op: str = "sum", team: Team | None = None) -> None:
    _hps.reduce_scatter.default(_ops.order_token(), output, input, op, _ops.team_code(team))


@_substitute(all_gather_v)
def _all_gather_v_compiled(output: torch.Tensor, input: torch.Tensor,  # noqa: A002
                           team: Team | None = None):
    return _hps.all_gather_v.default(_ops.order_token(), output, input, _ops.team_code(team))


@torch.library.register_fake("hps::all_gather_v")
def _all_gather_v_fake(order, output, input, team=()):  # noqa: A002
    return output.new_empty((torch.library.get_ctx().new_dynamic_size(),), dtype=torch.int64)
