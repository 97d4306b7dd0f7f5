"""Dense weights of existing MoE blocks, in and out of MegaMoE's load_dense_weights() /
dense_weights() form.

The state_dict keys of Hugging Face transformers' sparse MoE blocks (one block's: the keys
under its prefix, e.g. model.layers.0.mlp.):

  transformers 5.x, the fused layout (Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock,
    MixtralSparseMoeBlock): gate.weight [E, H] (the router); experts.gate_up_proj [E, 2I, H],
    each expert's gate rows first, then its up rows; experts.down_proj [E, H, I].
  transformers 4.x, per expert: Qwen2-MoE and Qwen3-MoE experts.<e>.gate_proj / up_proj /
    down_proj.weight; Mixtral experts.<e>.w1 (gate) / w3 (up) / w2 (down).weight.
  Qwen2-MoE's shared expert, either way: shared_expert.gate_proj / up_proj / down_proj.weight
    and its gate shared_expert_gate.weight [1, H]. Qwen3-MoE and Mixtral have none.

from_qwen2_moe (also Qwen3-MoE's) and from_mixtral read either layout and raise
shmem.ShmemValueError (a ValueError too) naming every key they do not know and every key that
is missing; to_qwen2_moe and to_mixtral
write the fused layout (layout="per_expert": the 4.x one), which a transformers 5.x block
loads with load_state_dict. The routing is the config's, not the weights': MegaMoE's
normalize_topk is Qwen's norm_topk_prob (False by default there); Mixtral renormalises
(True). mega_moe.hf swaps whole models' blocks with these.

    layer.load_dense_weights(**from_qwen2_moe(block.state_dict()))
    block.load_state_dict(to_qwen2_moe(layer.dense_weights()))
"""

from __future__ import annotations

import re

import torch

from ..shmem.errors import ShmemTypeError, ShmemValueError

_PER_EXPERT = {"qwen": {"gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"},
               "mixtral": {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}}
_FUSED = ("experts.gate_up_proj", "experts.down_proj")
_SHARED = {"shared_gate_proj": "shared_expert.gate_proj.weight",
           "shared_up_proj": "shared_expert.up_proj.weight",
           "shared_down_proj": "shared_expert.down_proj.weight"}
_SHARED_GATE = ("shared_expert_gate", "shared_expert_gate.weight")
_SHARED_ALL = (*_SHARED.items(), _SHARED_GATE)  # (ours, theirs): the shared expert and its gate
_EXPERT_KEY = re.compile(r"experts\.(\d+)\.(\w+)\.weight")
_SHOWN = 8  # keys named in a message, at most


def _names(keys) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(keys[:_SHOWN]) + more


def _refused(message: str, kind: type = ShmemValueError):
    """A state_dict or layout that cannot be converted: INVALID_ARGUMENT (docs/api.md, "Errors
    and logs")."""
    return kind.make("INVALID_ARGUMENT", "mega_moe", "validate", message)


def _from_block(state: dict, family: str, block: str, shared: bool) -> dict:
    """load_dense_weights() arguments from one block's state_dict, either layout."""
    if not isinstance(state, dict):
        raise _refused(f"{block}'s state_dict must be a dict, but got {type(state).__name__}",
                       ShmemTypeError)
    keys = set(state)
    names = _PER_EXPERT[family]
    per_expert = {key: m for key in keys if (m := _EXPERT_KEY.fullmatch(key))
                  and m.group(2) in names.values()}
    fused = keys & set(_FUSED)
    known = {"gate.weight"} | fused | set(per_expert)
    if shared:
        known |= keys & (set(_SHARED.values()) | {_SHARED_GATE[1]})
    unknown = keys - known
    if unknown:
        hint = ""
        if any(key.endswith(".gate.weight") for key in unknown):
            hint = (" (a whole model's keys? pass one block's, without its prefix: {k[len(p):]: v "
                    "for k, v in state.items() if k.startswith(p)} for p = 'model.layers.0.mlp.')")
        raise _refused(f"{block} keys not known in either layout (5.x fused: gate.weight, "
                       f"{', '.join(_FUSED)}; 4.x per expert: experts.<e>."
                       f"{{{','.join(names.values())}}}.weight"
                       f"{'; the shared expert' if shared else ''}): {_names(unknown)}{hint}")
    if fused and per_expert:
        raise _refused(f"{block} keys mix the fused layout ({_names(fused)}) and the "
                       f"per-expert one ({_names(per_expert)})")
    dense = {}
    if per_expert:
        indices = sorted({int(m.group(1)) for m in per_expert.values()})
        experts = indices[-1] + 1
        required = {f"experts.{e}.{theirs}.weight" for e in range(experts)
                    for theirs in names.values()}
    else:
        required = set(_FUSED)
    required.add("gate.weight")
    if shared and keys & set(_SHARED.values()):  # the shared expert: all of it or none
        required |= set(_SHARED.values())
    missing = required - keys
    if missing:
        raise _refused(f"{block} keys missing: {_names(missing)}")
    dense["router"] = state["gate.weight"]
    if per_expert:
        for ours, theirs in names.items():
            dense[ours] = torch.stack([state[f"experts.{e}.{theirs}.weight"]
                                       for e in range(experts)])
    else:
        gate_up, down = state["experts.gate_up_proj"], state["experts.down_proj"]
        if gate_up.dim() != 3 or gate_up.shape[1] % 2:
            raise _refused(f"{block}'s experts.gate_up_proj must be [E, 2I, H], but got "
                           f"{tuple(gate_up.shape)}")
        dense["gate_proj"], dense["up_proj"] = gate_up.chunk(2, dim=1)  # gate rows first
        dense["down_proj"] = down
    if shared:
        for ours, theirs in _SHARED_ALL:
            if theirs in state:
                dense[ours] = state[theirs]
    return dense


def _to_block(dense: dict, family: str, layout: str) -> dict:
    if layout not in ("fused", "per_expert"):
        raise _refused(f"layout must be 'fused' or 'per_expert', but got {layout!r}")
    state = {"gate.weight": dense["router"]}
    if layout == "fused":
        state["experts.gate_up_proj"] = torch.cat([dense["gate_proj"], dense["up_proj"]], dim=1)
        state["experts.down_proj"] = dense["down_proj"]
    else:
        for e in range(dense["gate_proj"].shape[0]):
            for ours, theirs in _PER_EXPERT[family].items():
                state[f"experts.{e}.{theirs}.weight"] = dense[ours][e]
    return state


def from_qwen2_moe(state: dict) -> dict:
    """load_dense_weights() arguments from a Qwen2-MoE (or Qwen3-MoE) sparse MoE block's
    state_dict, in the fused (5.x) or the per-expert (4.x) layout."""
    return _from_block(state, "qwen", "Qwen2-MoE/Qwen3-MoE block", shared=True)


def to_qwen2_moe(dense: dict, *, layout: str = "fused") -> dict:
    """A Qwen2-MoE (or Qwen3-MoE) sparse MoE block's state_dict from dense_weights(), in the
    fused (5.x) or the per-expert (4.x) layout."""
    state = _to_block(dense, "qwen", layout)
    for ours, theirs in _SHARED_ALL:
        if ours in dense:
            state[theirs] = dense[ours]
    return state


def from_mixtral(state: dict) -> dict:
    """load_dense_weights() arguments from a Mixtral sparse MoE block's state_dict, in the
    fused (5.x) or the per-expert (4.x) layout."""
    return _from_block(state, "mixtral", "Mixtral block", shared=False)


def to_mixtral(dense: dict, *, layout: str = "fused") -> dict:
    """A Mixtral sparse MoE block's state_dict from dense_weights(), in the fused (5.x) or the
    per-expert (4.x) layout."""
    return _to_block(dense, "mixtral", layout)
