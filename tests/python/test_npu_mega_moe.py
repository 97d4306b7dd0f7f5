"""MegaMoE on NPU tensors on the CANN backend, on the fake NPU device (tests/fake_npu: a stand-in
torch_npu over the fake ACL runtime, whose streams run their work asynchronously on worker
threads of their own).

Each PE imports torch_npu, takes NPU rank % device count and builds the layer or the decoder on
it: the parameters and inputs are NPU tensors, the heap's buffers too. Proved here:
  - the layer's forward and backward equal the dense layer on the CPU (and the all-to-all layer
    on the NPU, whose gloo calls go through host copies);
  - a few training steps of the small decoder: the SHMEM path and the all-to-all path agree as
    they do on the host backend (test_mega_moe_e2e.py), at EP = 2 and at EP 2 x DP 2;
  - the pipeline on the stream: start() leaves everything on the stream, each local expert's
    computation is queued behind its own wait and the combine (on a torch.npu.Stream of its
    own) sends each expert's results as soon as that expert is done. Proved without timing:
    the second local expert's computation is held back (on the stream) until the first
    expert's results are back at their sender, which deadlocks unless all three hold;
  - what a forward adds to debug_state()["host_synchronizations"] (the SHMEM backend's host
    waits): nothing.

The pools run with their own environment (the CANN backend over the fake library v1.5), so this
file runs in the ordinary test run.
"""

from __future__ import annotations

import pytest

import npu_pool
from pe_pool import use_fake_npu

H, I, IS = 16, 24, 8
RTOL, ATOL = 1e-5, 1e-6  # test_mega_moe.py's and test_mega_moe_e2e.py's tolerances


@pytest.fixture(scope="module")
def npu_pes():
    """npu_pes(n) -> a PePool of n PEs on the fake NPU device."""
    yield from npu_pool.pools()


def _start(rank: int):
    """torch with torch_npu, this PE's NPU current; -> (torch, shmem, the NPU device)."""
    index = use_fake_npu(rank)
    import torch
    from hyper_parallel.core.multicore import shmem

    torch.set_num_threads(1)
    return torch, shmem, torch.device("npu", index)


def _syncs(shmem) -> int:
    return shmem.debug_state()["host_synchronizations"]


def _close(torch, a, b, rtol=RTOL, atol=ATOL) -> bool:
    """allclose on the CPU; a gradient autograd never produced (None) counts as zeros."""
    if a is None or b is None:
        a, b = (torch.zeros_like(b) if a is None else a), (torch.zeros_like(a) if b is None else b)
    return torch.allclose(a.detach().cpu(), b.detach().cpu(), rtol=rtol, atol=atol)


# ---- the layer against the dense layer on the CPU --------------------------------------------

def _layer_against_dense(rank, size):
    torch, shmem, npu = _start(rank)
    from hyper_parallel.core.multicore.mega_moe import (AllToAllMoE, MegaMoE, MegaMoEResources,
                                                        dense_moe)

    experts, top_k, tokens = 2 * size, 2, [37, 5][rank % 2]
    torch.manual_seed(7)  # the same dense weights on every PE
    with MegaMoEResources(H, experts, top_k, chunk_rows=8) as resources:
        assert isinstance(resources.combine_stream, torch.npu.Stream), resources.combine_stream
        layer = MegaMoE(H, I, experts, top_k, shared_intermediate_size=IS,
                        gated_shared_expert=True, resources=resources).to(npu)
        assert layer.router.device == npu and layer.gate_proj.to_local().device == npu
        dense = {name: value.detach().cpu() for name, value in layer.dense_weights().items()}
        x_cpu = torch.randn(tokens, H, generator=torch.Generator().manual_seed(100 + rank))
        g_cpu = torch.randn(tokens, H, generator=torch.Generator().manual_seed(200 + rank))

        # A forward without grad: nothing of SHMEM's blocks the host.
        with torch.no_grad():
            before = _syncs(shmem)
            y0 = layer(x_cpu.to(npu))
            forward_syncs = _syncs(shmem) - before
        # Forward and backward with grad.
        x = x_cpu.to(npu).requires_grad_(True)
        before = _syncs(shmem)
        y = layer(x)
        train_forward_syncs = _syncs(shmem) - before
        (y * g_cpu.to(npu)).sum().backward()
        assert y.device == npu and x.grad.device == npu

        def reference(weights, xs):
            return dense_moe(xs, weights["router"], weights["gate_proj"], weights["up_proj"],
                             weights["down_proj"], top_k, normalize_topk=layer.normalize_topk,
                             shared_gate_proj=weights["shared_gate_proj"],
                             shared_up_proj=weights["shared_up_proj"],
                             shared_down_proj=weights["shared_down_proj"],
                             shared_expert_gate=weights["shared_expert_gate"])

        weights = {name: value.clone().requires_grad_(True) for name, value in dense.items()}
        xr = x_cpu.clone().requires_grad_(True)
        yr = reference(weights, xr)
        (yr * g_cpu).sum().backward()
        assert _close(torch, y0, yr), (y0.cpu() - yr).abs().max()
        assert _close(torch, y, yr), (y.detach().cpu() - yr).abs().max()
        assert _close(torch, x.grad, xr.grad), (x.grad.cpu() - xr.grad).abs().max()
        assert _close(torch, layer.router.grad, weights["router"].grad, atol=1e-5)
        for name in ("shared_gate_proj", "shared_up_proj", "shared_down_proj",
                     "shared_expert_gate"):
            assert _close(torch, getattr(layer, name).grad, weights[name].grad, atol=1e-5), name
        # The expert weights' gradients: every PE's tokens, held at the owner.
        every = {name: value.clone().requires_grad_(True) for name, value in dense.items()}
        for source in range(size):
            count = [37, 5][source % 2]
            xs = torch.randn(count, H, generator=torch.Generator().manual_seed(100 + source))
            gs = torch.randn(count, H, generator=torch.Generator().manual_seed(200 + source))
            (reference(every, xs) * gs).sum().backward()
        local = slice(rank * layer.local_experts, (rank + 1) * layer.local_experts)
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert _close(torch, getattr(layer, name).grad.to_local(), every[name].grad[local],
                          atol=1e-5), name
        # The all-to-all layer from the same weights, on the NPU too (gloo through host copies).
        torch.manual_seed(7)
        a2a = AllToAllMoE(H, I, experts, top_k, shared_intermediate_size=IS,
                          gated_shared_expert=True).to(npu)
        xa = x_cpu.to(npu).requires_grad_(True)
        ya = a2a(xa)
        (ya * g_cpu.to(npu)).sum().backward()
        assert _close(torch, ya, yr) and _close(torch, xa.grad, xr.grad)
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert _close(torch, getattr(a2a, name).grad.to_local(), every[name].grad[local],
                          atol=1e-5), name
        stats = resources.stats
        assert stats.calls == 3 and stats.started_early == 0, stats  # never read on an NPU
    return forward_syncs, train_forward_syncs


def test_the_layer_on_npu_tensors_matches_the_dense_layer_and_blocks_nothing(npu_pes):
    results = npu_pes(2).run(_layer_against_dense, timeout=300)
    # A forward adds nothing to the SHMEM backend's host synchronizations, with grad or
    # without (the count exchange's read of the counts is torch's copy to the CPU).
    assert results == [(0, 0), (0, 0)], results


# ---- the pipeline on the stream --------------------------------------------------------------

def _pipelining(rank, size):
    """2 PEs, 4 experts of one row each (top_k 1): PE 0 owns experts 0 and 1, PE 1 experts 2
    and 3; each PE routes rows to every expert. On PE 0, local expert 1's computation first
    waits (on the stream) for a gate word, which a stream beside the caller's opens once PE 0's
    return counter shows three of this call's four results back at PE 0: those of experts 2
    and 3 (PE 1's) and of expert 0, which PE 0's combine can only have sent while expert 1 was
    not done. The gate's opener is enqueued once start() returned. So the call completes only
    if start() leaves everything on the stream (the host does not wait for any expert), expert
    0's computation is queued behind its own wait, not behind the last expert's, and the
    combine sends each expert's results as soon as that expert is done: with the combine after
    the last expert, or a host wait in start(), it deadlocks (a timeout)."""
    torch, shmem, npu = _start(rank)
    from hyper_parallel.core.multicore.mega_moe import MegaMoEResources

    experts = 4
    per_expert = [[2, 3, 1, 2], [3, 2, 2, 1]][rank]
    with MegaMoEResources(H, experts, 1, chunk_rows=4) as resources:
        gate = shmem.empty(8, dtype=torch.int64)
        gate.zero_()
        shmem.barrier()
        rows = sum(per_expert)
        x = torch.randn(rows, H, generator=torch.Generator().manual_seed(rank)).to(npu)
        counts = resources.exchange_counts(torch.tensor(per_expert).to(npu))
        layout = resources.layout(counts)
        d = resources._directions["forward"]
        order = []

        def compute(local, received):
            order.append(local)
            if rank == 0 and local == 1:  # on the stream, behind expert 1's own wait
                shmem.wait_signal(gate[0:1], 1, comparison="ge")
            received.mul_(2.0)

        before = _syncs(shmem)
        three_back = d.return_target + 3  # of this call's 4 results back at PE 0
        pending = resources.start("forward", x, counts, layout, compute)
        if rank == 0:  # enqueued after start() returned: the host waited for no expert
            helper = torch.npu.Stream()
            with torch.npu.stream(helper):
                shmem.wait_signal(d.return_word, three_back, comparison="ge")
                shmem.signal(gate[0:1], 1, 0, operation="set")
        out = resources.finish(pending)
        queued_syncs = _syncs(shmem) - before  # start, the helper, finish: all enqueued
        assert torch.equal(out.cpu(), x.cpu() * 2.0)
        if rank == 0:
            helper.synchronize()
        # The counters as the call left them: every local expert done once.
        assert d.done_counters[:, 0].tolist() == d.done_targets
        shmem.barrier()
        shmem.free(gate)
    return order, queued_syncs


def test_each_expert_computes_behind_its_own_wait_and_is_combined_when_done(npu_pes):
    (order0, syncs0), (order1, syncs1) = npu_pes(2).run(_pipelining, timeout=120)
    assert order0 == [0, 1] and order1 == [0, 1]  # enqueued in local-expert order
    assert syncs0 == syncs1 == 0


# ---- training: the SHMEM path and the all-to-all path agree ----------------------------------

def _train_both(rank, size, ep):
    torch, shmem, npu = _start(rank)
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                              expert_data_parallel_groups,
                                                              make_optimizer, reduce_gradients,
                                                              synthetic_tokens)

    def local(t):
        return t.to_local() if isinstance(t, DTensor) else t

    def within(a, b):
        return _close(torch, local(a), local(b))

    groups = {}
    if ep < size:
        groups["group"], groups["dp_group"] = expert_data_parallel_groups(ep)
    config = DecoderConfig(num_experts=2 * ep, layers=2, top_k=2, sequence=8, batch=2,
                           vocab_size=32, hidden_size=16, intermediate_size=16,
                           shared_intermediate_size=8, heads=2)
    shmem_model = MoEDecoder(config, "shmem", seed=21, **groups).to(npu)
    a2a_model = MoEDecoder(config, "a2a", seed=21, **groups).to(npu)
    try:
        ours, theirs = shmem_model.state_dict(), a2a_model.state_dict()
        assert all(torch.equal(local(ours[n]).cpu(), local(theirs[n]).cpu()) for n in ours)
        assert local(shmem_model.layers[0].moe.gate_proj).device == npu
        optimizers = make_optimizer(shmem_model), make_optimizer(a2a_model)
        named = dict(shmem_model.named_parameters()), dict(a2a_model.named_parameters())
        steps = 2
        for step in range(steps):
            tokens = synthetic_tokens(config, rank, step).to(npu)
            outputs = []
            for model, optimizer in zip((shmem_model, a2a_model), optimizers):
                optimizer.zero_grad(set_to_none=False)
                loss, logits = model.loss(tokens)
                loss.backward()
                reduce_gradients(model)
                outputs.append((loss.detach(), logits.detach()))
            (loss_s, logits_s), (loss_a, logits_a) = outputs
            assert loss_s.device == npu
            assert within(loss_s, loss_a), (step, float(loss_s), float(loss_a))
            assert within(logits_s, logits_a), step
            for name, p in named[0].items():
                q = named[1][name]
                assert (p.grad is None) == (q.grad is None), name
                if p.grad is not None:
                    assert within(p.grad, q.grad), (step, name)
            for optimizer in optimizers:
                optimizer.step()
            for name, p in named[0].items():
                assert within(p.detach(), named[1][name].detach()), (step, name)
        assert shmem_model.resources.stats.calls == 2 * config.layers * steps
        return float(loss_s)
    finally:
        shmem_model.close()
        a2a_model.close()
        if groups:
            dist.destroy_process_group(groups["group"])
            dist.destroy_process_group(groups["dp_group"])


@pytest.mark.parametrize("size, ep", [(2, 2), (4, 2)])
def test_training_on_npu_tensors_matches_the_all_to_all_path(npu_pes, size, ep):
    losses = npu_pes(size).run(_train_both, ep, timeout=600)
    assert len(losses) == size
