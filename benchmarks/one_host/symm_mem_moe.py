"""A routed-experts MoE layer written only against torch's symmetric-memory API, the baseline a
torch user would write (benchmarks/one_host/symm_mem_bench.py times it beside MegaMoE)."""

from __future__ import annotations

import gc


class TorchSymmMemMoE:
    """A routed-experts MoE layer as a torch user writes it on torch's symmetric-memory API
    (torchtitan's token dispatcher, with a loop over the local experts for the grouped GEMM):

      route     logits = x router^T (fp32), top-k, softmax over the k chosen
      dispatch  rows sorted by global expert (rank-major) into a symmetric send buffer, the
                per-expert counts into symmetric in_splits, all_to_all_vdev_2d: the splits are
                exchanged inside the op and the rows land grouped by local expert, then source
      experts   SwiGLU of each local expert on its block (offsets from out_splits_offsets),
                written in place into a symmetric buffer of the same layout
      combine   all_to_all_vdev_2d_offset with the dispatch's out_splits_offsets as its input
                splits and offsets: the rows come back in the order they were sent
      weighted  sum of each token's k results by its routing weights (fp32)

    Every symmetric tensor is allocated once (collective: every PE builds the layer with the
    same max_tokens) and freed by close()."""

    def __init__(self, router, gate, up, down, top_k: int, max_tokens: int, group) -> None:
        import torch
        import torch.distributed._symmetric_memory as symm_mem
        self.router, self.gate, self.up, self.down = router, gate, up, down
        self.top_k = top_k
        self.group_name = group.group_name
        self.world = group.size()
        self.local = gate.shape[0]
        self.experts = self.world * self.local
        hidden = router.shape[1]
        send_rows = max_tokens * top_k
        # Worst case: every PE's every row to one PE, and an empty expert's block of one row.
        recv_rows = send_rows * self.world + self.local
        self._buffers = []

        def empty(*shape, dtype=torch.float32):
            t = symm_mem.empty(*shape, dtype=dtype, device="cpu")
            symm_mem.rendezvous(t, self.group_name)
            self._buffers.append(t)
            return t

        self.send = empty(send_rows, hidden)
        self.recv = empty(recv_rows, hidden)
        self.expert_out = empty(recv_rows, hidden)
        self.back = empty(send_rows, hidden)
        self.in_splits = empty(self.experts, dtype=torch.int64)
        self.dispatch_splits_offsets = empty(2, self.experts, dtype=torch.int64)
        self.combine_splits_offsets = empty(2, self.experts, dtype=torch.int64)

    def __call__(self, x):
        import torch
        import torch.nn.functional as F
        ops = torch.ops.symm_mem
        tokens, k = x.shape[0], self.top_k
        top = (x.float() @ self.router.float().t()).topk(k, dim=-1)
        ids, weights = top.indices, torch.softmax(top.values, dim=-1)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // k
        n = flat.numel()
        self.in_splits.copy_(torch.bincount(flat, minlength=self.experts))
        torch.index_select(x, 0, token, out=self.send[:n])
        ops.all_to_all_vdev_2d(self.send, self.recv, self.in_splits,
                               self.dispatch_splits_offsets, self.group_name)
        splits, offsets = self.dispatch_splits_offsets.tolist()
        W = self.world
        for e in range(self.local):
            start, rows = offsets[e * W], sum(splits[e * W:(e + 1) * W])
            if rows:
                block = self.recv[start:start + rows]
                self.expert_out[start:start + rows] = (
                    F.silu(block @ self.gate[e].t()) * (block @ self.up[e].t())) @ self.down[e].t()
        ops.all_to_all_vdev_2d_offset(self.expert_out, self.back, self.dispatch_splits_offsets,
                                      self.combine_splits_offsets, self.group_name)
        w = weights.reshape(-1)[order].float()
        out = torch.zeros(tokens, x.shape[1], dtype=torch.float32).index_add(
            0, token, self.back[:n].float() * w[:, None])
        return out.to(x.dtype)

    def close(self) -> None:
        """Drops the symmetric tensors, in allocation order (the same on every PE)."""
        for name in ("send", "recv", "expert_out", "back", "in_splits",
                     "dispatch_splits_offsets", "combine_splits_offsets"):
            if hasattr(self, name):
                delattr(self, name)
        while self._buffers:
            self._buffers.pop(0)
        gc.collect()
