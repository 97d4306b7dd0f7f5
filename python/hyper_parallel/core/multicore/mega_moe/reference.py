"""References for MegaMoE, built from the same dense weights:

  dense_moe(...)   the whole layer in one process, every expert local (the numerics);
  AllToAllMoE      the same expert-parallel layer with torch.distributed's all_to_all_single
                   (gloo on CPU; NPU tensors go through host copies) for dispatch and
                   combine: the path MegaMoE replaces.
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
    out = torch.zeros(flat.shape[0], flat.shape[1], dtype=torch.float32, device=flat.device)
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


class CommClock:
    """Seconds a layer spent in dispatch and combine (forward and backward). On a GPU each
    reading first waits for the device, so queued work is counted where it runs (the
    synchronisations cost the all-to-all path some time of their own)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @staticmethod
    def now(like: torch.Tensor) -> float:
        """perf_counter() once the work queued on `like`'s device has run."""
        if like.is_cuda:
            torch.cuda.synchronize(like.device)
        return time.perf_counter()


def _all_to_all_single(out: torch.Tensor, rows: torch.Tensor, out_splits, in_splits,
                       group) -> None:
    """dist.all_to_all_single; tensors on a device the process group cannot take (gloo and
    NPU tensors) go through host copies (which synchronize: this is the reference path)."""
    if rows.device.type in ("cpu", "cuda"):
        dist.all_to_all_single(out, rows, out_splits, in_splits, group=group)
        return
    staged = torch.empty(out.shape, dtype=out.dtype)
    dist.all_to_all_single(staged, rows.cpu(), out_splits, in_splits, group=group)
    out.copy_(staged)


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with variable splits; backward sends the gradient the reverse way
    (and adds the time that takes to the clock; the forward's caller times its own)."""

    @staticmethod
    def forward(ctx, rows, recv_splits, send_splits, group, clock):
        ctx.splits, ctx.group, ctx.clock = (recv_splits, send_splits), group, clock
        out = rows.new_empty((sum(recv_splits),) + tuple(rows.shape[1:]))
        _all_to_all_single(out, rows.contiguous(), recv_splits, send_splits, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        recv_splits, send_splits = ctx.splits
        started = CommClock.now(grad)
        out = grad.new_empty((sum(send_splits),) + tuple(grad.shape[1:]))
        _all_to_all_single(out, grad.contiguous(), send_splits, recv_splits, ctx.group)
        if ctx.clock is not None:
            ctx.clock.seconds += CommClock.now(grad) - started
        return out, None, None, None, None


def all_to_all(rows: torch.Tensor, recv_splits: list, send_splits: list, group=None,
               clock: CommClock | None = None):
    """Differentiable torch.distributed.all_to_all_single of rows [N, ...] by row splits; the
    backward's time is added to `clock`."""
    return _AllToAll.apply(rows, recv_splits, send_splits, group, clock)


class AllToAllMoE(MegaMoE):
    """MegaMoE's layer with dispatch and combine over torch.distributed.all_to_all_single
    (autograd-aware) instead of SHMEM: same parameters, same routing, same numerics.

    Dispatch: exchange the counts, all-to-all the rows, order them by local expert. Combine:
    put the results back in arrival order, all-to-all them back. `clock.seconds` accumulates
    the time both take, forward and backward (the all-to-alls of the backward)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = CommClock()

    def forward_routed(self, x, topk_ids, topk_weights):
        k, L, P = self.top_k, self.local_experts, self.pes
        flat_ids = topk_ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat_ids, stable=True)
        token = order // k
        self._check_experts()
        rows = x[token].to(self.compute_dtype(x.device.type))  # the autocast dtype under it
        counts = torch.bincount(flat_ids, minlength=self.num_experts)
        self.tokens_per_expert = counts
        started = CommClock.now(x)
        received_counts = torch.empty_like(counts)
        _all_to_all_single(received_counts, counts, None, None, self.group)  # [P * L] by source
        send_splits = counts.view(P, L).sum(1).tolist()
        by_source = received_counts.view(P, L).tolist()
        recv_splits = [sum(row) for row in by_source]
        received = all_to_all(rows, recv_splits, send_splits, self.group, self.clock)
        # Received rows come by source, then by local expert: order them by expert, then
        # source (as MegaMoE's receive buffer holds them), so each expert's rows are contiguous.
        first, starts = 0, []
        for row in by_source:
            starts.append([])
            for n in row:
                starts[-1].append(first)
                first += n
        pieces = [torch.arange(starts[s][e], starts[s][e] + by_source[s][e])
                  for e in range(L) for s in range(P)]
        perm = (torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.int64)).to(x.device)
        grouped = received[perm]
        self.clock.seconds += CommClock.now(x) - started
        outputs, begin = [], 0
        gate, up, down = self.local_expert_weights()  # this PE's shards (the DTensors' local)
        for local in range(L):
            n = sum(by_source[s][local] for s in range(P))
            if n:
                outputs.append(swiglu(grouped[begin:begin + n], gate[local], up[local],
                                      down[local]))
            begin += n
        started = CommClock.now(x)
        expert_out = torch.cat(outputs) if outputs else grouped.new_zeros(0, self.hidden_size)
        results = expert_out[torch.argsort(perm)]  # back to arrival order
        back = all_to_all(results, send_splits, recv_splits, self.group, self.clock)
        self.clock.seconds += CommClock.now(x) - started
        return self._combine(x, topk_weights, order, token, back, self._shared_expert(x))

    def close(self) -> None:
        """Nothing to free: this layer holds no symmetric memory."""
