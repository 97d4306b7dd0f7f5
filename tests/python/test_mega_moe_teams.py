"""MegaMoE over teams: expert parallel (EP) over a process group smaller than the WORLD, with
data-parallel (DP) replicas of the experts, on 4 PEs (EP = 2 x DP = 2).

The layer against the dense layer in one process and against the all-to-all layer over the
same groups (forward, and the gradients of the input, the router, the shared expert and every
expert weight); every call's collectives on the team (the WORLD's collective sequence does not
move); the buffers' first sizing agreed over the WORLD and no growth afterwards; groups that
cannot be EP groups failing at construction; and the decoder trained at EP = 2 x DP = 2 on both
paths (the four-stage check of test_mega_moe_e2e) and against EP = 4 (the gradient scale)."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import DTensor
import torch.distributed as dist

from helpers import ON_NPU, device, expect_shmem_error
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.mega_moe import (AllToAllMoE, MegaMoE, MegaMoEResources,
                                                    dense_moe, expert_data_parallel_groups)
from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                          make_optimizer, reduce_gradients,
                                                          synthetic_tokens)

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)

H, I, IS = 16, 24, 8
RTOL, ATOL = 1e-5, 1e-6  # test_mega_moe_e2e's tolerance


def _tokens(rank: int, count: int) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(100 + rank)).to(device())


def _grad_out(rank: int, count: int) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(200 + rank)).to(device())


def _close(a, b, rtol: float = RTOL, atol: float = ATOL) -> bool:
    if a is None or b is None:
        a, b = (torch.zeros_like(b) if a is None else a), (torch.zeros_like(a) if b is None else b)
    return torch.allclose(a, b, rtol=rtol, atol=atol)


def _dense(layer, dense: dict, x: torch.Tensor, **routes) -> torch.Tensor:
    return dense_moe(x, dense["router"], dense["gate_proj"], dense["up_proj"], dense["down_proj"],
                     layer.top_k, normalize_topk=layer.normalize_topk,
                     shared_gate_proj=dense.get("shared_gate_proj"),
                     shared_up_proj=dense.get("shared_up_proj"),
                     shared_down_proj=dense.get("shared_down_proj"),
                     shared_expert_gate=dense.get("shared_expert_gate"), **routes)


def _leaf(dense: dict) -> dict:
    return {name: value.clone().requires_grad_(True) for name, value in dense.items()}


def _sequences() -> tuple:
    """(the WORLD's collective sequence, {team slot: its sequence}) on this PE."""
    teams = shmem.debug_state()["teams"]
    world = [row for row in teams if row["slot"] == 0]
    assert world, teams
    return world[0]["sequence"], {row["slot"]: row["sequence"] for row in teams}


def _ep_dp_layer(rank, size, ep_size, tokens_by_rank, chunk_rows):
    torch.set_num_threads(1)
    ep_group, dp_group = expert_data_parallel_groups(ep_size)
    first = rank - rank % ep_size
    ep_ranks = list(range(first, first + ep_size))  # this rank's EP group
    experts = 2 * ep_size
    tokens = tokens_by_rank[rank]
    report = {}
    torch.manual_seed(7)  # the same dense weights on every PE, in every EP group
    with MegaMoEResources(H, experts, 2, chunk_rows=chunk_rows, group=ep_group) as resources:
        team = resources.team
        assert team is not None and tuple(team.pes) == tuple(ep_ranks), team
        assert (resources.pes, resources.rank) == (ep_size, rank - first)
        assert resources.ranks == tuple(ep_ranks)
        layer = MegaMoE(H, I, experts, 2, shared_intermediate_size=IS, gated_shared_expert=True,
                        group=ep_group, resources=resources).to(device())
        assert layer.local_experts == experts // ep_size
        dense = layer.dense_weights()  # gathered over the EP group
        x = _tokens(rank, tokens).requires_grad_(True)
        g = _grad_out(rank, tokens)
        y = layer(x)
        (y * g).sum().backward()
        # The buffers' first sizing took the largest need of every PE of the WORLD (here the
        # other EP group's, when it routes more), lossless: P * R receive rows.
        most = 2 * max(tokens_by_rank)
        assert resources.return_rows == most and resources.capacity == ep_size * most, \
            (resources.return_rows, resources.capacity)
        # The dense layer on this PE's tokens.
        weights = _leaf(dense)
        xr = x.detach().clone().requires_grad_(True)
        yr = _dense(layer, weights, xr)
        (yr * g).sum().backward()
        assert _close(y, yr), (y - yr).abs().max()
        assert _close(x.grad, xr.grad), (x.grad - xr.grad).abs().max()
        assert _close(layer.router.grad, weights["router"].grad, atol=1e-5)
        for name in ("shared_gate_proj", "shared_up_proj", "shared_down_proj",
                     "shared_expert_gate"):
            assert _close(getattr(layer, name).grad, weights[name].grad, atol=1e-5), name
        # Expert weights: gradients from the tokens of this EP group's PEs only, at the owner
        # (the team PE = the rank in the group).
        every = _leaf(dense)
        for source in ep_ranks:
            (_dense(layer, every, _tokens(source, tokens_by_rank[source]))
             * _grad_out(source, tokens_by_rank[source])).sum().backward()
        place = rank - first
        local = slice(place * layer.local_experts, (place + 1) * layer.local_experts)
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert _close(getattr(layer, name).grad.to_local(), every[name].grad[local],
                          atol=1e-5), name
        # The all-to-all layer over the same group, from the same weights.
        torch.manual_seed(7)
        a2a = AllToAllMoE(H, I, experts, 2, shared_intermediate_size=IS,
                          gated_shared_expert=True, group=ep_group).to(device())
        xa = x.detach().clone().requires_grad_(True)
        ya = a2a(xa)
        (ya * g).sum().backward()
        assert _close(y, ya) and _close(x.grad, xa.grad)
        report["bitwise_vs_a2a"] = bool(torch.equal(y, ya) and torch.equal(x.grad, xa.grad)
                                        and all(torch.equal(getattr(layer, n).grad.to_local(),
                                                            getattr(a2a, n).grad.to_local())
                                                for n in ("gate_proj", "up_proj", "down_proj")))
        for name in ("gate_proj", "up_proj", "down_proj"):
            assert _close(getattr(layer, name).grad.to_local(),
                          getattr(a2a, name).grad.to_local(), atol=1e-5), name
        report["worst_vs_dense"] = float((y - yr).detach().abs().max()) if tokens else 0.0
        # A call once the buffers are sized: its collectives run on the team alone (one count
        # exchange per forward; the backward reuses the layout), none on the WORLD.
        world_before, teams_before = _sequences()
        layer.zero_grad()
        x2 = _tokens(rank + 10, tokens).requires_grad_(True)
        (layer(x2) * g).sum().backward()
        world_after, teams_after = _sequences()
        assert world_after == world_before, (world_before, world_after)
        slot = [row["slot"] for row in shmem.debug_state()["teams"]
                if tuple(row["pes"]) == tuple(ep_ranks) and row["slot"] != 0]
        assert len(slot) == 1, shmem.debug_state()["teams"]
        assert teams_after[slot[0]] == teams_before[slot[0]] + 1, (teams_before, teams_after)
        assert resources.stats.calls == 4
        # Over a team the buffers do not grow after their first sizing (that would need every
        # EP group at once): a call that needs more fails on every PE of its team alike, before
        # any row moves, naming max_tokens.
        big = _tokens(rank, 2 * max(tokens_by_rank) + 1)
        error = expect_shmem_error("INVALID_STATE", layer, big)
        assert "max_tokens" in str(error), str(error)
        # ... and the layer still works on the sizes it has.
        with torch.no_grad():
            assert _close(layer(x.detach()), yr.detach())
    assert resources.closed
    assert [row["slot"] for row in shmem.debug_state()["teams"]] in ([], [0]), "team destroyed"
    for group in (ep_group, dp_group):
        dist.destroy_process_group(group)
    return report


def test_ep_over_a_team_matches_the_dense_layer_and_the_all_to_all_layer(pes):
    # EP groups [0, 1] and [2, 3]; PE 2 routes nothing; token counts off the chunk size.
    reports = pes(4).run(_ep_dp_layer, 2, [37, 5, 0, 64], 8, timeout=600)
    assert len(reports) == 4, reports


def test_ep_over_teams_of_one_pe(pes):
    # EP = 1 x DP = 4: every PE its own team, owning every expert.
    assert len(pes(4).run(_ep_dp_layer, 1, [9, 3, 12, 1], 4, timeout=600)) == 4


def _bad_groups(rank, size):
    torch.set_num_threads(1)
    pair = dist.new_group([0, 1])  # ranks 2 and 3 are not in it
    three, alone = dist.new_group([0, 1, 2]), dist.new_group([3])
    first_half, second_half = dist.new_group([0, 1]), dist.new_group([2, 3])
    uneven = three if rank < 3 else alone
    # The layer refuses at construction, locally.
    if rank < 2:
        MegaMoE(H, I, 4, 2, group=pair)  # fits
        with pytest.raises(ValueError, match=r"num_experts must be a multiple of the group "
                                             r"size 2, but got 3"):
            MegaMoE(H, I, 3, 1, group=pair)
    else:
        with pytest.raises(ValueError, match=r"group must be a process group this rank is in"):
            MegaMoE(H, I, 4, 2, group=pair)
    with shmem.acquire_shmem():
        # The resources refuse on every PE alike, naming every PE whose group cannot be one.
        with pytest.raises(ValueError) as caught:
            MegaMoEResources(H, 4, 2, group=pair)
        assert ("group must be on every PE an expert-parallel group: one with this rank in it, "
                "whose size divides num_experts, but got PE 2: a group without this rank; "
                "PE 3: a group without this rank") in str(caught.value), str(caught.value)
        with pytest.raises(ValueError) as caught:
            MegaMoEResources(H, 4, 2, group=uneven)  # 3 does not divide 4
        assert ("PE 0: a group of 3 PEs, which does not divide num_experts (4); PE 1: a group "
                "of 3 PEs, which does not divide num_experts (4); PE 2:") in str(caught.value)
        # EP groups of different sizes make buffers of different sizes: every PE refuses.
        error = expect_shmem_error("COLLECTIVE_MISMATCH", MegaMoEResources, H, 6, 2,
                                   group=uneven)
        assert "field=pes, values_by_pe=[3, 3, 3, 1]" in str(error), str(error)
        state = shmem.debug_state()
        assert state["live_allocations"] == [], "nothing left behind"
        assert [row["slot"] for row in state["teams"]] in ([], [0]), state["teams"]
        # A layer and resources over different groups.
        with MegaMoEResources(H, 4, 2) as world_resources:
            half = first_half if rank < 2 else second_half
            with pytest.raises(ValueError, match=r"resources must be built over the layer's "
                                                 r"group \(global ranks \["):
                MegaMoE(H, I, 4, 2, group=half, resources=world_resources)
    for group in (pair, three, alone, first_half, second_half):
        dist.destroy_process_group(group)
    return True


def test_a_group_that_cannot_be_an_ep_group_fails_at_construction(pes):
    assert all(pes(4).run(_bad_groups, timeout=300))


def _local(t: torch.Tensor) -> torch.Tensor:
    """This PE's shard of a DTensor (an expert weight or its gradient); a plain tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def _within(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(_local(a), _local(b), rtol=RTOL, atol=ATOL)


def _worst(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = _local(a), _local(b)
    return float((a - b).abs().max()) if a.numel() else 0.0


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(_local(a), _local(b))


def _full(t: torch.Tensor) -> torch.Tensor:
    """DTensor.full_tensor() of an expert weight sharded over the WORLD; NPU shards are
    gathered over gloo through host copies (an npu mesh has no backend on the fake NPU)."""
    if not ON_NPU:
        return t.full_tensor()
    shard = t.to_local().cpu().contiguous()
    parts = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, shard)
    return torch.cat(parts).to(device())


def _train_ep_dp(rank, size, ep_size, steps):
    """The four stages of test_mega_moe_e2e at EP = ep_size x DP = size / ep_size (the SHMEM
    path against the all-to-all path over the same groups); at the first step also the loss
    and every gradient against the all-to-all path at EP = WORLD: the same mean-loss gradients
    (the gradient scale; only before the first update, where AdamW's first steps, about
    lr * sign(g), would turn a rounding difference of a gradient near 0 into one of 2 * lr)."""
    torch.set_num_threads(1)
    ep_group, dp_group = expert_data_parallel_groups(ep_size)
    config = DecoderConfig(num_experts=4, layers=2, top_k=2, sequence=24, batch=2)
    shmem_model = MoEDecoder(config, "shmem", seed=21, group=ep_group,
                             dp_group=dp_group).to(device())
    a2a_model = MoEDecoder(config, "a2a", seed=21, group=ep_group, dp_group=dp_group).to(device())
    world_model = MoEDecoder(config, "a2a", seed=21).to(device())  # EP = 4: one expert per PE
    models = (shmem_model, a2a_model, world_model)
    try:
        ours, theirs = shmem_model.state_dict(), a2a_model.state_dict()
        unequal = [name for name in ours if not _equal(ours[name], theirs[name])]
        assert not unequal, f"stage 1: initial parameters differ: {unequal}"
        local = config.num_experts // ep_size
        assert shmem_model.layers[0].moe.gate_proj.to_local().shape[0] == local
        assert shmem_model.layers[0].moe.gate_proj.shape[0] == config.num_experts
        optimizers = [make_optimizer(model) for model in models[:2]]
        named = [dict(model.named_parameters()) for model in models]
        worst = {"loss": 0.0, "logits": 0.0, "grad": 0.0, "param": 0.0, "vs_world_loss": 0.0,
                 "vs_world_grad": 0.0}
        bitwise = True
        place = rank % ep_size
        for step in range(steps):
            tokens = synthetic_tokens(config, rank, step).to(device())
            outputs = []
            for model in models if step == 0 else models[:2]:
                model.zero_grad(set_to_none=False)
                loss, logits = model.loss(tokens)
                loss.backward()
                reduce_gradients(model)
                outputs.append((loss.detach(), logits.detach()))
            (loss_s, logits_s), (loss_a, logits_a) = outputs[:2]
            assert _within(loss_s, loss_a), f"stage 2, step {step}: loss {loss_s} vs {loss_a}"
            assert _within(logits_s, logits_a), \
                f"stage 2, step {step}: logits off by {_worst(logits_s, logits_a)}"
            bitwise = bitwise and torch.equal(logits_s, logits_a)
            worst["loss"] = max(worst["loss"], _worst(loss_s, loss_a))
            worst["logits"] = max(worst["logits"], _worst(logits_s, logits_a))
            if step == 0:
                loss_w = outputs[2][0]
                assert _within(loss_s, loss_w), f"loss {loss_s} vs EP=world {loss_w}"
                worst["vs_world_loss"] = _worst(loss_s, loss_w)
            for name, p in named[0].items():
                q = named[1][name]
                assert (p.grad is None) == (q.grad is None), name
                if p.grad is None:
                    continue
                assert _within(p.grad, q.grad), \
                    f"stage 3, step {step}: grad of {name} off by {_worst(p.grad, q.grad)}"
                bitwise = bitwise and _equal(p.grad, q.grad)
                worst["grad"] = max(worst["grad"], _worst(p.grad, q.grad))
                if step:
                    continue
                # Against EP = world: every expert's gradient is the mean-loss gradient over
                # every PE's tokens there too (gathered over the world, then this PE's block).
                w_grad = named[2][name].grad
                if name.rsplit(".", 1)[-1] in ("gate_proj", "up_proj", "down_proj"):
                    w_grad = _full(w_grad)[place * local:(place + 1) * local]
                assert _within(p.grad, w_grad), \
                    f"grad of {name} off EP=world by {_worst(p.grad, w_grad)}"
                worst["vs_world_grad"] = max(worst["vs_world_grad"], _worst(p.grad, w_grad))
            for optimizer in optimizers:
                optimizer.step()
            for name, p in named[0].items():
                q = named[1][name]
                assert _within(p.detach(), q.detach()), \
                    f"stage 4, step {step}: {name} off by {_worst(p.detach(), q.detach())}"
                bitwise = bitwise and _equal(p.detach(), q.detach())
                worst["param"] = max(worst["param"], _worst(p.detach(), q.detach()))
        stats = shmem_model.resources.stats
        assert stats.calls == 2 * config.layers * steps, stats
        assert a2a_model.communication_s() > 0
        worst["bitwise"] = bitwise
        return worst
    finally:
        for model in models:
            model.close()
        for group in (ep_group, dp_group):
            dist.destroy_process_group(group)


def test_training_ep_2_by_dp_2_matches_the_all_to_all_path_and_ep_world(pes):
    results = pes(4).run(_train_ep_dp, 2, 3, timeout=600)
    assert len(results) == 4 and all(set(worst) >= {"loss", "logits", "grad", "param"}
                                     for worst in results), results


def _shmem_reductions_match_gloo(rank, size):
    """EP 2 x DP 2: one backward, the gradients reduced on shmem.all_reduce (the default for a
    model built for SHMEM) and, from the same gradients, over gloo: within 1e-6 of each other,
    and the SHMEM ones bitwise the same on every PE that holds them (the dense ones on every PE,
    an expert's on its DP group)."""
    torch.set_num_threads(1)
    ep_group, dp_group = expert_data_parallel_groups(2)
    config = DecoderConfig(num_experts=4, layers=2, top_k=2, sequence=24, batch=2)
    models = [MoEDecoder(config, "shmem", seed=21, group=ep_group, dp_group=dp_group).to(device())
              for _ in range(2)]
    try:
        assert models[0].gradient_sum is not None  # on the CANN fake too
        tokens = synthetic_tokens(config, rank, 0).to(device())
        for model, over in zip(models, (None, "gloo")):
            model.zero_grad(set_to_none=False)
            loss, _ = model.loss(tokens)
            loss.backward()
            reduce_gradients(model, over=over)
        worst = 0.0
        experts = {id(p) for p in models[0].expert_parameters()}
        for (name, p), q in zip(models[0].named_parameters(), models[1].parameters()):
            a, b = _local(p.grad), _local(q.grad)
            scale = max(1.0, float(b.abs().max()))
            worst = max(worst, float((a - b).abs().max()) / scale)
            assert float((a - b).abs().max()) <= 1e-6 * scale, (name, float((a - b).abs().max()))
            group = dp_group if id(p) in experts else None
            a = a.cpu()  # gloo takes CPU tensors
            copies = [torch.empty_like(a) for _ in range(dist.get_world_size(group))]
            dist.all_gather(copies, a.contiguous(), group=group)
            assert all(torch.equal(c, a) for c in copies), f"{name} differs across PEs"
        with pytest.raises(ValueError, match="over must be 'gloo', or 'shmem'"):
            reduce_gradients(models[0], over="nccl")
        return worst
    finally:
        for model in models:
            model.close()
        for group in (ep_group, dp_group):
            dist.destroy_process_group(group)


def test_gradients_reduced_on_shmem_match_gloo_and_agree_bitwise(pes):
    worst = pes(4).run(_shmem_reductions_match_gloo, timeout=600)
    assert all(w <= 1e-6 for w in worst), worst


def _dp_group_required(rank, size):
    ep_group, dp_group = expert_data_parallel_groups(2)
    world = dist.new_group(list(range(size)))
    config = DecoderConfig(num_experts=4, layers=1)
    with pytest.raises(ValueError, match="dp_group must be the data-parallel group"):
        MoEDecoder(config, "a2a", group=ep_group)
    with pytest.raises(ValueError, match="dp_group must have world / EP = 2 ranks"):
        MoEDecoder(config, "a2a", group=ep_group, dp_group=world)
    with pytest.raises(ValueError, match="dp_group must be None"):
        MoEDecoder(config, "a2a", dp_group=dp_group)
    with pytest.raises(ValueError, match="ep_size must be a positive divisor"):
        expert_data_parallel_groups(3)
    for group in (ep_group, dp_group, world):
        dist.destroy_process_group(group)
    return True


def test_the_model_needs_the_dp_group_of_its_experts(pes):
    assert all(pes(4).run(_dp_group_required, timeout=300))
