"""MegaMoE in torch.distributed training: DistributedDataParallel, FSDP2 and gradient clipping.

A MegaMoE layer's expert weights are DTensors sharded Shard(0) over its EP group's mesh, and
their gradients, summed at their owner over the EP group's tokens, are already where they
belong: DDP must neither broadcast them nor average them over the world (that would overwrite
and mix other PEs' experts). prepare_ddp(model, dp_group) keeps them out of DDP (on the root
module, the only place DDP reads its ignore list) and reduces them itself: summed over the DP
group (the experts' replicas) and divided by the world size, the scale of DDP's averaged dense
gradients; deferred under DDP's no_sync() as DDP's own reduction is (the reduction is linear,
so the accumulated gradients reduced once equal the sum of the per-step reductions).
fully_shard(module, dp_group) is FSDP2's fully_shard with the experts in its ignored_params and
the same reduction of theirs.

clip_grad_norm_ takes torch's signature and returns the global norm on every rank: plain
(replicated) gradients counted once, DTensor gradients by mesh (their norm over the mesh:
each expert shard once), the groups combined as a p-norm (or max), then every gradient
scaled by torch's clip coefficient. torch's own clip_grad_norm_ refuses DTensors mixed with
plain tensors, or on different meshes (docs/mega_moe.md).
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor import DTensor
from torch.utils._pytree import tree_leaves
from torch.nn.parallel import DistributedDataParallel

from ..shmem.errors import contract, type_error, value_error
from ._buffers import ROW_DTYPES
from ._groups import check_dp_members, ep_group_of
from ._layer import _EXPERT_KEYS, MegaMoE, local_tensor


def expert_parameters(model: nn.Module) -> list:
    """[(name, parameter)] of every MegaMoE expert weight of `model`, names relative to it."""
    found = []
    for prefix, module in model.named_modules():
        if isinstance(module, MegaMoE):
            for name in _EXPERT_KEYS:
                found.append((f"{prefix}.{name}" if prefix else name, getattr(module, name)))
    return found


def all_reduce_flat(grads: list, group, dtype: torch.dtype | None = None) -> None:
    """Sums `grads` over `group` in one all-reduce of them flattened (as a data-parallel
    trainer's bucket would), in `dtype` (None: theirs), as FSDP2's reduce_dtype does. NPU
    gradients are summed through a host copy (gloo takes CPU tensors)."""
    flat = torch.cat([g.reshape(-1).to(dtype or g.dtype) for g in grads])
    if flat.device.type in ("cpu", "cuda"):
        dist.all_reduce(flat, group=group)
    else:  # NPU gradients over gloo: through a host copy (which synchronizes)
        staged = flat.cpu()
        dist.all_reduce(staged, group=group)
        flat.copy_(staged)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


class SymmetricGradientSum:
    """Sums gradient lists over the world or a data-parallel group with shmem.all_reduce, as
    all_reduce_flat does over gloo: flattened into one symmetric buffer per group (allocated at
    the first call, collective over the world, and again when the size changes), summed in
    place over the group's team (shmem.team(group), made at the first call), copied back. The
    sum is bitwise the same on every PE (docs/architecture.md of the runtime, "Reductions").
    close() frees the buffers and destroys the teams (collective)."""

    def __init__(self) -> None:
        self._buffers: dict = {}
        self._teams: dict = {}

    def __call__(self, grads: list, group) -> None:
        from .. import shmem

        team = None
        if group is not None:
            team = self._teams.get(group)
            if team is None:
                team = self._teams[group] = shmem.team(group)
        dtype = grads[0].dtype
        for g in grads[1:]:
            dtype = torch.promote_types(dtype, g.dtype)
        numel = sum(g.numel() for g in grads)
        flat = self._buffers.get(group)
        if flat is None or flat.numel() != numel or flat.dtype != dtype:
            if flat is not None:
                shmem.free(flat)
                del self._buffers[group]
            flat = self._buffers[group] = shmem.empty(numel, dtype=dtype)
        offset = 0
        for g in grads:
            flat[offset:offset + g.numel()].copy_(g.reshape(-1))
            offset += g.numel()
        shmem.all_reduce(flat, flat, team=team)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def close(self) -> None:
        from .. import shmem

        for flat in self._buffers.values():
            shmem.free(flat)
        self._buffers.clear()
        for team in self._teams.values():
            team.destroy()
        self._teams.clear()


@torch.no_grad()
def reduce_expert_gradients(params: list, dp_group, world: int,
                            dtype: torch.dtype | None = None, sum_with=None) -> None:
    """The experts' rule: their gradients (each summed at its owner over its EP group's tokens)
    summed over `dp_group` (their replicas; None: none) and divided by `world`, so that they
    are gradients of the mean loss over every PE's tokens, as DDP's averaged dense ones. The
    sum runs in `dtype` (None: the gradients'), FSDP2's reduce dtype under mixed precision;
    `sum_with` (a SymmetricGradientSum) sums on the SHMEM runtime instead of gloo."""
    grads = [local_tensor(p.grad) for p in params if p.grad is not None]
    if grads and dp_group is not None and dist.get_world_size(dp_group) > 1:
        if sum_with is not None:
            sum_with(grads, dp_group)
        else:
            all_reduce_flat(grads, dp_group, dtype)
    for g in grads:
        g.div_(world)


def _ddp_synchronises(module: nn.Module) -> bool:
    # DDP runs the module's forward inside _inside_ddp_forward(), which names it: its
    # require_backward_grad_sync (False under no_sync()) decides this forward's backward.
    ddp = DistributedDataParallel._get_active_ddp_module()
    if ddp is None or ddp.module is not module:
        if torch.is_grad_enabled():
            _warn_once("a model prepared by mega_moe.prepare_ddp ran a forward with gradients "
                       "outside DistributedDataParallel's forward (not wrapped, or DDP's compiled "
                       "or delayed all-reduce modes): its experts' gradients are not reduced "
                       "for that backward")
        return False
    if ddp.process_group.size() != dist.get_world_size():
        raise RuntimeError(contract(
            "DistributedDataParallel's process_group", "the world (the experts' gradients are "
            "scaled to the mean over the world, as DDP's over its group)",
            f"a group of {ddp.process_group.size()} ranks"))
    return ddp.require_backward_grad_sync


def _fsdp_synchronises(module: nn.Module) -> bool:
    # FSDP2's set_requires_gradient_sync(False), its no_sync(), clears reduce_grads on the
    # module's parameter groups (torch/distributed/fsdp/_fully_shard/_fully_shard.py).
    groups = module._get_fsdp_state()._fsdp_param_groups
    return all(group.reduce_grads for group in groups)


_WARNED: set = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


class _ExpertGradients:
    """The experts' gradient reduction prepare_ddp and fully_shard install: at the end of a
    backward that DDP (or FSDP) synchronises, the experts' local gradients summed over
    `dp_group` (one all-reduce of them flattened) and divided by the world size.

    The forward decides (DDP's or FSDP's decision for the backward of that forward, read by
    `synchronised(module)` as the forward starts); the backward of a deciding forward's output
    queues the reduction for its end. The experts are found by name at the reduction, so a
    conversion or move of the model after the helper (which may swap or replace the parameter
    tensors) changes nothing: a hook on the parameters themselves would not survive it."""

    def __init__(self, model: nn.Module, names: list, dp_group, world: int,
                 synchronised, reduce_dtype: torch.dtype | None = None) -> None:
        self.model, self.names = model, names
        self.dp_group, self.world, self.reduce_dtype = dp_group, world, reduce_dtype
        self.synchronised = synchronised
        self.deciding = self.queued = False
        self.handles = [model.register_forward_pre_hook(self._forward),
                        model.register_forward_hook(self._forward_done)]
        self.reductions = 0  # backward passes whose expert gradients were reduced

    def params(self) -> list:
        return [self.model.get_parameter(name) for name in self.names]

    def _forward(self, module, args) -> None:
        self.deciding = torch.is_grad_enabled() and self.synchronised(module)

    def _forward_done(self, module, args, output) -> None:
        if not self.deciding:
            return
        self.deciding = False
        for leaf in tree_leaves(output):
            if isinstance(leaf, torch.Tensor) and leaf.requires_grad:
                leaf.register_hook(self._reached)

    def _reached(self, grad) -> None:
        if not self.queued:
            self.queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._reduce)

    def _reduce(self) -> None:
        self.queued = False
        reduce_expert_gradients(self.params(), self.dp_group, self.world, self.reduce_dtype)
        self.reductions += 1

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _check_dp_group(model: nn.Module, dp_group, helper: str) -> list:
    """The expert parameters of `model` after checking that torch.distributed is up and that
    `dp_group` is the data-parallel group of every MegaMoE layer's experts."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(f"{helper} needs torch.distributed initialised")
    named = expert_parameters(model)
    if not named:
        raise value_error("mega_moe", "model", "a module with MegaMoE layers", type(model).__name__)
    world = dist.get_world_size()
    if dp_group is dist.GroupMember.NON_GROUP_MEMBER:
        raise value_error("mega_moe", "dp_group", "a group with this rank in it, or None",
                                      "a group without this rank")
    dp_size = 1 if dp_group is None else dist.get_world_size(dp_group)
    for module in model.modules():
        if isinstance(module, MegaMoE):
            ep = ep_group_of(module.group)
            if ep.size * dp_size != world:
                raise value_error(
                    "mega_moe",
                    "dp_group", f"the data-parallel group of the experts' replicas: world / EP "
                    f"= {world // ep.size} ranks (EP {ep.size}, world {world}; None when EP is "
                    f"the world)", "None" if dp_group is None else f"a group of {dp_size} ranks")
            if dp_group is not None:
                check_dp_members(ep, dp_group)  # collective over dp_group
    return named


def prepare_ddp(model: nn.Module, dp_group=None) -> nn.Module:
    """Prepares `model` for DistributedDataParallel(model): every MegaMoE expert weight is set
    on the root module's ignore list (DDP neither broadcasts nor averages it), and the experts'
    gradients are reduced by the layer's rule at the end of every backward DDP synchronises
    (summed over `dp_group`, divided by the world size; nothing under DDP's no_sync()).
    `dp_group`: the data-parallel group of this rank's experts (the ranks with the same place
    in their EP groups, expert_data_parallel_groups' second); None: no DP beyond EP (every
    layer's EP group is the world). Call it before DDP(model); again replaces the first.
    Returns `model`. DDP over a model with MegaMoE layers without it fails at construction."""
    if isinstance(model, DistributedDataParallel):
        raise value_error("mega_moe", "model", "the module DistributedDataParallel will wrap "
                                      "(prepare_ddp(model) comes before DDP(model))",
                                      "a DistributedDataParallel")
    named = _check_dp_group(model, dp_group, "prepare_ddp")
    previous = getattr(model, "_mega_moe_ddp", None)
    if previous is not None:
        previous.remove()
    ignored = set(getattr(model, "_ddp_params_and_buffers_to_ignore", ()))
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        model, sorted(ignored | {name for name, _ in named}))
    model._mega_moe_ddp = _ExpertGradients(model, [name for name, _ in named], dp_group,
                                           dist.get_world_size(), _ddp_synchronises)
    return model


def _fsdp_would_manage(module: nn.Module, ignored: set) -> bool:
    """Whether fully_shard(module) would manage a parameter: one not ignored and not under a
    module an earlier fully_shard call took."""
    from torch.distributed.fsdp import FSDPModule

    taken = {id(p) for sub in module.modules() if sub is not module and isinstance(sub, FSDPModule)
             for p in sub.parameters()}
    return any(id(p) not in taken and p not in ignored for p in module.parameters())


def fully_shard(module: nn.Module, *, dp_group=None, **kwargs):
    """torch.distributed.fsdp.fully_shard(module, **kwargs) for a module with MegaMoE layers:
    FSDP2 shards and averages the dense part over its mesh, which must be the world (the
    default), and the experts are added to `ignored_params`: the layer has sharded them over
    its EP group already, and FSDP2 cannot shard a DTensor of another mesh (torch's own
    fully_shard over them fails with "Invariant encountered"). The experts' gradients are
    reduced by the layer's rule at the end of every backward FSDP2 synchronises (summed over
    `dp_group`, divided by the world size; nothing while set_requires_gradient_sync(False)).
    Apply it to inner modules first and the root last, as with torch's; each call takes the
    experts under `module` that no earlier call took. With `mp_policy` (a MixedPrecisionPolicy)
    the layers whose experts the call takes follow it as FSDP2's own parameters do: the routed
    experts compute in its param_dtype and their gradients are summed in its reduce_dtype
    (param_dtype when None); the experts themselves stay in their dtype. Returns what torch's
    returns."""
    from torch.distributed.fsdp import fully_shard as torch_fully_shard

    named = _check_dp_group(module, dp_group, "fully_shard")
    mesh = kwargs.get("mesh")
    world = dist.get_world_size()
    if mesh is not None and (mesh.ndim != 1 or mesh.size() != world):
        raise value_error(
            "mega_moe",
            "mesh", f"None or a 1-D mesh of the world's {world} ranks (the dense gradients are "
            "averaged over the world, the experts' scale)", f"a mesh of shape {tuple(mesh.shape)}")
    taken = set()
    for sub in module.modules():
        previous = getattr(sub, "_mega_moe_fsdp", None)
        if previous is not None:
            taken.update(id(p) for p in previous.params())
    fresh = [name for name, p in named if id(p) not in taken]
    kwargs["ignored_params"] = set(kwargs.get("ignored_params") or ()) | {p for _, p in named}
    if fresh and not _fsdp_would_manage(module, kwargs["ignored_params"]):
        # Nothing of FSDP2's own to decide from (set_requires_gradient_sync(False) sets its
        # parameter groups): the module holds experts only.
        raise value_error(
            "mega_moe",
            "module", "a module with parameters other than MegaMoE experts (FSDP2 decides "
            "when gradients are reduced from them; fully_shard the module around the layer)",
            f"{type(module).__name__} with expert parameters only")
    param_dtype = getattr(kwargs.get("mp_policy"), "param_dtype", None)
    if param_dtype is not None and param_dtype not in ROW_DTYPES:
        raise type_error("mega_moe", "mp_policy.param_dtype", "None or a dtype MegaMoE's experts "
                                     "compute in: torch.float64, float32, bfloat16 or float16",
                                     param_dtype)
    sharded = torch_fully_shard(module, **kwargs)
    if fresh:
        # Mixed precision (FSDP2's MixedPrecisionPolicy): the experts stay in their dtype, as
        # FSDP2's sharded parameters do; the layers compute in param_dtype, as FSDP2's
        # unsharded parameters do, and their gradients reduce in reduce_dtype (param_dtype when
        # None, as FSDP2's).
        reduce_dtype = getattr(kwargs.get("mp_policy"), "reduce_dtype", None) or param_dtype
        owned = {id(module.get_parameter(name)) for name in fresh}
        for sub in module.modules():
            if isinstance(sub, MegaMoE) and id(getattr(sub, _EXPERT_KEYS[0])) in owned:
                sub.fsdp_param_dtype = param_dtype
        module._mega_moe_fsdp = _ExpertGradients(module, fresh, dp_group, world,
                                                 _fsdp_synchronises, reduce_dtype)
    return sharded


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_ for models with MegaMoE layers: the total norm of the
    gradients of `parameters` (each expert shard counted once over its mesh, each plain
    parameter once), the same on every rank, then every gradient scaled by
    max_norm / (total + 1e-6) when that is below 1. Plain gradients must already be equal
    across ranks (reduced, as DDP leaves them). Returns the total norm (a plain tensor)."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    norm_type, max_norm = float(norm_type), float(max_norm)
    if not grads:
        return torch.tensor(0.0)
    groups: dict = {}
    for g in grads:  # plain tensors in one group, DTensors by mesh
        key = id(g.device_mesh) if isinstance(g, DTensor) else None
        groups.setdefault(key, []).append(g)
    norms = []
    for group in groups.values():
        norm = torch.nn.utils.get_total_norm(group, norm_type, False, foreach)
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    device = norms[0].device
    total = torch.linalg.vector_norm(torch.stack([n.to(device) for n in norms]), norm_type)
    if error_if_nonfinite and torch.logical_or(total.isnan(), total.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    with torch.no_grad():
        for g in grads:
            local = local_tensor(g)
            local.mul_(coefficient.to(local.device, local.dtype))
    return total
