"""References for MegaMoE, built from the same dense weights:

  dense_moe(...)   the whole layer in one process, every expert local (the numerics);
  AllToAllMoE      the same expert-parallel layer with torch.distributed's all_to_all_single
                   (gloo on CPU) for dispatch and combine: the path MegaMoE replaces.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ._function import swiglu
from ._layer import MegaMoE, route


def dense_moe(x: torch.Tensor, router: torch.Tensor, gate_proj: torch.Tensor,
              up_proj: torch.Tensor, down_proj: torch.Tensor, top_k: int, *,
              normalize_topk: bool = True, shared_gate_proj=None, shared_up_proj=None,
              shared_down_proj=None, shared_expert_gate=None, topk_ids=None,
              topk_weights=None) -> torch.Tensor:
    """The MoE layer on one process: x [T, H] (or any [..., H]) -> the same shape, in fp32
    routing and accumulation like MegaMoE. Differentiable in x and every weight."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])
    if topk_ids is None:
        topk_ids, topk_weights = route(flat.float() @ router.float().t(), top_k, normalize_topk)
    out = torch.zeros(flat.shape[0], flat.shape[1], dtype=torch.float32)
    for expert in range(router.shape[0]):
        tokens, slot = (topk_ids == expert).nonzero(as_tuple=True)
        if tokens.numel() == 0:
            continue
        y = swiglu(flat[tokens], gate_proj[expert], up_proj[expert], down_proj[expert])
        out = out.index_add(0, tokens, y.float() * topk_weights[tokens, slot].float()[:, None])
    if shared_gate_proj is not None:
        shared = swiglu(flat, shared_gate_proj, shared_up_proj, shared_down_proj).float()
        if shared_expert_gate is not None:
            shared = shared * torch.sigmoid(flat @ shared_expert_gate.t()).float()
        out = out + shared
    return out.to(x.dtype).reshape(shape)


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with variable splits; backward sends the gradient the reverse way."""

    @staticmethod
    def forward(ctx, rows, recv_splits, send_splits, group, clock):
        ctx.splits, ctx.group, ctx.clock = (recv_splits, send_splits), group, clock
        started = time.perf_counter()
        out = rows.new_empty((sum(recv_splits),) + tuple(rows.shape[1:]))
        dist.all_to_all_single(out, rows.contiguous(), recv_splits, send_splits, group=group)
        clock.seconds += time.perf_counter() - started
        return out

    @staticmethod
    def backward(ctx, grad):
        recv_splits, send_splits = ctx.splits
        started = time.perf_counter()
        out = grad.new_empty((sum(send_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), send_splits, recv_splits, group=ctx.group)
        ctx.clock.seconds += time.perf_counter() - started
        return out, None, None, None, None


class CommClock:
    """Seconds spent in a layer's collectives (forward and backward)."""

    def __init__(self) -> None:
        self.seconds = 0.0


def all_to_all(rows: torch.Tensor, recv_splits: list, send_splits: list, group=None,
               clock: CommClock | None = None):
    """Differentiable torch.distributed.all_to_all_single of rows [N, ...] by row splits; the
    time both directions spend in it is added to `clock`."""
    return _AllToAll.apply(rows, recv_splits, send_splits, group, clock or CommClock())


class AllToAllMoE(MegaMoE):
    """MegaMoE's layer with dispatch and combine over torch.distributed.all_to_all_single
    (autograd-aware) instead of SHMEM: same parameters, same routing, same numerics.
    `clock.seconds` accumulates the time its count exchanges and all-to-alls take."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = CommClock()

    def forward_routed(self, x, topk_ids, topk_weights):
        tokens, k, L = x.shape[0], self.top_k, self.local_experts
        flat_ids = topk_ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat_ids, stable=True)
        token = order // k
        rows = x[token].to(self.dtype)
        counts = torch.bincount(flat_ids, minlength=self.num_experts)
        received_counts = torch.empty_like(counts)
        started = time.perf_counter()
        dist.all_to_all_single(received_counts, counts, group=self.group)  # [P * L] by source
        self.clock.seconds += time.perf_counter() - started
        send_splits = counts.view(self.pes, L).sum(1).tolist()
        recv_by_source = received_counts.view(self.pes, L)
        recv_splits = recv_by_source.sum(1).tolist()
        received = all_to_all(rows, recv_splits, send_splits, self.group, self.clock)
        # Received rows are grouped by source, then by local expert: gather each expert's rows.
        starts = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.int64),
                                         recv_by_source.reshape(-1)]), 0)[:-1].view(self.pes, L)
        results = torch.zeros_like(received)
        for local in range(L):
            index = torch.cat([torch.arange(int(starts[s, local]),
                                            int(starts[s, local] + recv_by_source[s, local]))
                               for s in range(self.pes)])
            if index.numel():
                results = results.index_copy(0, index, swiglu(received[index], self.gate_proj[local],
                                                               self.up_proj[local],
                                                               self.down_proj[local]))
        back = all_to_all(results, send_splits, recv_splits, self.group, self.clock)
        weights = topk_weights.reshape(-1)[order].float()
        out = torch.zeros(tokens, self.hidden_size, dtype=torch.float32).index_add(
            0, token, back.float() * weights[:, None])
        if self.shared_intermediate_size:
            shared = swiglu(x.to(self.dtype), self.shared_gate_proj, self.shared_up_proj,
                            self.shared_down_proj).float()
            if self.gated_shared_expert:
                shared = shared * torch.sigmoid(x.to(self.dtype) @ self.shared_expert_gate.t()).float()
            out = out + shared
        return out.to(x.dtype)

    def close(self) -> None:
        """Nothing to free: this layer holds no symmetric memory."""
