"""A small Qwen-MoE-style decoder for end-to-end checks, demos and benchmarks of MegaMoE.

Embeddings; per layer x += Attention(RMSNorm(x)) then x += MoE(RMSNorm(x)), with causal
grouped-query attention (torch's scaled_dot_product_attention) and rotary positions; a final
RMSNorm; an untied LM head; cross-entropy on fp32 logits with shifted labels. The MoE FFN is
MegaMoE (path "shmem": dispatch and combine on SHMEM) or AllToAllMoE (path "a2a":
all_to_all_single over gloo), with a shared expert, from the same seeded initialisation.
Nothing is downloaded: tokens are synthetic.

Training step (both paths alike): zero_grad, forward, backward, all-reduce and average the
dense (non-expert) gradients over the world, scale the expert gradients (already summed over
every PE's tokens at their owner) by 1/world, AdamW. The sums of a model built for SHMEM run on
shmem.all_reduce (over the DP group's team for the experts: bitwise the same on every PE) where
the backend has the reductions (host); elsewhere, and on the a2a path, over gloo.

EP x DP: MoEDecoder(..., group=ep_group, dp_group=dp_group) (expert_data_parallel_groups(ep)
makes both) runs its MoE layers expert parallel over the EP group; each EP group is a
data-parallel replica of the experts. The dense gradients are averaged over the world as
before; an expert's gradient, summed at its owner over its EP group's tokens, is summed over
the DP group (the expert's replicas) and divided by the world size: the same scale as the
dense ones, the gradient of the mean loss over every PE's tokens.

The expert weights are DTensors (Shard(0) over each EP group's mesh, see MegaMoE); the rest
plain tensors. make_optimizer puts them in two parameter groups (torch's foreach optimizers
refuse DTensors mixed with plain tensors in one group). save_checkpoint / load_checkpoint go
through torch.distributed.checkpoint: a checkpoint saved at one EP size loads at another
(the weights and AdamW's moments reshard); training under DDP: mega_moe.prepare_ddp.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ..shmem.errors import ShmemValueError
from ._groups import check_dp_members, ep_group_of, expert_data_parallel_groups
from ._layer import MegaMoE, local_tensor
from ._resources import MegaMoEResources
from ._training import (SymmetricGradientSum, all_reduce_flat, clip_grad_norm_,
                        reduce_expert_gradients)
from .reference import AllToAllMoE

EXPERT_PARAMETERS = ("gate_proj", "up_proj", "down_proj")


def _refused(message: str) -> ShmemValueError:
    """An argument the model cannot take: INVALID_ARGUMENT, a ValueError too (docs/api.md,
    "Errors and logs")."""
    return ShmemValueError.make("INVALID_ARGUMENT", "mega_moe", "validate", message)


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int = 256
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    num_experts: int = 4
    top_k: int = 2
    intermediate_size: int = 64
    shared_intermediate_size: int = 32
    sequence: int = 32
    batch: int = 2


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def _rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding over the last dimension of [B, heads, S, D]."""
    d = x.shape[-1]
    position = torch.arange(x.shape[-2], dtype=torch.float32, device=x.device)[:, None]
    frequency = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    angle = position * frequency[None, :]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads = config.heads, config.kv_heads
        self.head_dim = config.hidden_size // config.heads
        h = config.hidden_size
        self.q = nn.Linear(h, self.heads * self.head_dim, bias=True)
        self.k = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.v = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.o = nn.Linear(self.heads * self.head_dim, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rotary(q), _rotary(k)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class DecoderLayer(nn.Module):
    def __init__(self, config: DecoderConfig, moe: nn.Module) -> None:
        super().__init__()
        self.attention_norm, self.moe_norm = RMSNorm(config.hidden_size), RMSNorm(config.hidden_size)
        self.attention, self.moe = Attention(config), moe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.moe(self.moe_norm(x))


class MoEDecoder(nn.Module):
    """The decoder with path "shmem" (MegaMoE, one MegaMoEResources shared by its layers) or
    "a2a" (AllToAllMoE). The same seed gives bitwise the same initial parameters on both.

    `group`: the expert-parallel group of the MoE layers (None: the world); `dp_group`: the
    data-parallel group of this rank's experts (the ranks with the same place in their EP
    groups; None when EP is the world), which reduce_gradients sums the expert gradients over.
    """

    def __init__(self, config: DecoderConfig, path: str, *, seed: int = 0,
                 resources: MegaMoEResources | None = None, group=None,
                 dp_group=None) -> None:
        super().__init__()
        if path not in ("shmem", "a2a"):
            raise _refused(f"path must be one of shmem, a2a, but got {path!r}")
        self.config, self.path = config, path
        self.group, self.dp_group = group, dp_group
        _check_dp_group(ep_group_of(group), dp_group)
        self.resources = resources
        if path == "shmem" and resources is None:
            self.resources = MegaMoEResources(config.hidden_size, config.num_experts, config.top_k,
                                              max_tokens=config.batch * config.sequence,
                                              group=group)
        self._owns_resources = path == "shmem" and resources is None
        # The gradient reduction of a model built for SHMEM runs on shmem.all_reduce (every
        # backend has the reductions: docs/mega_moe.md).
        self.gradient_sum = SymmetricGradientSum() if path == "shmem" else None
        torch.manual_seed(seed)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        layers = []
        try:
            for _ in range(config.layers):
                cls, extra = ((MegaMoE, {"resources": self.resources}) if path == "shmem"
                              else (AllToAllMoE, {}))
                moe = cls(config.hidden_size, config.intermediate_size, config.num_experts,
                          config.top_k, shared_intermediate_size=config.shared_intermediate_size,
                          gated_shared_expert=True, group=group, **extra)
                layers.append(DecoderLayer(config, moe))
        except BaseException:
            if self._owns_resources:  # the layers share them: released with them (collective)
                self.resources.close()
            raise
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def _apply(self, fn, recurse=True):
        # Every MegaMoE layer judges the conversion before anything is converted: a layer that
        # cannot take it (shared resources of another dtype) would otherwise raise with the
        # layers before it converted.
        for module in self.modules():
            if isinstance(module, MegaMoE):
                module.check_conversion(fn)
        return super()._apply(fn, recurse)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x)).float()

    def loss(self, tokens: torch.Tensor) -> tuple:
        logits = self(tokens)
        return lm_loss(logits, tokens), logits

    def expert_parameters(self) -> list:
        return [getattr(layer.moe, name) for layer in self.layers for name in EXPERT_PARAMETERS]

    def dense_parameters(self) -> list:
        experts = {id(p) for p in self.expert_parameters()}
        return [p for p in self.parameters() if id(p) not in experts]

    def communication_s(self) -> float:
        """Seconds spent so far in the MoE layers' communication: the count exchanges and
        all-to-alls (a2a), or what the SHMEM calls spent outside the experts' computations."""
        if self.path == "a2a":
            return sum(layer.moe.clock.seconds for layer in self.layers)
        return self.resources.stats.communication_s if self.resources is not None else 0.0

    def freeze_routers(self) -> None:
        """Keeps every router fixed, so that both paths see the same load step after step."""
        for layer in self.layers:
            layer.moe.router.requires_grad_(False)

    def close(self) -> None:
        """Collective: frees the SHMEM resources this model made (none on the a2a path)."""
        if self.gradient_sum is not None:
            self.gradient_sum.close()
        if self._owns_resources and self.resources is not None:
            self.resources.close()
            self.resources = None


def lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the logits [B, S, V] against the next tokens (shifted labels)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def synthetic_tokens(config: DecoderConfig, rank: int, step: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randint(0, config.vocab_size, (config.batch, config.sequence), generator=generator)


def _check_dp_group(ep, dp_group) -> None:
    """EP over the world needs no DP group; EP over a smaller group needs the DP group of its
    experts' replicas, of world / EP ranks with this one among them."""
    if not dist.is_initialized():
        return
    world = dist.get_world_size()
    if ep.world:
        if dp_group is not None and dist.get_world_size(dp_group) != 1:
            raise _refused(f"dp_group must be None when the expert-parallel group is the "
                           f"world, but got a group of {dist.get_world_size(dp_group)} ranks")
        return
    if dp_group is None or dp_group is dist.GroupMember.NON_GROUP_MEMBER:
        raise _refused("dp_group must be the data-parallel group of this rank's experts (the "
                       "ranks with the same place in their expert-parallel groups) when the "
                       "expert-parallel group is smaller than the world, but got "
                       + ("None" if dp_group is None else "a group without this rank"))
    size = dist.get_world_size(dp_group)
    if ep.size * size != world:
        raise _refused(f"dp_group must have world / EP = {world // max(1, ep.size)} ranks "
                       f"(EP {ep.size}, world {world}), but got {size}")
    check_dp_members(ep, dp_group)


def reduce_gradients(model: MoEDecoder, dp_group=None, *, over: str | None = None) -> None:
    """Averages the dense gradients over the world (one all-reduce of them flattened);
    the expert gradients, summed at their owner over its EP group's tokens, are summed over
    the DP group (`dp_group`, default the model's; none when EP is the world) and divided by
    the world size, so both are gradients of the mean loss over every PE's tokens.

    over: "shmem" (shmem.all_reduce over the world and the DP group's team: bitwise the same on
    every PE) or "gloo"; None: "shmem" for a model built for SHMEM, else "gloo"."""
    over = over or ("shmem" if model.gradient_sum is not None else "gloo")
    if over not in ("shmem", "gloo") or (over == "shmem" and model.gradient_sum is None):
        raise _refused(f"over must be 'gloo', or 'shmem' for a model built for SHMEM, "
                       f"but got {over!r}")
    sum_with = model.gradient_sum if over == "shmem" else None
    world = dist.get_world_size() if dist.is_initialized() else 1
    dp_group = model.dp_group if dp_group is None else dp_group
    dense = [p.grad for p in model.dense_parameters() if p.grad is not None]
    if dense and world > 1:
        if sum_with is not None:
            sum_with(dense, None)
        else:
            all_reduce_flat(dense, None)
    for g in dense:
        g /= world
    reduce_expert_gradients(model.expert_parameters(), dp_group, world, sum_with=sum_with)


def train_step(model: MoEDecoder, optimizer: torch.optim.Optimizer, tokens: torch.Tensor) -> tuple:
    """zero_grad, forward, backward, gradient reduction, AdamW: (loss, logits)."""
    optimizer.zero_grad(set_to_none=False)
    loss, logits = model.loss(tokens)
    loss.backward()
    reduce_gradients(model)
    optimizer.step()
    return loss.detach(), logits.detach()


def ddp_train_step(ddp: nn.parallel.DistributedDataParallel, optimizer: torch.optim.Optimizer,
                   tokens: torch.Tensor, max_norm: float = 1.0) -> tuple:
    """The training step under DDP(prepare_ddp(model, dp_group)): zero_grad, forward through DDP,
    backward (DDP averages the dense gradients, prepare_ddp's reduction the experts'),
    mega_moe.clip_grad_norm_ to max_norm, AdamW: (loss, the gradients' total norm)."""
    optimizer.zero_grad(set_to_none=False)
    loss = lm_loss(ddp(tokens), tokens)
    loss.backward()
    norm = clip_grad_norm_(ddp.module.parameters(), max_norm)
    optimizer.step()
    return loss.detach(), norm


def make_optimizer(model: MoEDecoder) -> torch.optim.Optimizer:
    """AdamW (lr 1e-3, weight decay 0.01) with two parameter groups: the dense parameters, then
    the expert DTensors (one group holding both fails under foreach, torch's default on GPUs)."""
    experts = [p for p in model.expert_parameters() if p.requires_grad]
    ids = {id(p) for p in experts}
    dense = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    # foreach over the experts: one DTensor dispatch per update op for all of them, instead of
    # one per op and weight (measured in docs/mega_moe.md).
    groups = [{"params": dense}] + ([{"params": experts, "foreach": True}] if experts else [])
    return torch.optim.AdamW(groups, lr=1e-3, weight_decay=0.01)


def parameter_count(model: nn.Module) -> int:
    """The parameters this PE holds (its experts' shards, not the global expert weights)."""
    return sum(local_tensor(p.detach()).numel() for p in model.parameters())


def save_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, path: str) -> None:
    """Collective: the model's and the optimizer's state with torch.distributed.checkpoint
    under `path` (the experts as their global DTensors: loadable at any EP size)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=path)


def load_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, path: str) -> None:
    """Collective: loads what save_checkpoint wrote into `model` and `optimizer`, at this run's
    EP size (torch.distributed.checkpoint reshards the experts and their AdamW moments). A
    checkpoint of another expert count (or hidden size) raises ValueError before any load."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    saved = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    for name, param in inner.state_dict().items():
        meta = saved.get(f"model.{name}")
        size = getattr(meta, "size", None)
        if size is not None and tuple(size) != tuple(param.shape):
            raise _refused(f"{path} holds model.{name} of shape {tuple(size)}, but the model's "
                           f"is {tuple(param.shape)} (a checkpoint of another model: its "
                           f"expert count or sizes differ)")
    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optimizer"])


def tolerance_report(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b| / (|b| + 1e-6), for messages."""
    return float(((a - b).abs() / (b.abs() + 1e-6)).max()) if a.numel() else 0.0


__all__ = ["DecoderConfig", "MoEDecoder", "ddp_train_step", "expert_data_parallel_groups",
           "lm_loss", "load_checkpoint", "make_optimizer", "parameter_count", "reduce_gradients",
           "save_checkpoint", "synthetic_tokens", "train_step", "tolerance_report"]
