"""Hugging Face transformers models on MegaMoE: every sparse MoE block of a transformers 5.x
Qwen2-MoE, Qwen3-MoE or Mixtral model swapped in place for a MegaMoE layer, and back.

    from hyper_parallel.core.multicore.mega_moe import hf
    layers = hf.replace_moe_blocks(model, group=None)  # in place; the new layers, in order
    out = model(input_ids, labels=labels, output_router_logits=True)  # loss, aux_loss as before
    state = hf.to_hf_state_dict(model)  # collective: a state dict transformers loads
    hf.close(layers)                    # collective: every layer's resources

Each new layer carries the block's configuration and weights: hidden, intermediate and expert
sizes from the weights (the fused 5.x layout, or the 4.x per-expert one: convert.py), top-k and
the renormalisation of the top-k weights (Qwen's norm_topk_prob; Mixtral always) from the
block's router, Qwen2-MoE's shared expert and its sigmoid gate, the weights' dtype. It routes
with the block's own router module (transformers' TopKRouter, kept as the layer's `gate`), so
the routing is the model's to the bit and transformers still records the router logits from
it (output_router_logits=True: the model's aux_loss and loss as the unmodified model's); the
layer also keeps them (layer.router_logits) for mega_moe.losses. Its experts are the group's:
each PE keeps its shard (group: as MegaMoE's; None: the WORLD), and every PE of the group
must run the model alike (each on its own batch), as for any MegaMoE layer.

transformers is imported only when a function here is called.
"""

from __future__ import annotations

import importlib

from ..shmem.errors import value_error
from ._layer import MegaMoE
from .convert import from_mixtral, from_qwen2_moe, to_mixtral, to_qwen2_moe

# config.model_type -> (transformers module, sparse MoE block class, from_, to_)
_FAMILIES = {
    "qwen2_moe": ("transformers.models.qwen2_moe.modeling_qwen2_moe", "Qwen2MoeSparseMoeBlock",
                  from_qwen2_moe, to_qwen2_moe),
    "qwen3_moe": ("transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3MoeSparseMoeBlock",
                  from_qwen2_moe, to_qwen2_moe),
    "mixtral": ("transformers.models.mixtral.modeling_mixtral", "MixtralSparseMoeBlock",
                from_mixtral, to_mixtral),
}
_LAYER_KEYS = ("gate_proj", "up_proj", "down_proj", "shared_gate_proj", "shared_up_proj",
               "shared_down_proj", "shared_expert_gate")


def _family(model) -> tuple:
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        # 4.x's blocks return (hidden, router_logits), which a MegaMoE layer does not.
        raise RuntimeError(f"mega_moe.hf swaps the blocks of transformers 5.x, but transformers "
                           f"{transformers.__version__} is installed (5.x's fused layout is the "
                           f"one its blocks have; 4.x state dicts convert with "
                           f"mega_moe.from_qwen2_moe/from_mixtral)")
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in _FAMILIES:
        raise value_error("mega_moe", "model", "a transformers Qwen2-MoE, Qwen3-MoE or Mixtral "
                                      "model (config.model_type qwen2_moe, qwen3_moe or mixtral)",
                                      f"{type(model).__name__} of model_type {model_type!r}")
    module, block, convert_from, convert_to = _FAMILIES[model_type]
    return model_type, getattr(importlib.import_module(module), block), convert_from, convert_to


def _layer_for(block, model_type, convert_from, group, layer_class, config) -> MegaMoE:
    # A copy: the layer's construction initialises the router it is given (the block's).
    state = {key: value.detach().clone() for key, value in block.state_dict().items()}
    dense = convert_from(state)
    experts, inter, hidden = dense["gate_proj"].shape
    gate = block.gate
    act = getattr(config, "hidden_act", "silu")
    if act != "silu":
        raise value_error("mega_moe", "config.hidden_act", "'silu' (MegaMoE's experts are SwiGLU)",
                                      repr(act))
    if model_type == "mixtral" and getattr(config, "router_jitter_noise", 0):
        raise value_error("mega_moe", "config.router_jitter_noise", "0 (MegaMoE does not jitter "
                                      "the router's input)", config.router_jitter_noise)
    shared = dense["shared_gate_proj"].shape[0] if "shared_gate_proj" in dense else 0
    layer = layer_class(hidden, inter, experts, gate.top_k, shared_intermediate_size=shared,
                        gated_shared_expert="shared_expert_gate" in dense,
                        normalize_topk=bool(getattr(gate, "norm_topk_prob", True)), group=group,
                        dtype=dense["gate_proj"].dtype, gate=gate)
    layer.load_dense_weights(**dense)
    return layer


def replace_moe_blocks(model, group=None, *, layer_class=MegaMoE) -> list:
    """Replaces, in place, every sparse MoE block of `model` (a transformers 5.x Qwen2-MoE,
    Qwen3-MoE or Mixtral model, on CPU) with a MegaMoE layer over `group` carrying the block's
    configuration and weights, and returns the new layers in the model's order. Every layer is
    made before any block is replaced (a refused block replaces none). The layers' resources
    are made at their first forward (collective) and freed by close() on each, or close(layers);
    layer_class=AllToAllMoE makes the reference layers (all_to_all_single) instead.

    ValueError: a model of another kind or without sparse MoE blocks, a block's keys unknown or
    missing (named), an activation other than silu, Mixtral's router jitter."""
    model_type, block_class, convert_from, _ = _family(model)
    blocks = [(name, module) for name, module in model.named_modules()
              if isinstance(module, block_class)]
    if not blocks:
        raise value_error("mega_moe", "model", f"a model with {block_class.__name__} blocks",
                                      f"{type(model).__name__} with none")
    layers = [_layer_for(block, model_type, convert_from, group, layer_class, model.config)
              for _, block in blocks]
    for (name, _), layer in zip(blocks, layers):
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, layer)
    return layers


def to_hf_state_dict(model) -> dict:
    """Collective over every swapped layer's group: the model's state_dict with each MegaMoE
    layer's weights gathered and written back as its block's keys, in transformers 5.x's fused
    layout (a state dict the unmodified model loads with load_state_dict; tied weights as
    model.state_dict() gives them)."""
    _, _, _, convert_to = _family(model)
    state = model.state_dict()
    for name, module in model.named_modules():
        if not isinstance(module, MegaMoE):
            continue
        prefix = f"{name}." if name else ""
        for key in _LAYER_KEYS + ("router",):
            state.pop(prefix + key, None)
        for key, value in convert_to(module.dense_weights()).items():
            state[prefix + key] = value
    return state


def close(layers) -> None:
    """Collective: closes every layer (its resources), in order."""
    for layer in layers:
        layer.close()

