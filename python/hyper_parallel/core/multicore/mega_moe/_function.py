"""The expert-parallel part of MegaMoE as one autograd function.

Forward: this PE's expert-sorted rows go to their experts' owners (one native dispatch); each
owner runs its local experts' SwiGLU as soon as each expert's rows have landed, and each
expert's results go back as soon as it is done (one native combine); the rows come back in
the order they left. Backward runs the same path the other way: the gradients of the results
go to the owners with the forward's layout, each owner computes the gradients of its local
experts' weights (which stay at the owner: no all-reduce) and of the rows it received, and
those go back. Everything between the two native calls is torch on the owner.
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
        received = [None] * gate.shape[0]

        def compute(local, x):
            received[local] = x.clone()  # the receive buffer is reused by the next call
            return swiglu(received[local], gate[local], up[local], down[local])

        out = resources.run("forward", rows.contiguous(), counts, layout, compute)
        ctx.resources, ctx.counts, ctx.layout = resources, counts, layout
        ctx.save_for_backward(gate, up, down, *received)
        return out

    @staticmethod
    def backward(ctx, grad_rows):
        gate, up, down, *received = ctx.saved_tensors
        d_gate, d_up, d_down = torch.zeros_like(gate), torch.zeros_like(up), torch.zeros_like(down)

        def compute(local, dy):
            with torch.enable_grad():
                x = received[local].detach().requires_grad_(True)
                g = gate[local].detach().requires_grad_(True)
                u = up[local].detach().requires_grad_(True)
                d = down[local].detach().requires_grad_(True)
                dx, dg, du, dd = torch.autograd.grad(swiglu(x, g, u, d), (x, g, u, d), dy)
            d_gate[local], d_up[local], d_down[local] = dg, du, dd
            return dx

        grad_in = ctx.resources.run("backward", grad_rows.to(gate.dtype).contiguous(), ctx.counts,
                                    ctx.layout, compute)
        return grad_in, d_gate, d_up, d_down, None, None, None
