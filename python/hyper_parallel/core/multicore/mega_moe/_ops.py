"""MegaMoE under torch.compile: one expert-parallel call as the custom ops
torch.ops.hps_moe.forward and torch.ops.hps_moe.backward (docs/mega_moe.md, "Compiling").

The schemas are the MegaMoE binding's (ccsrc/bindings/mega_moe/mega_moe.cc, TORCH_LIBRARY
hps_moe); this module gives them their kernels (CPU and CUDA keys: never a composite key, which
would run the communication while a graph is traced), their fake kernels (every output's shape
follows from the inputs': the routed rows N stay symbolic, so a new token count does not
recompile) and their autograd (ExpertCall). The kernels are the eager layer's own pipeline, so
a compiled call computes what an eager one does, with the same native dispatch and combine.

What a compiled graph cannot hold stays inside the forward kernel, where it runs eagerly at
every call: the range check of the routes, the per-expert counts (bincount), the resources'
construction and growth (allocation is collective and returns symmetric storage), the count
exchange, the layout, the per-expert waits and the lock that keeps one call at a time per
resources. The graph around the ops (router, permutation, the gather of the rows, the weighted
sum, the shared expert) is ordinary torch code that the compiler fuses.

Both ops take the binding's order token first and declare it mutated (docs/compile.md), so
that the compiler keeps them, in program order, with any other SHMEM op of the graph. The
layer is named by an int (register_layer), a constant of the graph; what a forward saved for
its backward (each local expert's products, at the owner) is named by the 0-dim `call` tensor
the forward returns, which autograd keeps for the backward. The backward takes it out of the
table; a forward under grad whose backward never runs leaves it there until its resources are
closed (the next forward drops those): run compiled evaluation under torch.no_grad(), which
keeps nothing.
"""

from __future__ import annotations

import itertools
import weakref

import torch

from .. import shmem
from ._function import _Handoff, start_backward, start_forward, weight_gradients
from ._native import native  # defines the hps_moe schemas (TORCH_LIBRARY in its module)

_LAYERS: dict = {}  # layer number -> weakref to the MegaMoE layer
_layer_numbers = itertools.count(1)
_CALLS: dict = {}  # call number -> the _Handoff a forward with `keep` left for its backward
_call_numbers = itertools.count(1)

_NO_FORWARD = ("hps_moe::backward: no forward state for this call (its backward ran already, "
               "or its forward ran without grad); MegaMoE's backward frees the experts' "
               "activations as it goes, so a second backward (retain_graph=True) is not "
               "supported")


def register_layer(layer) -> int:
    """The number the ops know `layer` by (held weakly: a dropped layer leaves the table)."""
    number = next(_layer_numbers)
    _LAYERS[number] = weakref.ref(layer, lambda _ref, key=number: _LAYERS.pop(key, None))
    return number


def _layer(number: int):
    layer = _LAYERS.get(number)
    layer = layer() if layer is not None else None
    if layer is None:
        raise RuntimeError(f"hps_moe: MegaMoE layer {number} no longer exists")
    return layer


def order_token() -> torch.Tensor:
    """The binding's order token (shmem.order_token()): every hps and hps_moe op's first
    argument."""
    return shmem.order_token()


# ---- kernels ------------------------------------------------------------------------------

def _forward_kernel(order, rows, ids, gate, up, down, layer, keep):
    native.check_order_token(order, "hps_moe::forward")
    moe = _layer(layer)
    moe.check_routes(ids)
    local_counts = torch.bincount(ids, minlength=moe.num_experts)
    resources = moe._ensure_resources()
    counts = resources.exchange_counts(local_counts, rows.dtype)
    handoff = _Handoff(resources, counts, resources.layout(counts), keep, copy_out=True,
                       dtype=rows.dtype)
    start_forward(handoff, rows, gate, up, down)
    results = resources.finish(handoff.pending, copy=True)
    handoff.pending = None
    for stale in [n for n, kept in _CALLS.items() if kept.resources.closed]:
        del _CALLS[stale]  # forwards whose backward never ran, on closed resources
    number = next(_call_numbers)
    if keep:
        _CALLS[number] = handoff
    return results, local_counts, counts, torch.tensor(number, dtype=torch.int64)


def _backward_kernel(order, grad, call, gate, up, down, layer):
    native.check_order_token(order, "hps_moe::backward")
    handoff = _CALLS.pop(int(call), None)
    if handoff is None:
        raise RuntimeError(_NO_FORWARD)
    start_backward(handoff, grad)
    grad_rows = handoff.resources.finish(handoff.pending, copy=True)
    d_gate, d_up, d_down = weight_gradients(handoff)
    return grad_rows, d_gate, d_up, d_down


for _key in ("CPU", "CUDA"):
    torch.library.impl("hps_moe::forward", _key)(_forward_kernel)
    torch.library.impl("hps_moe::backward", _key)(_backward_kernel)


@torch.library.register_fake("hps_moe::forward")
def _forward_fake(order, rows, ids, gate, up, down, layer, keep):
    moe = _layer(layer)
    return (rows.new_empty(rows.shape), ids.new_empty(moe.num_experts),
            torch.empty(moe.pes, moe.num_experts, dtype=torch.int64),
            torch.empty((), dtype=torch.int64))


@torch.library.register_fake("hps_moe::backward")
def _backward_fake(order, grad, call, gate, up, down, layer):
    return grad.new_empty(grad.shape), gate.new_empty(gate.shape), up.new_empty(up.shape), \
        down.new_empty(down.shape)


class ExpertCall(torch.autograd.Function):
    """One expert-parallel call through the ops, differentiable in the rows and the local
    expert weights: (results [N, H], this PE's rows per expert [E], every PE's [P, E])."""

    @staticmethod
    def forward(ctx, order, rows, ids, gate, up, down, layer, keep):
        results, local_counts, counts, call = torch.ops.hps_moe.forward.default(
            order, rows, ids, gate, up, down, layer, keep)
        ctx.layer = layer
        ctx.save_for_backward(order, call, gate, up, down)
        ctx.mark_non_differentiable(local_counts, counts)
        return results, local_counts, counts

    @staticmethod
    def backward(ctx, grad, _local_counts, _counts):
        order, call, gate, up, down = ctx.saved_tensors
        grad_rows, d_gate, d_up, d_down = torch.ops.hps_moe.backward.default(
            order, grad.contiguous(), call, gate, up, down, ctx.layer)
        return None, grad_rows, None, d_gate, d_up, d_down, None, None


def expert_call(layer: int, rows, ids, gate, up, down, keep: bool) -> tuple:
    """ExpertCall.apply with the order token: (results, local counts, counts)."""
    return ExpertCall.apply(order_token(), rows, ids, gate, up, down, layer, keep)


def compile_model(model, **options):
    """torch.compile(model, fullgraph=True, dynamic=True, **options): a module holding MegaMoE
    layers (one layer, the decoder of mega_moe.model, a model of the caller's) compiled as one
    graph per call, the token count symbolic from the first call, so a new token count per PE
    does not recompile (torch.compile's default, dynamic=None, compiles the first count as a
    constant and recompiles once, at the first other count). Options override these."""
    options.setdefault("fullgraph", True)
    options.setdefault("dynamic", True)
    return torch.compile(model, **options)
