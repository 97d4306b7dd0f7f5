"""MegaMoE: an expert-parallel Mixture-of-Experts layer on SHMEM.

Dispatch and combine are puts and signals into resident symmetric buffers, run by two native
kernels per call (ops/mega_moe): each expert starts computing the moment its own rows have
landed, and its results go back while the next expert computes. The shared expert computes
while this PE waits for the other PEs' experts. The per-step count exchange runs on SHMEM
too; nothing on the layer's path goes through gloo.

    resources = MegaMoEResources(hidden, experts, top_k)          # collective; or let a layer
    layer = MegaMoE(hidden, inter, experts, top_k, resources=resources)  # make its own
    layer.load_dense_weights(**dense)                             # full tensors, keeps a shard
    y = layer(x)                                                  # [T, H] or [B, S, H]
    y.sum().backward()                                            # expert grads stay local
    layer.close(); resources.close()                              # collective, explicit

EP x DP: group=ep_group runs a layer expert parallel over a smaller process group (its shmem
team), the heap and every allocation staying the WORLD's; expert_data_parallel_groups(ep_size)
makes the EP and DP groups (see _groups and docs/mega_moe.md).

Hugging Face: mega_moe.hf.replace_moe_blocks(model) swaps a transformers Qwen2-MoE, Qwen3-MoE
or Mixtral model's sparse MoE blocks for MegaMoE layers (convert: the weight layouts; losses:
the Switch aux loss and the z-loss on the router logits the layers keep).

Training: the expert weights are DTensors (Shard(0) over the EP group's mesh, global shapes):
torch.distributed.checkpoint saves and reshards them; prepare_ddp(model, dp_group) before
DistributedDataParallel(model) keeps DDP off them and reduces their gradients (fully_shard: the
same for FSDP2's); clip_grad_norm_
clips by the global norm (docs/mega_moe.md).

torch.compile: compile_model(model) compiles a module holding MegaMoE layers whole
(fullgraph, the token count symbolic); each layer's expert-parallel call is then the custom ops
torch.ops.hps_moe.forward / backward (_ops, docs/mega_moe.md).

References: dense_moe (one process, every expert) and AllToAllMoE (the same layer over
torch.distributed.all_to_all_single), built from the same weights.
"""

from ._function import expert_parallel, swiglu
from ._groups import expert_data_parallel_groups
from ._layer import MegaMoE, route
from ._ops import compile_model
from ._pipeline import PendingCall
from ._resources import MegaMoEResources
from ._stats import PipelineStats
from ._training import clip_grad_norm_, fully_shard, prepare_ddp
from .convert import from_mixtral, from_qwen2_moe, to_mixtral, to_qwen2_moe
from .losses import router_z_loss, switch_aux_loss
from .reference import AllToAllMoE, dense_moe

__all__ = [
    "AllToAllMoE",
    "MegaMoE",
    "MegaMoEResources",
    "PendingCall",
    "PipelineStats",
    "clip_grad_norm_",
    "compile_model",
    "dense_moe",
    "expert_data_parallel_groups",
    "expert_parallel",
    "from_mixtral",
    "from_qwen2_moe",
    "fully_shard",
    "prepare_ddp",
    "route",
    "router_z_loss",
    "swiglu",
    "switch_aux_loss",
    "to_mixtral",
    "to_qwen2_moe",
]
