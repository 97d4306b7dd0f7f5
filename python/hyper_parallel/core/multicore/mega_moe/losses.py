"""Router losses on the logits a MegaMoE layer keeps after each forward (layer.router_logits,
[T, E]; or those transformers records with output_router_logits=True), to add to the
training loss with a coefficient of the caller's.

  switch_aux_loss(logits, top_k)       the Switch Transformer load-balancing loss
                                       E * sum_i f_i * P_i; normalize="top_k" (the default)
                                       is transformers' load_balancing_loss_func (a perfectly
                                       balanced router scores top_k), normalize="one" divides
                                       it by top_k (a balanced router scores 1)
  router_z_loss(logits)                the ST-MoE z-loss mean_t logsumexp(logits_t)^2

`logits` is one layer's [T, E] tensor or a sequence of them (one per layer), whose tokens are
then taken together, as transformers takes a model's layers. Both are computed in fp32 and are
differentiable in the logits (f_i, a count, is not). They are local: over this PE's tokens
(average them over the data-parallel PEs as the training loss is, or compute f_i from the
group's counts, layer.group_tokens_per_expert, for a global balance).
"""

from __future__ import annotations

import torch

from ..shmem.errors import value_error


def _logits(router_logits) -> torch.Tensor:
    if isinstance(router_logits, torch.Tensor):
        parts = [router_logits]
    else:
        parts = list(router_logits)
    if not parts or not all(isinstance(p, torch.Tensor) and p.dim() == 2 for p in parts):
        raise value_error("mega_moe", "router_logits", "a [T, E] tensor or a non-empty sequence of "
                                      "them", type(router_logits).__name__)
    experts = {p.shape[1] for p in parts}
    if len(experts) != 1:
        raise value_error("mega_moe", "router_logits", "tensors of one expert count",
                                      sorted(experts))
    return torch.cat([p.float() for p in parts]) if len(parts) > 1 else parts[0].float()


def switch_aux_loss(router_logits, top_k: int, *, normalize: str = "top_k") -> torch.Tensor:
    """The Switch Transformer load-balancing loss over the tokens of `router_logits`:

        E * sum_i f_i * P_i,   P_i = mean over tokens of softmax(logits)_i,
                               f_i = the fraction of tokens whose top-k includes expert i.

    The f_i sum to top_k, so a perfectly balanced router (f_i = top_k / E, P_i = 1 / E) scores
    top_k with normalize="top_k" (transformers' load_balancing_loss_func, without an attention
    mask: the same number), and 1 with normalize="one" (the loss divided by top_k: f_i is
    then the fraction of the routed (token, expert) pairs). Its gradient reaches the router
    through P_i only. A 0-dim fp32 tensor."""
    if normalize not in ("top_k", "one"):
        raise value_error("mega_moe", "normalize", "'top_k' or 'one'", repr(normalize))
    logits = _logits(router_logits)
    tokens, experts = logits.shape
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= experts:
        raise value_error("mega_moe", "top_k", f"an int in [1, {experts}]", repr(top_k))
    if tokens == 0:
        return logits.new_zeros(())
    probs = torch.softmax(logits, dim=-1)
    chosen = probs.topk(top_k, dim=-1).indices
    counts = torch.bincount(chosen.reshape(-1), minlength=experts).to(probs.dtype)
    loss = experts * torch.sum(counts / tokens * probs.mean(0))
    return loss if normalize == "top_k" else loss / top_k


def router_z_loss(router_logits) -> torch.Tensor:
    """The ST-MoE router z-loss over the tokens of `router_logits`: the mean over tokens of
    logsumexp(logits)^2, which keeps the router's logits small. A 0-dim fp32 tensor (0 for no
    tokens)."""
    logits = _logits(router_logits)
    if logits.shape[0] == 0:
        return logits.new_zeros(())
    return torch.logsumexp(logits, dim=-1).square().mean()
