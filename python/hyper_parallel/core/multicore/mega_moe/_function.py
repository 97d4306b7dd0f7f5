"""The expert-parallel part of MegaMoE as one autograd function.

Forward: this PE's expert-sorted rows go to their experts' owners (one native dispatch); each
owner runs its local experts' SwiGLU as soon as each expert's rows have landed, writing the
results over those rows in its receive buffer, and each expert's results go back from there as
soon as it is done (one native combine); the rows come back in the order they left. Backward
runs the same path the other way: the gradients of the results go to the owners with the
forward's layout, each owner computes the gradients of its local experts' weights (which stay
at the owner: no all-reduce) and of the rows it received, from what the forward saved per
expert (nothing is computed twice), writing the rows' gradients over the incoming ones, and
those go back. Everything between the two native calls is torch on the owner.

The SwiGLU's backward is written out (the same products autograd would form, in the same
orientation) instead of running autograd's engine once per expert: an engine call per expert
costs more than a small expert's arithmetic. The experts compute in the layer's dtype, with
autocast off (their results are written into the layer's buffers with out=).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F


def swiglu(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
           down: torch.Tensor) -> torch.Tensor:
    """(silu(x gate^T) * (x up^T)) down^T, weights in torch.nn.Linear orientation."""
    return (F.silu(x @ gate.t()) * (x @ up.t())) @ down.t()


def _swiglu_into(rows: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
                 down: torch.Tensor, keep: bool):
    """Writes swiglu(rows, ...) over `rows`; with `keep`, returns what the backward needs
    (a copy of the input and the intermediate products), else None."""
    x = rows.clone() if keep else rows
    g = x @ gate.t()
    u = x @ up.t()
    a = F.silu(g)
    h = a * u
    torch.mm(h, down.t(), out=rows)
    return (x, g, u, a, h) if keep else None


def _swiglu_backward_into(dy: torch.Tensor, saved, gate: torch.Tensor, up: torch.Tensor,
                          down: torch.Tensor):
    """The gradients of swiglu's weights (gate, up, down) from the saved products; writes the
    gradient of its input over `dy`."""
    x, g, u, a, h = saved
    dh = dy.mm(down)
    d_down = h.t().mm(dy).t()
    dg = torch.ops.aten.silu_backward(dh * u, g)
    du = dh * a
    d_gate = x.t().mm(dg).t()
    d_up = x.t().mm(du).t()
    torch.add(dg.mm(gate), du.mm(up), out=dy)
    return d_gate, d_up, d_down


def _no_autocast(device_type: str):
    """Autocast off for the experts (a no-op context where it is off already)."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()


class ExpertParallel(torch.autograd.Function):
    """rows [N, H] (this PE's routed rows sorted by expert) -> the experts' outputs [N, H].

    apply(rows, gate [L, I, H], up [L, I, H], down [L, H, I], resources, counts [P, E],
    layout): gate/up/down are this PE's local experts' weights."""

    @staticmethod
    def forward(ctx, rows, gate, up, down, resources, counts, layout):
        keep = any(ctx.needs_input_grad[:4])  # false: no backward will come (no_grad, eval)
        saved = [None] * gate.shape[0]
        gate, up, down = gate.detach(), up.detach(), down.detach()

        def compute(local, received):
            saved[local] = _swiglu_into(received, gate[local], up[local], down[local], keep)

        with _no_autocast(rows.device.type):
            out = resources.run("forward", rows.contiguous(), counts, layout, compute)
        if keep:
            ctx.resources, ctx.counts, ctx.layout, ctx.saved = resources, counts, layout, saved
            ctx.weights = (gate, up, down)
        return out

    @staticmethod
    def backward(ctx, grad_rows):
        gate, up, down = ctx.weights
        d_gate, d_up, d_down = torch.zeros_like(gate), torch.zeros_like(up), torch.zeros_like(down)
        saved = ctx.saved

        def compute(local, received):
            d_gate[local], d_up[local], d_down[local] = _swiglu_backward_into(
                received, saved[local], gate[local], up[local], down[local])
            saved[local] = None  # free the expert's activations as soon as it is done

        with _no_autocast(grad_rows.device.type):
            grad_in = ctx.resources.run("backward", grad_rows.to(gate.dtype).contiguous(),
                                        ctx.counts, ctx.layout, compute)
        ctx.saved = ctx.weights = None
        return grad_in, d_gate, d_up, d_down, None, None, None
