"""mega_moe.hf on 1, 2 and 4 PEs (EP groups of 2 there): tiny transformers 5.x Qwen2-MoE, Qwen3-MoE and Mixtral models
built from their configs (no download), their sparse MoE blocks swapped for MegaMoE layers,
against the unmodified model (logits, loss, aux_loss, router logits and every gradient, the
experts' summed over the PEs) and against the same swap on the all-to-all layer; the reverse
conversion loaded by a fresh model; bf16 models, autocast and model.to(torch.bfloat16) through
the swap; the 4.x per-expert layout; the Switch aux loss and z-loss against transformers' and by
hand; keys, models and configs it refuses, by name."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch.distributed.tensor import DTensor

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (scripts/setup_deps.sh installs "
    "transformers==5.23.0, which these tests need)")
if int(transformers.__version__.split(".")[0]) < 5:
    pytest.skip(f"mega_moe.hf swaps transformers 5.x blocks, but transformers "
                f"{transformers.__version__} is installed (setup_deps.sh pins 5.23.0)",
                allow_module_level=True)

from hyper_parallel.core.multicore import shmem  # noqa: E402
from hyper_parallel.core.multicore.mega_moe import (  # noqa: E402
    AllToAllMoE, MegaMoE, from_mixtral, from_qwen2_moe, hf, router_z_loss, switch_aux_loss,
    to_mixtral, to_qwen2_moe)

LAYERS, EXPERTS, TOP_K = 2, 4, 2


def _model(family: str, seed: int = 0, **overrides):
    """A tiny model of `family` from its config, the same on every PE for the same seed."""
    common = dict(vocab_size=64, hidden_size=16, num_hidden_layers=LAYERS, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=64, initializer_range=0.2,
                  num_experts_per_tok=TOP_K, router_aux_loss_coef=0.01)
    if family == "qwen2_moe":
        common.update(intermediate_size=32, moe_intermediate_size=24,
                      shared_expert_intermediate_size=8, num_experts=EXPERTS)
        config_class, cls = transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM
    elif family == "qwen3_moe":
        common.update(intermediate_size=32, moe_intermediate_size=24, num_experts=EXPERTS,
                      norm_topk_prob=True)
        config_class, cls = transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM
    else:
        common.update(intermediate_size=24, num_local_experts=EXPERTS)
        config_class, cls = transformers.MixtralConfig, transformers.MixtralForCausalLM
    config = config_class(**{**common, **overrides})
    torch.manual_seed(seed)
    return cls(config).eval()


def _batch(rank: int) -> torch.Tensor:
    return torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(300 + rank))


def _close(a, b, rtol=1e-5, atol=1e-6) -> bool:
    return torch.allclose(a, b, rtol=rtol, atol=atol)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This PE's shard of an expert weight's gradient (a DTensor Shard(0) over the EP group)."""
    return t.to_local() if isinstance(t, DTensor) else t


def _expert_grads(model, rank: int, size: int, inter: int) -> dict:
    """The unmodified model's expert gradients, summed over every PE's batch (an expert's
    gradient at its owner sums every PE's tokens), as this PE's shard in MegaMoE's names."""
    local = EXPERTS // size
    shard = slice(rank * local, (rank + 1) * local)
    out = {}
    for index, layer in enumerate(model.model.layers):
        experts = layer.mlp.experts
        gate_up, down = (torch.zeros_like(p) if p.grad is None else p.grad.clone()
                         for p in (experts.gate_up_proj, experts.down_proj))
        if size > 1:
            torch.distributed.all_reduce(gate_up)
            torch.distributed.all_reduce(down)
        out[index] = {"gate_proj": gate_up[shard, :inter], "up_proj": gate_up[shard, inter:],
                      "down_proj": down[shard]}
    return out


def _swap_against_the_model(rank, size, family):
    reference = _model(family)
    model, a2a_model = copy.deepcopy(reference), copy.deepcopy(reference)
    layers = hf.replace_moe_blocks(model)
    a2a_layers = hf.replace_moe_blocks(a2a_model, layer_class=AllToAllMoE)
    try:
        assert len(layers) == LAYERS and all(type(layer) is MegaMoE for layer in layers)
        assert all(type(layer) is AllToAllMoE for layer in a2a_layers)
        for index, layer in enumerate(layers):
            assert model.model.layers[index].mlp is layer
            assert layer.top_k == TOP_K and layer.num_experts == EXPERTS and layer.pes == size
            # Qwen2-MoE's norm_topk_prob defaults to False; this Qwen3-MoE sets it; Mixtral: True.
            assert layer.normalize_topk is (family != "qwen2_moe")
            assert layer.shared_intermediate_size == (8 if family == "qwen2_moe" else 0)
            assert layer.gated_shared_expert is (family == "qwen2_moe")
            # The block's own router module routes (and holds the router's weight).
            assert type(layer.gate) is type(reference.model.layers[index].mlp.gate)
            assert not hasattr(layer, "router")
        inter = layers[0].intermediate_size
        ids = _batch(rank)
        out = model(ids, labels=ids, output_router_logits=True)
        ref = reference(ids, labels=ids, output_router_logits=True)
        a2a = a2a_model(ids, labels=ids, output_router_logits=True)
        assert _close(out.logits, ref.logits), (out.logits - ref.logits).abs().max()
        assert _close(out.loss, ref.loss) and _close(out.aux_loss, ref.aux_loss), (
            out.loss, ref.loss, out.aux_loss, ref.aux_loss)
        assert out.aux_loss.item() > 0
        # transformers recorded the router logits from the layers' gates: the layers' own.
        assert len(out.router_logits) == LAYERS
        for index, layer in enumerate(layers):
            assert out.router_logits[index] is layer.router_logits
            assert _close(layer.router_logits, ref.router_logits[index])
            chosen = layer.router_logits.float().softmax(-1).topk(TOP_K, -1).indices
            assert torch.equal(layer.tokens_per_expert,
                               torch.bincount(chosen.reshape(-1), minlength=EXPERTS))
            assert torch.equal(layer.tokens_per_expert, a2a_layers[index].tokens_per_expert)
            assert int(layer.group_tokens_per_expert.sum()) == size * ids.numel() * TOP_K
        # The Switch aux loss on the recorded logits is transformers' number.
        assert _close(switch_aux_loss(out.router_logits, TOP_K), out.aux_loss)
        # The all-to-all layer, swapped alike, agrees.
        assert _close(out.logits, a2a.logits) and _close(out.aux_loss, a2a.aux_loss)
        # Every gradient: the dense ones (this PE's batch) and the experts' (every PE's).
        out.loss.backward()
        ref.loss.backward()
        a2a.loss.backward()
        dense_names = ["model.embed_tokens.weight", "lm_head.weight",
                       "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.gate.weight",
                       "model.layers.0.mlp.gate.weight"]
        if family == "qwen2_moe":
            dense_names += ["model.layers.0.mlp.shared_expert.gate_proj.weight",
                            "model.layers.1.mlp.shared_expert_gate.weight"]
        ours, theirs = dict(model.named_parameters()), dict(reference.named_parameters())
        mapped = {"shared_expert.gate_proj.weight": "shared_gate_proj",
                  "shared_expert_gate.weight": "shared_expert_gate"}
        for name in dense_names:
            mine = name
            for hf_name, our_name in mapped.items():
                mine = mine.replace(hf_name, our_name)
            assert _close(ours[mine].grad, theirs[name].grad, atol=1e-5), name
        expected = _expert_grads(reference, rank, size, inter)
        for index, layer in enumerate(layers):
            for name, grad in expected[index].items():
                mine = _local(getattr(layer, name).grad)
                assert _close(mine, grad, atol=1e-5), (index, name)
                assert _close(mine, _local(getattr(a2a_layers[index], name).grad),
                              atol=1e-5), (index, name)
    finally:
        hf.close(layers)
        hf.close(a2a_layers)
    assert shmem.debug_state()["live_allocations"] == []
    return float((out.logits - ref.logits).abs().max())


@pytest.mark.parametrize("family", ["qwen2_moe", "qwen3_moe", "mixtral"])
@pytest.mark.parametrize("size", [1, 2])
def test_a_swapped_model_matches_the_model_and_the_all_to_all_swap(pes, size, family):
    pes(size).run(_swap_against_the_model, family, timeout=300)


def _swap_over_a_team(rank, size):
    """4 PEs, the blocks swapped over EP groups of 2 (expert_data_parallel_groups): the same
    logits, loss and aux_loss as the unmodified model, each expert's gradient summed over its
    EP group's batches, and the reverse conversion (gathered over the EP group) equal to the
    model's own state dict."""
    import torch.distributed as dist

    from hyper_parallel.core.multicore.mega_moe import expert_data_parallel_groups

    ep, dp = expert_data_parallel_groups(2)
    reference = _model("qwen2_moe")
    model = copy.deepcopy(reference)
    layers = hf.replace_moe_blocks(model, group=ep)
    try:
        assert all(layer.pes == 2 for layer in layers)
        ids = _batch(rank)
        out = model(ids, labels=ids, output_router_logits=True)
        ref = reference(ids, labels=ids, output_router_logits=True)
        assert _close(out.logits, ref.logits), (out.logits - ref.logits).abs().max()
        assert _close(out.loss, ref.loss) and _close(out.aux_loss, ref.aux_loss)
        out.loss.backward()
        ref.loss.backward()
        ep_rank = dist.get_rank(ep)
        local = EXPERTS // 2
        shard = slice(ep_rank * local, (ep_rank + 1) * local)
        inter = layers[0].intermediate_size
        for index, layer in enumerate(layers):
            experts = reference.model.layers[index].mlp.experts
            gate_up, down = experts.gate_up_proj.grad.clone(), experts.down_proj.grad.clone()
            dist.all_reduce(gate_up, group=ep)  # an expert's owner sums its EP group's tokens
            dist.all_reduce(down, group=ep)
            expected = {"gate_proj": gate_up[shard, :inter], "up_proj": gate_up[shard, inter:],
                        "down_proj": down[shard]}
            for name, grad in expected.items():
                assert _close(_local(getattr(layer, name).grad), grad, atol=1e-5), (index, name)
        state = hf.to_hf_state_dict(model)
        for name, value in reference.state_dict().items():
            assert torch.equal(state[name], value), name
    finally:
        hf.close(layers)
        dist.destroy_process_group(ep)
        dist.destroy_process_group(dp)
    return True


def test_a_swap_over_ep_groups_smaller_than_the_world(pes):
    assert all(pes(4).run(_swap_over_a_team, timeout=300))


def _reverse(rank, size, family):
    reference = _model(family)
    model = copy.deepcopy(reference)
    layers = hf.replace_moe_blocks(model)
    try:
        state = hf.to_hf_state_dict(model)  # collective: the experts gathered
        assert set(state) == set(reference.state_dict())
        fresh = _model(family, seed=1)  # other weights, until it loads the state
        fresh.load_state_dict(state)  # strict: every key, no other
        for name, value in reference.state_dict().items():
            assert torch.equal(fresh.state_dict()[name], value), name
        ids = _batch(rank)
        assert _close(fresh(ids).logits, model(ids).logits)
    finally:
        hf.close(layers)
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_the_reverse_conversion_gives_a_state_dict_transformers_loads(pes, size):
    assert all(pes(size).run(_reverse, "qwen2_moe", timeout=300))


def test_the_reverse_conversion_of_mixtral_on_two_pes(pes):
    assert all(pes(2).run(_reverse, "mixtral", timeout=300))


def _bf16(rank, size):
    """A bf16 model swaps into bf16 layers; an fp32 swap converted with model.to(bf16) and one
    run under autocast agree with the unmodified model's to bf16's rounding."""
    reference = _model("qwen2_moe")
    ids = _batch(rank)
    ref32 = reference(ids).logits
    half = copy.deepcopy(reference).to(torch.bfloat16)
    swapped = copy.deepcopy(reference)
    layers = hf.replace_moe_blocks(swapped)
    half_layers = hf.replace_moe_blocks(copy.deepcopy(half))
    try:
        assert all(layer.dtype == torch.bfloat16 for layer in half_layers)  # the weights' dtype
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = swapped(ids).logits
            auto_ref = reference(ids).logits
        assert torch.allclose(auto.float(), auto_ref.float(), rtol=5e-2, atol=5e-2), (
            (auto.float() - auto_ref.float()).abs().max())
        swapped.to(torch.bfloat16)  # converts the layers and their own buffers
        assert all(layer.dtype == torch.bfloat16 and layer.gate.weight.dtype == torch.bfloat16
                   for layer in layers)
        out = swapped(ids).logits
        assert out.dtype == torch.bfloat16 and layers[0].resources.dtype == torch.bfloat16
        expected = half(ids).logits.float()
        assert torch.allclose(out.float(), expected, rtol=5e-2, atol=5e-2), (
            (out.float() - expected).abs().max())
        assert (out.float() - ref32).abs().max() > 1e-4  # it did compute in bf16
    finally:
        hf.close(layers)
        hf.close(half_layers)
    assert shmem.debug_state()["live_allocations"] == []
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_bf16_models_and_autocast_through_the_swap(pes, size):
    assert all(pes(size).run(_bf16, timeout=300))


def test_the_per_expert_layout_still_loads_and_keys_are_named():
    block = _model("qwen2_moe").model.layers[0].mlp
    fused = {key: value.detach() for key, value in block.state_dict().items()}
    dense = from_qwen2_moe(fused)
    inter = dense["gate_proj"].shape[1]
    assert torch.equal(dense["gate_proj"], fused["experts.gate_up_proj"][:, :inter])  # gate first
    assert torch.equal(dense["up_proj"], fused["experts.gate_up_proj"][:, inter:])
    per_expert = to_qwen2_moe(dense, layout="per_expert")
    assert "experts.3.up_proj.weight" in per_expert and "experts.gate_up_proj" not in per_expert
    again = from_qwen2_moe(per_expert)
    assert again.keys() == dense.keys() and all(torch.equal(again[k], dense[k]) for k in dense)
    assert to_qwen2_moe(dense).keys() == fused.keys()  # fused by default: the block loads it
    block.load_state_dict(to_qwen2_moe(dense))
    # Mixtral's per-expert names are w1 (gate), w3 (up), w2 (down).
    mixtral = _model("mixtral").model.layers[0].mlp.state_dict()
    dense = from_mixtral(mixtral)
    legacy = to_mixtral(dense, layout="per_expert")
    assert set(legacy) == {"gate.weight"} | {f"experts.{e}.{w}.weight" for e in range(EXPERTS)
                                             for w in ("w1", "w2", "w3")}
    assert torch.equal(from_mixtral(legacy)["up_proj"], dense["up_proj"])
    # A whole model's keys: named, with the way to take one block's.
    whole = _model("qwen2_moe").state_dict()
    with pytest.raises(ValueError, match=r"keys not known in either layout .*"
                       r"lm_head.weight, model.embed_tokens.weight.* and \d+ more "
                       r"\(a whole model's keys\? pass one block's"):
        from_qwen2_moe(whole)
    missing = dict(legacy)
    del missing["experts.1.w3.weight"]
    with pytest.raises(ValueError, match=r"Mixtral block keys missing: experts.1.w3.weight$"):
        from_mixtral(missing)
    with pytest.raises(ValueError, match=r"keys missing: experts.down_proj$"):
        from_mixtral({k: v for k, v in mixtral.items() if k != "experts.down_proj"})
    with pytest.raises(ValueError, match=r"keys not known .*: experts.0.gate_proj.weight, "
                       r"shared_expert_gate.weight"):
        from_mixtral({**mixtral, "experts.0.gate_proj.weight": dense["gate_proj"][0],
                      "shared_expert_gate.weight": torch.zeros(1, 16)})
    with pytest.raises(ValueError, match=r"mix the fused layout"):
        from_mixtral({**mixtral, "experts.0.w1.weight": dense["gate_proj"][0]})


def test_the_switch_aux_loss_and_the_z_loss_and_their_normalisation():
    E, k = 6, 2
    # Balanced: token t prefers experts t and t+1 alike; every P_i is 1/E and f_i is k/E.
    logits = torch.zeros(E, E)
    for t in range(E):
        logits[t, t] = logits[t, (t + 1) % E] = 3.0
    assert math.isclose(switch_aux_loss(logits, k).item(), k, rel_tol=1e-6)
    assert math.isclose(switch_aux_loss(logits, k, normalize="one").item(), 1.0, rel_tol=1e-6)
    # Unbalanced: every token to experts 0 and 1; by hand: E * sum f_i P_i.
    skewed = torch.randn(10, E, generator=torch.Generator().manual_seed(1))
    skewed[:, :2] += 10.0
    probs = skewed.softmax(-1)
    by_hand = E * (probs.mean(0)[:2].sum())  # f_0 = f_1 = 1
    assert math.isclose(switch_aux_loss(skewed, k).item(), by_hand.item(), rel_tol=1e-6)
    assert switch_aux_loss(skewed, k).item() > k
    # Layers taken together, and transformers' own function on the same logits.
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func
    parts = (logits, skewed)
    assert math.isclose(switch_aux_loss(parts, k).item(),
                        float(load_balancing_loss_func(parts, E, k)), rel_tol=1e-6)
    # The gradient reaches the logits through P_i.
    leaf = skewed.clone().requires_grad_(True)
    switch_aux_loss(leaf, k).backward()
    assert leaf.grad.abs().sum() > 0
    # z-loss: mean logsumexp^2.
    assert math.isclose(router_z_loss(torch.zeros(5, E)).item(), math.log(E) ** 2, rel_tol=1e-6)
    assert math.isclose(router_z_loss(skewed).item(),
                        skewed.logsumexp(-1).square().mean().item(), rel_tol=1e-6)
    with pytest.raises(ValueError, match=r"normalize must be 'top_k' or 'one'"):
        switch_aux_loss(logits, k, normalize="mean")
    with pytest.raises(ValueError, match=r"top_k must be an int in \[1, 6\]"):
        switch_aux_loss(logits, 7)
    with pytest.raises(ValueError, match=r"router_logits must be a \[T, E\] tensor"):
        router_z_loss(())


def _refusals(rank, size):
    with pytest.raises(ValueError, match=r"model must be a transformers Qwen2-MoE, Qwen3-MoE or "
                       r"Mixtral model .* but got Linear of model_type None"):
        hf.replace_moe_blocks(torch.nn.Linear(2, 2))
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1))
    with pytest.raises(ValueError, match=r"but got LlamaForCausalLM of model_type 'llama'"):
        hf.replace_moe_blocks(llama)
    dense_only = _model("qwen2_moe", mlp_only_layers=[0, 1])
    with pytest.raises(ValueError, match=r"a model with Qwen2MoeSparseMoeBlock blocks"):
        hf.replace_moe_blocks(dense_only)
    gelu = _model("qwen3_moe", hidden_act="gelu")
    with pytest.raises(ValueError, match=r"config.hidden_act must be 'silu'"):
        hf.replace_moe_blocks(gelu)
    jitter = _model("mixtral", router_jitter_noise=0.1)
    with pytest.raises(ValueError, match=r"config.router_jitter_noise must be 0"):
        hf.replace_moe_blocks(jitter)
    # Nothing was replaced, and a group that cannot be an EP group replaces nothing either.
    assert all(type(layer.mlp).__name__ == "MixtralSparseMoeBlock" for layer in jitter.model.layers)
    odd = _model("mixtral", num_local_experts=3)
    if size > 1:
        with pytest.raises(ValueError, match=r"num_experts"):
            hf.replace_moe_blocks(odd)
        assert all(type(layer.mlp).__name__ == "MixtralSparseMoeBlock"
                   for layer in odd.model.layers)
    return True


def test_models_and_configs_it_cannot_swap_are_refused_by_name(pes):
    assert all(pes(2).run(_refusals, timeout=300))
