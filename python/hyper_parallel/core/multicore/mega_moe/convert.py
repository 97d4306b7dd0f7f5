"""Dense weights of existing MoE blocks, in and out of MegaMoE's load_dense_weights() /
dense_weights() form.

The state_dict key layouts of Hugging Face transformers' sparse MoE blocks, per expert:

  Qwen2-MoE (Qwen2MoeSparseMoeBlock): gate.weight [E, H]; experts.<e>.gate_proj / up_proj /
    down_proj.weight; shared_expert.gate_proj / up_proj / down_proj.weight;
    shared_expert_gate.weight [1, H]. Its config's norm_topk_prob is MegaMoE's normalize_topk
    (False by default there), the shared expert is gated.
  Mixtral (MixtralSparseMoeBlock): gate.weight [E, H]; experts.<e>.w1 (gate) / w3 (up) /
    w2 (down).weight. It renormalises the top-k (normalize_topk=True) and has no shared expert.

    layer.load_dense_weights(**from_qwen2_moe(block.state_dict()))
    block.load_state_dict(to_qwen2_moe(layer.dense_weights()))
"""

from __future__ import annotations

import re

import torch

_QWEN_EXPERT = {"gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}
_MIXTRAL_EXPERT = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}


def _experts(state: dict, names: dict) -> dict:
    indices = sorted({int(m.group(1)) for key in state
                      if (m := re.match(r"experts\.(\d+)\.", key))})
    if not indices or indices != list(range(len(indices))):
        raise ValueError(f"experts.<e> keys must number the experts 0..E-1, but got {indices}")
    return {ours: torch.stack([state[f"experts.{e}.{theirs}.weight"] for e in indices])
            for ours, theirs in names.items()}


def from_qwen2_moe(state: dict) -> dict:
    """load_dense_weights() arguments from a Qwen2-MoE sparse MoE block's state_dict."""
    dense = {"router": state["gate.weight"], **_experts(state, _QWEN_EXPERT)}
    if "shared_expert.gate_proj.weight" in state:
        dense.update(shared_gate_proj=state["shared_expert.gate_proj.weight"],
                     shared_up_proj=state["shared_expert.up_proj.weight"],
                     shared_down_proj=state["shared_expert.down_proj.weight"])
    if "shared_expert_gate.weight" in state:
        dense["shared_expert_gate"] = state["shared_expert_gate.weight"]
    return dense


def to_qwen2_moe(dense: dict) -> dict:
    """A Qwen2-MoE sparse MoE block's state_dict from dense_weights()."""
    state = {"gate.weight": dense["router"]}
    for e in range(dense["gate_proj"].shape[0]):
        for ours, theirs in _QWEN_EXPERT.items():
            state[f"experts.{e}.{theirs}.weight"] = dense[ours][e]
    if "shared_gate_proj" in dense:
        state["shared_expert.gate_proj.weight"] = dense["shared_gate_proj"]
        state["shared_expert.up_proj.weight"] = dense["shared_up_proj"]
        state["shared_expert.down_proj.weight"] = dense["shared_down_proj"]
    if "shared_expert_gate" in dense:
        state["shared_expert_gate.weight"] = dense["shared_expert_gate"]
    return state


def from_mixtral(state: dict) -> dict:
    """load_dense_weights() arguments from a Mixtral sparse MoE block's state_dict."""
    return {"router": state["gate.weight"], **_experts(state, _MIXTRAL_EXPERT)}


def to_mixtral(dense: dict) -> dict:
    """A Mixtral sparse MoE block's state_dict from dense_weights()."""
    state = {"gate.weight": dense["router"]}
    for e in range(dense["gate_proj"].shape[0]):
        for ours, theirs in _MIXTRAL_EXPERT.items():
            state[f"experts.{e}.{theirs}.weight"] = dense[ours][e]
    return state
