"""The expert-parallel part of MegaMoE: two autograd functions, the halves of one call.

Forward: this PE's expert-sorted rows go to their experts' owners (one native dispatch); each
owner runs its local experts' SwiGLU as soon as each expert's rows have landed, writing the
results over those rows in its receive buffer, and each expert's results go back from there as
soon as it is done (one native combine); the rows come back in the order they left. Backward
runs the same path the other way: the gradients of the results go to the owners with the
forward's layout, each owner computes the gradients of its local experts' weights (which stay
at the owner: no all-reduce) and of the rows it received, from what the forward saved per
expert (nothing is computed twice), writing the rows' gradients over the incoming ones, and
those go back. Everything between the two native calls is torch on the owner.

The halves are MegaMoEResources.start() (dispatch, the local experts, the combine started)
and finish() (every result back), so that work of the caller's (MegaMoE's shared expert)
runs between them, forward and backward, while this PE waits for the other PEs' experts.

start_forward(), start_backward() and weight_gradients() are each direction's work without
autograd around it: the autograd functions here call them, and so do the kernels of the custom
ops the layer runs under torch.compile (_ops), so both paths compute alike.

The SwiGLU's backward is written out (the same products autograd would form, in the same
orientation) instead of running autograd's engine once per expert: an engine call per expert
costs more than a small expert's arithmetic.

Mixed precision: the experts compute in the call's dtype (expert_parallel's `dtype`: MegaMoE
gives the autocast dtype under torch.autocast, else its own), as torch.nn.Linear does under
autocast: the rows and a copy of the weights in that dtype, the products in it, the weights'
gradients computed in it and returned in the weights' own dtype. The rows travel in it too
(the resources' buffers viewed in it), and the experts write their results over the received
rows with out=, so autocast itself is off inside (every operand has that dtype already).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable


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


_TWICE = ("MegaMoE's backward ran already for this forward: it frees the experts' activations "
          "as it goes, so a second backward (retain_graph=True) is not supported")


def _no_autocast(device_type: str):
    """Autocast off for the experts (a no-op context where it is off already)."""
    if torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()


class _Handoff:
    """What the two halves of one expert-parallel call pass each other: the pending SHMEM
    call, and what the backward needs."""

    __slots__ = ("resources", "counts", "layout", "keep", "copy_out", "dtype", "weight_dtypes",
                 "pending", "saved", "weights", "grads")

    def __init__(self, resources, counts, layout, keep: bool, copy_out: bool,
                 dtype: torch.dtype) -> None:
        self.resources, self.counts, self.layout = resources, counts, layout
        self.dtype = dtype  # the experts compute, and the rows travel, in it
        self.weight_dtypes = None  # the weights' own dtypes: their gradients are returned so
        self.keep = keep  # a backward may come: the forward keeps what it needs
        self.copy_out = copy_out  # the results outlive the call (autograd may keep them)
        self.pending = self.saved = self.weights = self.grads = None


class _DispatchAndCompute(torch.autograd.Function):
    """First half. Forward: gathers the routed rows x[token], then the dispatch, this PE's
    experts as their rows land, the combine started (MegaMoEResources.start); returns a 0-dim
    token that links the halves. Backward (the second half of the backward call): waits for
    the rows' gradients to come back and adds them into x's gradient straight from the
    return buffer (no copy of them first), with the local experts' weight gradients."""

    @staticmethod
    def forward(ctx, x, token, gate, up, down, handoff):
        rows = x[token].to(handoff.dtype)
        start_forward(handoff, rows, gate, up, down)
        if handoff.keep:
            ctx.handoff = handoff
            ctx.save_for_backward(token)
            ctx.x_like = (x.shape, x.dtype, x.device)
        return rows.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx, _token_grad):
        handoff = ctx.handoff  # a second backward stopped at _Combine's already
        # A view of the return buffer, read before this PE's next backward call can start.
        grad_rows = handoff.resources.finish(handoff.pending, copy=False)
        grad_x = None
        if ctx.needs_input_grad[0]:
            (token,) = ctx.saved_tensors
            shape, dtype, device = ctx.x_like
            grad_x = torch.zeros(shape, dtype=dtype, device=device).index_add_(
                0, token, grad_rows.to(dtype))
        d_gate, d_up, d_down = weight_gradients(handoff)
        return grad_x, None, d_gate, d_up, d_down, None


class _Combine(torch.autograd.Function):
    """Second half. Forward: waits for every result to come back (MegaMoEResources.finish).
    Backward (the first half of the backward call): the results' gradients to their experts'
    owners, each local expert's backward as its rows land, the combine started."""

    @staticmethod
    def forward(ctx, token, handoff):
        ctx.handoff = handoff
        return handoff.resources.finish(handoff.pending, copy=handoff.copy_out)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_rows):
        start_backward(ctx.handoff, grad_rows)
        return torch.zeros((), dtype=grad_rows.dtype, device=grad_rows.device), None


def start_forward(handoff: _Handoff, rows: torch.Tensor, gate, up, down) -> None:
    """The forward's first half for `rows` [N, H] (this PE's routed rows, expert-sorted, in the
    call's dtype): the dispatch, this PE's experts as their rows land (each writing its
    results over its rows), the combine started (handoff.pending). With handoff.keep, what the
    backward needs stays in the handoff (the weights in the call's dtype and each expert's
    products)."""
    saved = [None] * gate.shape[0]
    handoff.weight_dtypes = (gate.dtype, up.dtype, down.dtype)
    # In the call's dtype (a copy under autocast, as autocast casts nn.Linear's weight).
    gate, up, down = (w.detach().to(handoff.dtype) for w in (gate, up, down))
    keep = handoff.keep

    def compute(local, received):
        saved[local] = _swiglu_into(received, gate[local], up[local], down[local], keep)

    with _no_autocast(rows.device.type):
        handoff.pending = handoff.resources.start("forward", rows.contiguous(), handoff.counts,
                                                  handoff.layout, compute)
    if keep:
        handoff.saved, handoff.weights = saved, (gate, up, down)


def start_backward(handoff: _Handoff, grad_rows: torch.Tensor) -> None:
    """The backward's first half for the gradients of the forward's results [N, H]: they go to
    their experts' owners, each local expert's backward runs as its rows land (writing the
    rows' gradients over them and freeing its activations), the combine started
    (handoff.pending); the weights' gradients wait in handoff.grads (weight_gradients())."""
    if handoff.weights is None:
        raise RuntimeError(_TWICE)
    gate, up, down = handoff.weights
    d_gate, d_up, d_down = torch.zeros_like(gate), torch.zeros_like(up), torch.zeros_like(down)
    saved = handoff.saved

    def compute(local, received):
        d_gate[local], d_up[local], d_down[local] = _swiglu_backward_into(
            received, saved[local], gate[local], up[local], down[local])
        saved[local] = None  # free the expert's activations as soon as it is done

    with _no_autocast(grad_rows.device.type):
        handoff.pending = handoff.resources.start(
            "backward", grad_rows.to(gate.dtype).contiguous(), handoff.counts,
            handoff.layout, compute)
    handoff.saved, handoff.grads = None, (d_gate, d_up, d_down)


def weight_gradients(handoff: _Handoff) -> tuple:
    """The local experts' weight gradients of a backward whose first half ran (start_backward),
    in the weights' own dtypes; the handoff lets go of everything."""
    grads = tuple(grad.to(dtype) for grad, dtype in zip(handoff.grads, handoff.weight_dtypes))
    handoff.pending = handoff.grads = handoff.weights = None
    return grads


def expert_parallel(x, token, gate, up, down, resources, counts, layout, between=None, *,
                    dtype=None):
    """x [T, H] and token [N] (int64: the token of each of this PE's routed rows, the rows
    sorted by expert) -> (the experts' outputs for the rows x[token], [N, H] in `dtype`;
    between()'s result or None); gate/up/down [L, I, H] / [L, I, H] / [L, H, I]: this
    PE's local experts' weights. `dtype` (None: the weights'): the dtype the experts compute
    in and the rows travel in, the one given to resources.exchange_counts for `counts`.

    `between` is called once this PE's experts are done and their results are on their way
    back, before waiting for the other PEs' results: what it computes (with autograd, like
    any code of the caller's) fills the time this PE would otherwise wait. The backward keeps
    that order: the results' gradients go out and the local experts' backward runs, then
    autograd runs between()'s backward (its nodes come after the first half's and before the
    second half's), then the rows' gradients are collected. between() must not make calls on
    `resources` itself. Under torch.no_grad() the outputs are the view of the return buffer
    that holds them (MegaMoEResources.finish(copy=False)): read them before the next call on
    `resources`, as MegaMoE does. One backward per forward: the activations are freed as the backward
    uses them (retain_graph=True and a second backward raise RuntimeError), and the experts
    are not twice differentiable."""
    grad = torch.is_grad_enabled()
    keep = grad and any(t.requires_grad for t in (x, gate, up, down))
    # Without grad mode nothing keeps the results: they are the view of the return buffer.
    handoff = _Handoff(resources, counts, layout, keep, copy_out=grad,
                       dtype=gate.dtype if dtype is None else dtype)
    link = _DispatchAndCompute.apply(x, token, gate, up, down, handoff)
    extra = between() if between is not None else None
    return _Combine.apply(link, handoff), extra
