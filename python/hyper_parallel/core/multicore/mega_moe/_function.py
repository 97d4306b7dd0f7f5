"""The expert-parallel part of MegaMoE as one autograd function.

Forward: this PE's expert-sorted rows go to their experts' owners (one native dispatch); each
owner runs its local experts' SwiGLU as soon as each expert's rows have landed, and each
expert's results go back as soon as it is done (one native combine); the rows come back in
the order they left. Backward runs the same path the other way: the gradients of the results
go to the owners with the forward's layout, each owner computes the gradients of its local
experts' weights (which stay at the owner: no all-reduce) and of the rows it received from
the graph the forward kept per expert (nothing is computed twice), and those go back.
Everything between the two native calls is torch on the owner.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def swiglu(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
           down: torch.Tensor) -> torch.Tensor:
    """(silu(x gate^T) * (x up^T)) down^T, weights in torch.nn.Linear orientation."""
    return (F.silu(x @ gate.t()) * (x @ up.t())) @ down.t()


class ExpertParallel(torch.autograd.Function):
    """rows [N, H] (this PE's routed rows sorted by expert) -> the experts' outputs [N, H].

    apply(rows, gate [L, I, H], up [L, I, H], down [L, H, I], resources, counts [P, E],
    layout): gate/up/down are this PE's local experts' weights."""

    @staticmethod
    def forward(ctx, rows, gate, up, down, resources, counts, layout):
        # Each local expert's computation keeps its own small autograd graph (on leaves that
        # share the weights' storage, and a copy of its rows: the receive buffer is reused by
        # the next call), so the backward differentiates it without computing it again.
        graphs = [None] * gate.shape[0]
        if not any(ctx.needs_input_grad[:4]):  # no backward will come (inference, no_grad)
            return resources.run("forward", rows.contiguous(), counts, layout,
                                 lambda local, x: swiglu(x, gate[local], up[local], down[local]))

        def compute(local, x):
            with torch.enable_grad():
                leaves = (x.detach().clone().requires_grad_(True),
                          gate[local].detach().requires_grad_(True),
                          up[local].detach().requires_grad_(True),
                          down[local].detach().requires_grad_(True))
                y = swiglu(*leaves)
            graphs[local] = (y, leaves)
            return y.detach()

        out = resources.run("forward", rows.contiguous(), counts, layout, compute)
        ctx.resources, ctx.counts, ctx.layout, ctx.graphs = resources, counts, layout, graphs
        ctx.shapes = (gate.shape, up.shape, down.shape, gate.dtype)
        return out

    @staticmethod
    def backward(ctx, grad_rows):
        gate_shape, up_shape, down_shape, dtype = ctx.shapes
        d_gate = torch.zeros(gate_shape, dtype=dtype)
        d_up = torch.zeros(up_shape, dtype=dtype)
        d_down = torch.zeros(down_shape, dtype=dtype)
        graphs = ctx.graphs

        def compute(local, dy):
            y, leaves = graphs[local]
            dx, dg, du, dd = torch.autograd.grad(y, leaves, dy)
            d_gate[local], d_up[local], d_down[local] = dg, du, dd
            graphs[local] = None  # free the expert's activations as soon as it is done
            return dx

        grad_in = ctx.resources.run("backward", grad_rows.to(dtype).contiguous(), ctx.counts,
                                    ctx.layout, compute)
        ctx.graphs = None
        return grad_in, d_gate, d_up, d_down, None, None, None
