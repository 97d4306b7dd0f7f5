"""MegaMoE on 1-4 PEs against the dense single-process computation of the same layer and the
all-to-all layer built from the same weights: forward, gradients of the input, the router,
the shared expert and every expert weight, routing corner cases, capacity growth, resources
shared by layers, close and reopen, a heap too small, weight interchange, the router logits and
token counts the layer keeps for aux losses."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from helpers import ON_NPU, device, expect_shmem_error
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.mega_moe import (AllToAllMoE, MegaMoE, MegaMoEResources,
                                                    dense_moe, from_mixtral, from_qwen2_moe,
                                                    router_z_loss, switch_aux_loss, to_mixtral,
                                                    to_qwen2_moe)

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)

H, I, IS = 16, 24, 8


def _tokens(rank: int, count: int) -> torch.Tensor:
    """A PE's tokens, where its local tensors live (helpers.device(): the NPU on the fake)."""
    return torch.randn(count, H, generator=torch.Generator().manual_seed(100 + rank)).to(device())


def _on_device(cls, *args, **kwargs):
    """A layer built as usual, moved to where this PE's local tensors live."""
    return cls(*args, **kwargs).to(device())


def _close(a, b, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """allclose, where a gradient that autograd never produced (None) counts as zeros."""
    if a is None or b is None:
        a, b = (torch.zeros_like(b) if a is None else a), (torch.zeros_like(a) if b is None else b)
    return torch.allclose(a, b, rtol=rtol, atol=atol)


def _dense(layer: MegaMoE, dense: dict, x: torch.Tensor, **routes) -> torch.Tensor:
    return dense_moe(x, dense["router"], dense["gate_proj"], dense["up_proj"], dense["down_proj"],
                     layer.top_k, normalize_topk=layer.normalize_topk,
                     shared_gate_proj=dense.get("shared_gate_proj"),
                     shared_up_proj=dense.get("shared_up_proj"),
                     shared_down_proj=dense.get("shared_down_proj"),
                     shared_expert_gate=dense.get("shared_expert_gate"), **routes)


def _leaf(dense: dict) -> dict:
    return {name: value.clone().requires_grad_(True) for name, value in dense.items()}


def _against_dense(rank, size, experts, top_k, tokens_by_rank, normalize, gated, chunk_rows):
    torch.manual_seed(7)  # the same dense weights on every PE
    tokens = tokens_by_rank[rank % len(tokens_by_rank)]
    with MegaMoEResources(H, experts, top_k, chunk_rows=chunk_rows) as resources:
        layer = _on_device(MegaMoE, H, I, experts, top_k, shared_intermediate_size=IS,
                           gated_shared_expert=gated, normalize_topk=normalize,
                           resources=resources)
        dense = layer.dense_weights()
        x = _tokens(rank, tokens).requires_grad_(True)
        g = torch.randn(tokens, H, generator=torch.Generator().manual_seed(200 + rank)).to(
            device())
        y = layer(x)
        (y * g).sum().backward()
        # The dense layer on this PE's tokens: output, input, router and shared-expert grads.
        weights = _leaf(dense)
        xr = x.detach().clone().requires_grad_(True)
        yr = _dense(layer, weights, xr)
        (yr * g).sum().backward()
        assert _close(y, yr), (y - yr).abs().max()
        assert _close(x.grad, xr.grad), (x.grad - xr.grad).abs().max()
        assert _close(layer.router.grad, weights["router"].grad, atol=1e-5)
        for name in ("shared_gate_proj", "shared_up_proj", "shared_down_proj",
                     "shared_expert_gate"):
            if hasattr(layer, name):
                assert _close(getattr(layer, name).grad, weights[name].grad, atol=1e-5), name
        # Expert weights: gradients from every PE's tokens, held at the owner.
        every = _leaf(dense)
        for source in range(size):
            count = tokens_by_rank[source % len(tokens_by_rank)]
            xs = _tokens(source, count)
            gs = torch.randn(count, H, generator=torch.Generator().manual_seed(200 + source)).to(
                device())
            (_dense(layer, every, xs) * gs).sum().backward()
        local = slice(rank * layer.local_experts, (rank + 1) * layer.local_experts)
        for name in ("gate_proj", "up_proj", "down_proj"):
            # Expert weights are DTensors of global shape; this PE's shard is to_local().
            param = getattr(layer, name)
            assert tuple(param.shape) == tuple(every[name].shape), (name, param.shape)
            assert _close(param.grad.to_local(), every[name].grad[local], atol=1e-5), name
        # The all-to-all layer from the same weights agrees with the dense one.
        torch.manual_seed(7)
        a2a = _on_device(AllToAllMoE, H, I, experts, top_k, shared_intermediate_size=IS,
                         gated_shared_expert=gated, normalize_topk=normalize)
        xa = x.detach().clone().requires_grad_(True)
        ya = a2a(xa)
        (ya * g).sum().backward()
        assert _close(ya, yr), (ya - yr).abs().max()
        assert _close(xa.grad, xr.grad)
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert _close(getattr(a2a, name).grad.to_local(), every[name].grad[local],
                          atol=1e-5), name
        stats = resources.stats
        assert stats.calls == 2 and stats.experts == 2 * layer.local_experts
    return True


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_forward_and_gradients_match_the_dense_layer(pes, size):
    experts = 2 * size
    assert all(pes(size).run(_against_dense, experts, 2, [37, 5, 0, 64], True, True, 8,
                             timeout=300))


@pytest.mark.parametrize("top_k", ["one", "all"])
def test_top_k_one_and_top_k_every_expert(pes, top_k):
    k = 1 if top_k == "one" else 4
    assert all(pes(2).run(_against_dense, 4, k, [13, 29], False, False, 128, timeout=300))


def _skewed(rank, size):
    torch.manual_seed(3)
    with MegaMoEResources(H, 2 * size, 1, chunk_rows=4, capacity_factor=0.5) as resources:
        layer = _on_device(MegaMoE, H, I, 2 * size, 1, resources=resources)
        dense = layer.dense_weights()
        tokens = 11 + rank  # not a multiple of the chunk
        x = _tokens(rank, tokens).requires_grad_(True)
        ids = torch.zeros(tokens, 1, dtype=torch.int64, device=device())  # all to expert 0: PE 0
        w = torch.ones(tokens, 1, device=device())
        y = layer.forward_routed(x, ids, w)
        y.sum().backward()
        xr = x.detach().clone().requires_grad_(True)
        yr = _dense(layer, dense, xr, topk_ids=ids, topk_weights=w)
        yr.sum().backward()
        assert _close(y, yr) and _close(x.grad, xr.grad)
        # capacity_factor 0.5 held 6 rows per owner; PE 0 needed every PE's rows: it grew.
        every_row = sum(11 + pe for pe in range(size))
        assert resources.capacity >= every_row, (resources.capacity, every_row)
        if rank != 0:
            assert not layer.gate_proj.grad.to_local().any(), \
                "a PE that received nothing has zero grads"
    return True


@pytest.mark.parametrize("size", [2, 3])
def test_skewed_routing_a_pe_receiving_nothing_and_capacity_growth(pes, size):
    assert all(pes(size).run(_skewed, timeout=300))


def _shared_resources_and_reopen(rank, size):
    torch.manual_seed(5)
    for lifecycle in range(2):  # close and reopen
        with MegaMoEResources(H, 4, 2, max_tokens=16) as resources:
            first = _on_device(MegaMoE, H, I, 4, 2, resources=resources)
            second = _on_device(MegaMoE, H, 2 * I, 4, 2, resources=resources)
            x = _tokens(rank, 9)
            capacity = resources.capacity
            y = second(first(x))
            dense1, dense2 = first.dense_weights(), second.dense_weights()
            expected = _dense(second, dense2, _dense(first, dense1, x))
            assert _close(y, expected)
            assert resources.capacity == capacity == 2 * 16 * size, "no growth within max_tokens"
            assert resources.stats.calls == 2
            first.close()  # shared resources are not the layer's to free
            assert not resources.closed
        assert resources.closed
        live = shmem.debug_state()["live_allocations"]
        assert live == [], live
    return True


def test_two_layers_share_resources_and_close_and_reopen(pes):
    assert all(pes(2).run(_shared_resources_and_reopen, timeout=300))


def _overlap_modes_and_in_place_contract(rank, size):
    torch.manual_seed(3)
    with shmem.acquire_shmem():
        try:
            shmem.Stream()
            streams = True
        except shmem.ShmemError as error:  # CANN: the framework's streams only
            assert error.error_code == "UNSUPPORTED_CAPABILITY", error
            streams = False
        if not streams and not ON_NPU:  # asked for, refused before any collective (on CANN
            # with torch_npu, NPU tensors, the overlap takes a torch.npu.Stream instead)
            expect_shmem_error("UNSUPPORTED_CAPABILITY", MegaMoEResources, H, 2 * size, 2,
                               overlap_combine=True)
    # Rank 0 overlaps the combine on its own stream, the others run it after their experts:
    # the protocol is the same, so PEs may differ. Two layers back to back: two backward
    # calls in a row with no count exchange between them (the "free" counters order them).
    overlap = rank == 0 and (streams or ON_NPU)
    with MegaMoEResources(H, 2 * size, 2, overlap_combine=overlap) as resources:
        assert (resources.combine_stream is not None) == overlap
        first = _on_device(MegaMoE, H, I, 2 * size, 2, resources=resources)
        second = _on_device(MegaMoE, H, I, 2 * size, 2, resources=resources)
        dense1, dense2 = first.dense_weights(), second.dense_weights()
        for step in range(3):
            x = _tokens(rank + 10 * step, 7 + step).requires_grad_(True)
            second(first(x)).sum().backward()
            xr = x.detach().clone().requires_grad_(True)
            _dense(second, dense2, _dense(first, dense1, xr)).sum().backward()
            assert _close(x.grad, xr.grad), (step, (x.grad - xr.grad).abs().max())
        calls = resources.stats.calls
        assert calls == 4 * 3
        # A collective: every PE's last combine (and its "free" signals) is done before it.
        counts = resources.exchange_counts(torch.tensor([3] * (2 * size)))
        for name in ("forward", "backward"):  # every owner freed its receive buffer every call
            direction = resources._directions[name]
            assert int(direction.free_word.item()) == direction.free_target == size * calls // 2
        # run()'s contract: compute writes over the received rows, or returns results that
        # are copied there.
        layout = resources.layout(counts)
        rows = _tokens(rank, 6 * size)
        doubled = resources.run("forward", rows, counts, layout, lambda local, got: got * 2)
        assert torch.equal(doubled, rows * 2)
        tripled = resources.run("forward", rows, counts, layout, lambda local, got: got.mul_(3))
        assert torch.equal(tripled, rows * 3)
        same = resources.run("forward", rows, counts, layout, lambda local, got: None)
        assert torch.equal(same, rows)
    with pytest.raises(TypeError, match="overlap_combine"):
        MegaMoEResources(H, 2 * size, 2, overlap_combine="yes")
    return True


def test_the_combine_overlaps_or_follows_the_experts_and_experts_write_in_place(pes):
    assert all(pes(2).run(_overlap_modes_and_in_place_contract, timeout=300))
    assert all(pes(3).run(_overlap_modes_and_in_place_contract, timeout=300))


class _Mark(torch.autograd.Function):
    """Identity that appends (name, "forward"/"backward") to a log when it runs."""

    @staticmethod
    def forward(ctx, x, log, name):
        ctx.log, ctx.name = log, name
        log.append((name, "forward"))
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.log.append((ctx.name, "backward"))
        return grad, None, None


def _work_between_the_halves(rank, size):
    torch.manual_seed(5)
    experts = 2 * size
    with MegaMoEResources(H, experts, 2) as resources:
        log = []
        start, finish = resources.start, resources.finish

        def logged_start(direction, *args):
            log.append(("start", direction))
            return start(direction, *args)

        def logged_finish(pending, **kwargs):
            log.append(("finish", pending.direction_name))
            return finish(pending, **kwargs)

        resources.start, resources.finish = logged_start, logged_finish
        layer = _on_device(MegaMoE, H, I, experts, 2, shared_intermediate_size=IS,
                           resources=resources)
        dense = layer.dense_weights()
        shared_expert = layer._shared_expert
        layer._shared_expert = lambda x: _Mark.apply(shared_expert(x), log, "shared")
        x = _tokens(rank, 9).requires_grad_(True)
        layer(x).sum().backward()
        # The shared expert runs between the halves of the call, forward and backward (its
        # backward nodes come between theirs in autograd's order), and the numbers still
        # match the dense layer.
        assert log == [("start", "forward"), ("shared", "forward"), ("finish", "forward"),
                       ("start", "backward"), ("shared", "backward"),
                       ("finish", "backward")], log
        xr = x.detach().clone().requires_grad_(True)
        _dense(layer, dense, xr).sum().backward()
        assert _close(x.grad, xr.grad)
        resources.start, resources.finish = start, finish
        # start() and finish() by hand: a start() while a call is pending finishes that one
        # first (its results dropped); finishing a call twice is refused; close() finishes a
        # call nothing finished.
        counts = resources.exchange_counts(torch.tensor([2] * experts))
        layout = resources.layout(counts)
        rows = _tokens(rank, 2 * experts)
        first = resources.start("forward", rows, counts, layout, lambda local, got: got * 2)
        second = resources.start("forward", rows, counts, layout, lambda local, got: got * 3)
        expect_shmem_error("INVALID_STATE", resources.finish, first)
        assert torch.equal(resources.finish(second), rows * 3)
        expect_shmem_error("INVALID_STATE", resources.finish, second)
        # One pending call per direction: a forward call while a backward one is pending (a
        # checkpointed layer recomputed during the backward) leaves the backward one alone.
        backward = resources.start("backward", rows, counts, layout, lambda local, got: got * 5)
        forward = resources.start("forward", rows, counts, layout, lambda local, got: got * 7)
        assert torch.equal(resources.finish(backward), rows * 5)
        # copy=False: the results in place, in the return buffer, until the next call of the
        # direction (here: overwritten by it).
        view = resources.finish(forward, copy=False)
        assert torch.equal(view, rows * 7)
        assert view.data_ptr() == resources._directions["forward"].returned.data_ptr()
        resources.run("forward", rows, counts, layout, lambda local, got: got * 11)
        assert torch.equal(view, rows * 11)
        with pytest.raises(ValueError, match="direction_name"):
            resources.start("sideways", rows, counts, layout, lambda local, got: None)
        # Without a backward to come (no_grad), the experts keep no activations; a second
        # backward through the same forward is refused with the reason.
        from hyper_parallel.core.multicore.mega_moe import _function
        keeps, swiglu_into = [], _function._swiglu_into
        _function._swiglu_into = lambda *args: (keeps.append(args[-1]), swiglu_into(*args))[1]
        try:
            with torch.no_grad():  # the results are read in place: the same numbers
                inferred = layer(x)
                again = layer(x * 2)
            assert keeps and not any(keeps), keeps
            assert _close(inferred, _dense(layer, dense, x.detach()))
            assert _close(again, _dense(layer, dense, x.detach() * 2))
            keeps.clear()
            loss = layer(x).sum()
            assert keeps and all(keeps), keeps
        finally:
            _function._swiglu_into = swiglu_into
        loss.backward(retain_graph=True)
        with pytest.raises(RuntimeError, match="second backward"):
            loss.backward()
        resources.start("forward", rows, counts, layout, lambda local, got: None)
        calls = resources.stats.calls
    assert resources.closed and resources.stats.calls == calls + 1
    return True


def test_work_between_start_and_finish_fills_the_wait_forward_and_backward(pes):
    assert all(pes(2).run(_work_between_the_halves, timeout=300))


@pytest.mark.parametrize("affinity, pinned, pes, expected", [
    ({0}, True, 2, False),              # the runtime pinned the PE to one core: shares it
    ({0, 1}, True, 2, True),            # ... to two cores of its own
    ({0, 1}, False, 2, False),          # PEs share two cores: one each
    ({0, 1}, False, 4, False),          # PEs outnumber cores (a cpuset of 2 on a big machine)
    (set(range(8)), False, 2, True),    # four cores per PE
    (set(range(8)), False, 8, False),
])
def test_a_host_combine_stream_only_where_the_pe_has_a_second_cpu(monkeypatch, affinity, pinned,
                                                                  pes, expected):
    from hyper_parallel.core.multicore.mega_moe import _resources
    monkeypatch.setattr(_resources.os, "sched_getaffinity", lambda pid: set(affinity))
    assert _resources._cpus_for_a_combine_thread(pes, pinned) is expected


def _router_outputs(rank, size):
    import torch.distributed as dist
    torch.manual_seed(6)
    experts = 2 * size
    with MegaMoEResources(H, experts, 2) as resources:
        layer = _on_device(MegaMoE, H, I, experts, 2, resources=resources)
        assert layer.router_logits is None and layer.tokens_per_expert is None
        dense = layer.dense_weights()
        x = _tokens(rank, 13)
        y = layer(x)
        logits = layer.router_logits  # this call's, in the graph
        assert logits.shape == (13, experts) and logits.requires_grad
        assert torch.allclose(logits, x @ dense["router"].t(), rtol=1e-6, atol=1e-6)
        chosen = logits.topk(2, dim=-1).indices
        assert torch.equal(layer.tokens_per_expert,
                           torch.bincount(chosen.reshape(-1), minlength=experts))
        every = layer.tokens_per_expert.to("cpu", copy=True)  # gloo takes CPU tensors
        dist.all_reduce(every)  # what the count exchange gave, without communicating again
        assert torch.equal(layer.group_tokens_per_expert, every)
        # Aux losses on the kept logits reach the router, as on the dense layer's logits.
        (y.sum() + 0.1 * switch_aux_loss(logits, 2) + 0.01 * router_z_loss(logits)).backward()
        weights = _leaf(dense)
        yr = _dense(layer, weights, x)
        dense_logits = x @ weights["router"].t()
        (yr.sum() + 0.1 * switch_aux_loss(dense_logits, 2)
         + 0.01 * router_z_loss(dense_logits)).backward()
        assert _close(layer.router.grad, weights["router"].grad, atol=1e-5)
        without = _leaf(dense)
        _dense(layer, without, x).sum().backward()
        assert not _close(without["router"].grad, weights["router"].grad, atol=1e-5)
        # The all-to-all layer counts alike.
        torch.manual_seed(6)
        a2a = _on_device(AllToAllMoE, H, I, experts, 2)
        a2a(x)
        assert torch.equal(a2a.tokens_per_expert, layer.tokens_per_expert)
        assert torch.equal(a2a.router_logits, logits.detach())
    return True


def test_the_layer_keeps_its_router_logits_and_token_counts_for_aux_losses(pes):
    assert all(pes(2).run(_router_outputs, timeout=300))


def _checkpointed(rank, size):
    """Activation checkpointing: the layers' forward runs again during the backward (a forward
    call while the next layer's backward call may be pending), on every PE alike."""
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(9)
    experts = 2 * size
    with MegaMoEResources(H, experts, 2) as resources:
        first = _on_device(MegaMoE, H, I, experts, 2, shared_intermediate_size=IS,
                           gated_shared_expert=True, resources=resources)
        second = _on_device(MegaMoE, H, I, experts, 2, shared_intermediate_size=IS,
                            resources=resources)
        dense1, dense2 = first.dense_weights(), second.dense_weights()
        x = _tokens(rank, 11).requires_grad_(True)
        y = checkpoint(second, checkpoint(first, x, use_reentrant=False), use_reentrant=False)
        (y * y).sum().backward()
        xr = x.detach().clone().requires_grad_(True)
        yr = _dense(second, dense2, _dense(first, dense1, xr))
        (yr * yr).sum().backward()
        assert _close(y, yr) and _close(x.grad, xr.grad), (x.grad - xr.grad).abs().max()
        # Both layers' forward ran twice (the recomputation), their backward once.
        assert resources.stats.calls == 6, resources.stats
    return True


def test_activation_checkpointing_recomputes_the_layer_during_the_backward(pes):
    if ON_NPU:  # torch.utils.checkpoint saves the device's autocast state
        pytest.skip("the fake NPU has no AMP module (tests/fake_npu/README.md)")
    assert all(pes(2).run(_checkpointed, timeout=300))


def _heap_too_small(rank, size):
    os.environ["HYPER_PARALLEL_SHMEM_HEAP_SIZE"] = str(1 << 20)
    with shmem.acquire_shmem():
        with MegaMoEResources(64, 2 * size, 2) as resources:
            error = expect_shmem_error("OUT_OF_MEMORY", resources._resize, 4096, 2048)
            message = str(error)
            needed = resources.heap_bytes(4096, 2048)
            assert f"needed_bytes={needed}" in message, message
            assert "set_HYPER_PARALLEL_SHMEM_HEAP_SIZE_to_at_least=" in message, message
            assert needed == 2 * (4096 + 2048) * 64 * 4
            with pytest.raises(shmem.ShmemError, match="too small for the MegaMoE buffers"):
                MegaMoE(64, 32, 2 * size, 2, resources=resources)(_tokens(rank, 1024).repeat(1, 4))
    return True


def test_a_heap_too_small_names_the_bytes_needed(pes):
    assert all(pes(2).run(_heap_too_small, timeout=300))


def _mismatched(rank, size):
    with shmem.acquire_shmem():
        error = expect_shmem_error("COLLECTIVE_MISMATCH", MegaMoEResources,
                                   H + (rank == size - 1), 2 * size, 2)
        assert "field=hidden_size" in str(error) and f"values_by_pe=[{H}, {H + 1}]" in str(error)
        assert shmem.debug_state()["live_allocations"] == [], "nothing left behind"
    return True


def test_mismatched_configuration_fails_on_every_pe(pes):
    assert all(pes(2).run(_mismatched, timeout=300))


def _weights_round_trip(rank, size):
    torch.manual_seed(11)
    layer = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    dense = layer.dense_weights()
    other = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    other.load_dense_weights(**from_qwen2_moe(to_qwen2_moe(dense)))
    again = other.dense_weights()
    assert dense.keys() == again.keys() and all(torch.equal(dense[k], again[k]) for k in dense)
    mixtral = MegaMoE(H, I, 2 * size, 2)
    mixtral.load_dense_weights(**from_mixtral(to_mixtral(dense)))
    assert torch.equal(mixtral.dense_weights()["gate_proj"], dense["gate_proj"])
    assert set(to_mixtral(dense, layout="per_expert")) == {"gate.weight"} | {
        f"experts.{e}.{w}.weight" for e in range(2 * size) for w in ("w1", "w2", "w3")}
    assert set(to_mixtral(dense)) == {"gate.weight", "experts.gate_up_proj", "experts.down_proj"}
    with pytest.raises(ValueError, match=r"gate_proj must be a tensor of shape"):
        layer.load_dense_weights(**{**dense, "gate_proj": dense["gate_proj"][:1]})
    return True


def test_dense_weight_round_trip_through_qwen2_moe_and_mixtral_layouts(pes):
    assert all(pes(2).run(_weights_round_trip, timeout=300))


def _dense_weights_warn_of_nothing(rank, size):
    torch.manual_seed(12)
    layer = _on_device(MegaMoE, H, I, 2 * size, 2)
    try:
        with warnings.catch_warnings():
            # torch 2.13 deprecates all_gather_into_tensor with a FutureWarning
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            dense = layer.dense_weights()
        for name in ("gate_proj", "up_proj", "down_proj"):
            shard = getattr(layer, name).to_local().detach()
            local = slice(rank * layer.local_experts, (rank + 1) * layer.local_experts)
            assert dense[name].shape[0] == 2 * size and torch.equal(dense[name][local], shard)
    finally:
        layer.close()
    return True


def test_dense_weights_gather_with_torch_s_current_call(pes):
    assert all(pes(2).run(_dense_weights_warn_of_nothing, timeout=300))
