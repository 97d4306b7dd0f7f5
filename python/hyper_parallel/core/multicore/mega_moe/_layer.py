"""MegaMoE: an expert-parallel Mixture-of-Experts layer whose dispatch and combine are puts
and signals into resident symmetric buffers (see the package docstring)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor import DTensor, Shard

from ..shmem.errors import contract, type_error, value_error
from . import _ops
from ._buffers import ROW_DTYPES
from ._function import expert_parallel, swiglu
from ._groups import check_ep_group, ep_group_of, ep_mesh, mesh_ranks
from ._resources import MegaMoEResources

_EXPERT_KEYS = ("gate_proj", "up_proj", "down_proj")
_SHARED_KEYS = ("shared_gate_proj", "shared_up_proj", "shared_down_proj", "shared_expert_gate")
# torch 2.13 renamed all_gather_into_tensor to all_gather_single (the old name warns with a
# FutureWarning); an older torch has only the old name.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _dtype_check(dtype) -> None:
    if dtype not in ROW_DTYPES:
        raise type_error("mega_moe", "dtype", "one of torch.float64, torch.float32, "
                                     "torch.bfloat16, torch.float16", dtype)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local tensor (differentiable, DTensor.to_local()); a plain tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


class _LocalShards(torch.autograd.Function):
    """DTensor weights -> their local shards, differentiable: views of each one's local tensor,
    with a backward that wraps each gradient in its weight's own DTensor spec (mesh,
    placements, global shape and stride; the gradient has the weight's layout and dtype).
    DTensor.to_local()'s own backward, and DTensor.from_local, derive the spec again at every
    call: 0.4 ms per weight per step on the 2-core machine (docs/mega_moe.md), more than the rest
    of the DTensor overhead together."""

    @staticmethod
    def forward(ctx, *weights):
        ctx.specs = [w._spec for w in weights]
        return tuple(w._local_tensor.view_as(w._local_tensor) for w in weights)

    @staticmethod
    def backward(ctx, *grads):
        if torch.compiler.is_compiling():  # dynamo traces from_local, not DTensor's constructor
            return tuple(None if g is None else DTensor.from_local(
                g, spec.mesh, spec.placements, run_check=False, shape=spec.shape,
                stride=spec.stride) for g, spec in zip(grads, ctx.specs))
        return tuple(None if g is None else DTensor(g, spec, requires_grad=False)
                     for g, spec in zip(grads, ctx.specs))


def route(logits: torch.Tensor, top_k: int, normalize_topk: bool) -> tuple:
    """Top-k routing in fp32: (ids [T, k], weights [T, k]). normalize_topk=True takes the
    softmax over the k chosen logits (equal to the full softmax renormalised over them);
    False keeps the top-k of the full softmax, un-renormalised (Qwen2-MoE's default)."""
    logits = logits.float()
    if normalize_topk:
        top = logits.topk(top_k, dim=-1)
        return top.indices, torch.softmax(top.values, dim=-1)
    top = torch.softmax(logits, dim=-1).topk(top_k, dim=-1)
    return top.indices, top.values


class MegaMoE(nn.Module):
    """An expert-parallel MoE layer over the PEs of `group` (None: the whole WORLD; a smaller
    torch.distributed group: expert parallel over its shmem team, see _groups).

    MegaMoE(hidden_size, intermediate_size, num_experts, top_k, *, shared_intermediate_size=0,
            gated_shared_expert=False, normalize_topk=True, capacity_factor=None, group=None,
            resources=None, dtype=torch.float32, gate=None)

    E routed SwiGLU experts in contiguous blocks (the group's rank p, its team PE, owns experts
    [p*L, (p+1)*L), L = E/P),
    top-k routing in fp32, an optional always-on shared SwiGLU expert (scaled by
    sigmoid(x shared_expert_gate^T) when gated). forward(x) takes [T, H] or [B, S, H] and
    returns the same shape; forward_routed(x, topk_ids, topk_weights) skips the router.
    Parameters: router [E, H] and the shared expert on every PE (plain, replicated tensors);
    gate_proj / up_proj [E, I, H] and down_proj [E, H, I] are DTensors sharded Shard(0) over
    `mesh`, the 1-D DeviceMesh "ep" of the group's global ranks (one per EP group, see
    _groups.ep_mesh): each PE holds its L experts' rows, to_local() (or local_expert_weights())
    [L, I, H] / [L, H, I], and their gradients stay there, DTensors of the same placement.
    Without torch.distributed they are plain tensors, every expert in the one process.
    state_dict() holds the global DTensors (torch.distributed.checkpoint reshards them across
    EP sizes); load_state_dict() takes them on the same mesh, or full plain tensors.
    `resources` (a MegaMoEResources of the same shape) lets layers share their resident
    buffers; without it the layer makes its own at its first forward and close() frees them.
    Every call is collective over the group: every PE runs the same layers in the same order.
    The group fits when this rank is in it and its size divides num_experts (else ValueError
    here). Over a group smaller than the WORLD the resources' construction stays collective
    over every PE (the symmetric heap is the WORLD's): every EP group builds the same layers in
    the same order, as data-parallel replicas do.

    Routing: by default the layer's own `router` weight, softmax and top-k in fp32
    (normalize_topk: see route()). `gate`, a router module, routes instead: gate(x [T, H])
    returns (logits [T, E], top-k weights [T, k], top-k ids [T, k]) and holds the router's
    weight [E, H] as gate.weight, which is then the layer's router (load_dense_weights and
    dense_weights() take and give it as "router"; reset_parameters() initialises it) and the
    layer has no `router` parameter. transformers' routers are such modules (mega_moe.hf keeps
    a block's own, so that transformers still records its logits). After each forward,
    `router_logits` holds that call's logits [T, E] (in the graph: an aux loss on them reaches
    the router; see mega_moe.losses), `tokens_per_expert` the rows this PE routed to each
    expert [E] and `group_tokens_per_expert` those of every PE of the group [E] (from the count
    exchange, no extra communication).

    Mixed precision: `dtype` is the parameters' and the buffers' (float64, float32, bfloat16 or
    float16). Under torch.autocast the routed experts compute in the autocast dtype, as
    torch.nn.Linear does, and their rows travel in it (compute_dtype()); the router's logits
    and the shared expert follow autocast like any matmul; routing and the weighted sum of the
    experts' outputs are in fp32, and the output has x's dtype. .to(dtype) (and .half(),
    .float(), ...) converts the parameters and the layer's own buffers (freed at the next call
    or close(), new ones made at that call); a layer given shared resources raises ValueError
    at once instead, naming the supported way.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int, top_k: int, *,
                 shared_intermediate_size: int = 0, gated_shared_expert: bool = False,
                 normalize_topk: bool = True, capacity_factor: float | None = None, group=None,
                 resources: MegaMoEResources | None = None,
                 dtype: torch.dtype = torch.float32, gate: nn.Module | None = None) -> None:
        super().__init__()
        for name, value, least in (("hidden_size", hidden_size, 1),
                                   ("intermediate_size", intermediate_size, 1),
                                   ("num_experts", num_experts, 1), ("top_k", top_k, 1),
                                   ("shared_intermediate_size", shared_intermediate_size, 0)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise type_error("mega_moe", name, "an int", f"{type(value).__name__} {value!r}")
            if value < least:
                raise value_error("mega_moe", name, f"at least {least}", value)
        if top_k > num_experts:
            raise value_error("mega_moe", "top_k", f"at most num_experts ({num_experts})", top_k)
        _dtype_check(dtype)
        ep = ep_group_of(group)
        check_ep_group(ep, num_experts)  # this rank in the group, its size dividing E
        pes, rank = ep.size, ep.rank
        if resources is not None and (resources.hidden_size, resources.num_experts,
                                      resources.top_k, resources.dtype) != (
                                          hidden_size, num_experts, top_k, dtype):
            raise value_error("mega_moe", "resources", f"of hidden_size {hidden_size}, num_experts "
                                          f"{num_experts}, top_k {top_k}, dtype {dtype}",
                                          repr(resources))
        if resources is not None and tuple(resources.ranks) != ep.ranks:
            raise value_error("mega_moe", "resources", f"built over the layer's group (global "
                                          f"ranks {list(ep.ranks)})",
                                          f"resources over global ranks {list(resources.ranks)}")
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.num_experts, self.top_k, self.normalize_topk = num_experts, top_k, normalize_topk
        self.shared_intermediate_size = shared_intermediate_size
        self.gated_shared_expert = gated_shared_expert and shared_intermediate_size > 0
        self.capacity_factor, self.group, self.dtype = capacity_factor, group, dtype
        self.pes, self.rank, self.local_experts = pes, rank, num_experts // pes
        self._resources = resources
        self._owns_resources = resources is None
        self._retired = []  # own resources of a dtype before a conversion, to close
        # FSDP2's MixedPrecisionPolicy.param_dtype when mega_moe.fully_shard took this layer's
        # experts with one: the dense part then runs on parameters FSDP2 cast to it, and the
        # routed experts compute in it too (compute_dtype()).
        self.fsdp_param_dtype: torch.dtype | None = None
        self._op_number = _ops.register_layer(self)  # the layer, to the hps_moe ops
        L, H, I, Is = self.local_experts, hidden_size, intermediate_size, shared_intermediate_size
        if gate is None:
            self.router = nn.Parameter(torch.empty(num_experts, H, dtype=dtype))
            self.gate = None
        else:  # a router module of the caller's (transformers' routers): it holds the weight
            weight = getattr(gate, "weight", None)
            if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (num_experts, H):
                raise value_error("mega_moe", "gate", f"a router module with a weight of shape "
                                              f"({num_experts}, {H})", type(gate).__name__ if weight
                                              is None else tuple(weight.shape))
            self.gate = gate
        self.router_logits = None  # the last forward's, [T, E], for an aux loss
        self.tokens_per_expert = None  # the last call's rows per expert from this PE, [E]
        self.group_tokens_per_expert = None  # ... from every PE of the group, [E]
        self.mesh = ep_mesh(group, torch.empty(0).device.type)
        self.gate_proj = self._expert_parameter(L, I, H)
        self.up_proj = self._expert_parameter(L, I, H)
        self.down_proj = self._expert_parameter(L, H, I)
        if Is:
            self.shared_gate_proj = nn.Parameter(torch.empty(Is, H, dtype=dtype))
            self.shared_up_proj = nn.Parameter(torch.empty(Is, H, dtype=dtype))
            self.shared_down_proj = nn.Parameter(torch.empty(H, Is, dtype=dtype))
        if self.gated_shared_expert:
            self.shared_expert_gate = nn.Parameter(torch.empty(1, H, dtype=dtype))
        self.reset_parameters()

    # ---- parameters -------------------------------------------------------------------------

    def _expert_parameter(self, local: int, *rest: int) -> nn.Parameter:
        """An expert weight: this PE's [local, *rest] rows of the global [E, *rest], a DTensor
        Shard(0) over the layer's mesh (a plain tensor without one)."""
        shard = torch.empty(local, *rest, dtype=self.dtype)
        if self.mesh is None:
            return nn.Parameter(shard)
        return nn.Parameter(DTensor.from_local(
            shard, self.mesh, [Shard(0)], run_check=False,
            shape=torch.Size((self.num_experts,) + rest), stride=shard.stride()))

    def local_expert_weights(self) -> tuple:
        """(gate_proj, up_proj, down_proj) of this PE's experts: [L, I, H], [L, I, H], [L, H, I]
        plain tensors (differentiable views of the DTensors' local shards)."""
        weights = tuple(getattr(self, name) for name in _EXPERT_KEYS)
        if self.mesh is None or not torch.is_grad_enabled():
            return tuple(local_tensor(w) for w in weights)
        return _LocalShards.apply(*weights)

    def _check_experts(self) -> None:
        """The expert weights are still the layer's own: DTensors Shard(0) on its mesh."""
        if self.mesh is None:
            return
        for name in _EXPERT_KEYS:
            value = getattr(self, name)
            if not (isinstance(value, DTensor) and value.device_mesh == self.mesh
                    and tuple(value.placements) == (Shard(0),)):
                got = (f"a DTensor {tuple(value.placements)} on the mesh of global ranks "
                       f"{list(mesh_ranks(value.device_mesh))}" if isinstance(value, DTensor)
                       else type(value).__name__)
                raise RuntimeError(contract(
                    name, "the layer's own DTensor, Shard(0) on its EP group's mesh (global "
                    f"ranks {list(mesh_ranks(self.mesh))}); the layer shards its experts "
                    "itself: keep them out of FSDP's fully_shard (see docs/mega_moe.md)", got))

    def reset_parameters(self) -> None:
        """torch.nn.Linear's initialisation of the full (dense) weights from the current RNG
        state, then this PE's shard: the same seed gives the same layer at any expert-parallel
        size."""
        E, H, I = self.num_experts, self.hidden_size, self.intermediate_size

        def linear(*shape):  # like nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
            bound = 1.0 / math.sqrt(shape[-1])
            return torch.empty(*shape, dtype=torch.float32).uniform_(-bound, bound)

        dense = {"router": linear(E, H), "gate_proj": linear(E, I, H),
                 "up_proj": linear(E, I, H), "down_proj": linear(E, H, I)}
        if self.shared_intermediate_size:
            Is = self.shared_intermediate_size
            dense.update(shared_gate_proj=linear(Is, H), shared_up_proj=linear(Is, H),
                         shared_down_proj=linear(H, Is))
        if self.gated_shared_expert:
            dense["shared_expert_gate"] = linear(1, H)
        self.load_dense_weights(**dense)

    @torch.no_grad()
    def load_dense_weights(self, router, gate_proj, up_proj, down_proj, shared_gate_proj=None,
                           shared_up_proj=None, shared_down_proj=None,
                           shared_expert_gate=None) -> None:
        """Loads full (every expert) weights in torch.nn.Linear orientation and keeps this PE's
        shard: router [E, H], gate_proj / up_proj [E, I, H], down_proj [E, H, I], and the shared
        expert's [Is, H], [Is, H], [H, Is] and gate [1, H] when the layer has them."""
        E, H, I = self.num_experts, self.hidden_size, self.intermediate_size
        Is = self.shared_intermediate_size
        expected = {"router": (E, H), "gate_proj": (E, I, H), "up_proj": (E, I, H),
                    "down_proj": (E, H, I)}
        given = {"router": router, "gate_proj": gate_proj, "up_proj": up_proj,
                 "down_proj": down_proj}
        if Is:
            expected.update(shared_gate_proj=(Is, H), shared_up_proj=(Is, H),
                            shared_down_proj=(H, Is))
            given.update(shared_gate_proj=shared_gate_proj, shared_up_proj=shared_up_proj,
                         shared_down_proj=shared_down_proj)
        if self.gated_shared_expert:
            expected["shared_expert_gate"] = (1, H)
            given["shared_expert_gate"] = shared_expert_gate
        for name, shape in expected.items():
            value = given[name]
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise value_error("mega_moe", name, f"a tensor of shape {shape}", got)
        first, last = self.rank * self.local_experts, (self.rank + 1) * self.local_experts
        for name, value in given.items():
            target = (self._router_weight() if name == "router"
                      else local_tensor(getattr(self, name)))  # no_grad: the local shard itself
            target.copy_(value[first:last] if name in _EXPERT_KEYS else value)

    def dense_weights(self) -> dict:
        """Collective over the group: the full weights, as load_dense_weights takes them."""
        out = {"router": self._router_weight().detach().clone()}
        for name in _EXPERT_KEYS:
            shard = local_tensor(getattr(self, name).detach()).contiguous()
            if self.pes == 1:
                out[name] = shard.clone()
                continue
            full = torch.empty((self.num_experts,) + tuple(shard.shape[1:]), dtype=shard.dtype)
            # gloo takes CPU tensors: an NPU shard goes through a host copy (which synchronizes)
            direct = shard.device.type in ("cpu", "cuda")
            _all_gather_single(full, shard if direct else shard.cpu(), group=self.group)
            out[name] = full if direct else full.to(shard.device)
        for name in _SHARED_KEYS:
            if hasattr(self, name):
                out[name] = getattr(self, name).detach().clone()
        return out

    def _router_weight(self) -> torch.Tensor:
        """The router's weight [E, H]: the layer's `router`, or its gate module's weight."""
        return self.router if self.gate is None else self.gate.weight

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        """Expert weights come as DTensors on this layer's mesh (or on a mesh of the same
        ranks), or as full plain tensors of every expert (this PE keeps its rows); a DTensor on
        another mesh or a checkpoint of another expert count is refused with ValueError."""
        if self.mesh is not None:
            for name in _EXPERT_KEYS:
                key = prefix + name
                if key in state_dict:
                    state_dict[key] = self._expert_state(name, state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _expert_state(self, name: str, value):
        param = getattr(self, name)
        if not isinstance(value, torch.Tensor):
            return value  # torch's own check reports it
        if tuple(value.shape[1:]) == tuple(param.shape[1:]) and value.shape[0] != self.num_experts:
            old_layout = (not isinstance(value, DTensor) and self.pes > 1
                          and value.shape[0] == self.local_experts)
            raise value_error("mega_moe", name, f"the weights of {self.num_experts} experts (shape "
                                          f"{tuple(param.shape)})", f"a checkpoint of "
                                          f"{value.shape[0]} experts (shape {tuple(value.shape)})"
                                          + ("; or this PE's local shard, as state dicts held them "
                                             "before the experts became DTensors (README): load "
                                             "the full weights with load_dense_weights()"
                                             if old_layout else ""))
        if isinstance(value, DTensor):
            if value.device_mesh == self.mesh and tuple(value.placements) == (Shard(0),):
                return value
            if (mesh_ranks(value.device_mesh) != mesh_ranks(self.mesh)
                    or tuple(value.placements) != (Shard(0),)):
                raise value_error(
                    "mega_moe",
                    name, f"a DTensor Shard(0) on the mesh of this layer's EP group (global "
                    f"ranks {list(mesh_ranks(self.mesh))}) or a full tensor",
                    f"a DTensor {tuple(value.placements)} on the mesh of global ranks "
                    f"{list(mesh_ranks(value.device_mesh))} (load a checkpoint of another EP "
                    f"size with torch.distributed.checkpoint, which reshards it, or pass "
                    f".full_tensor())")
            value = value.to_local()  # the same ranks and rows: this PE's rows already
        elif tuple(value.shape) == tuple(param.shape):
            first = self.rank * self.local_experts
            value = value[first:first + self.local_experts]
        else:
            return value  # torch's size-mismatch message
        local = value.detach().to(self.dtype).contiguous()
        return DTensor.from_local(local, self.mesh, [Shard(0)], run_check=False,
                                  shape=param.shape, stride=param.stride())

    # ---- forward ----------------------------------------------------------------------------

    @property
    def resources(self) -> MegaMoEResources | None:
        return self._resources

    def compute_dtype(self, device_type: str = "cpu") -> torch.dtype:
        """The dtype the routed experts compute in, and their rows travel in: under
        torch.autocast(device_type) the autocast dtype (as torch.nn.Linear computes there);
        else the param_dtype of the FSDP2 MixedPrecisionPolicy that mega_moe.fully_shard took
        the experts with (as FSDP2's own parameters compute in it); else the layer's dtype."""
        if torch.is_autocast_enabled(device_type):
            return torch.get_autocast_dtype(device_type)
        if self.fsdp_param_dtype is not None:
            return self.fsdp_param_dtype
        return self.dtype

    def _ensure_resources(self) -> MegaMoEResources:
        self._close_retired()
        if self._resources is None:
            self._resources = MegaMoEResources(
                self.hidden_size, self.num_experts, self.top_k, dtype=self.dtype,
                capacity_factor=self.capacity_factor, group=self.group)
        return self._resources

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, self.hidden_size)
        if self.gate is None:
            logits = flat.float() @ self._router_weight().float().t()
            ids, weights = route(logits, self.top_k, self.normalize_topk)
        else:
            logits, weights, ids = self.gate(flat)
        self.router_logits = logits
        return self.forward_routed(flat, ids, weights).reshape(shape)

    def forward_routed(self, x: torch.Tensor, topk_ids: torch.Tensor,
                       topk_weights: torch.Tensor) -> torch.Tensor:
        """The layer for routes chosen by the caller: x [T, H], topk_ids [T, k] (int64),
        topk_weights [T, k]."""
        if x.dim() != 2 or x.shape[1] != self.hidden_size:
            raise value_error("mega_moe", "x", f"a [T, {self.hidden_size}] tensor", tuple(x.shape))
        tokens, k = x.shape[0], self.top_k
        if tuple(topk_ids.shape) != (tokens, k) or tuple(topk_weights.shape) != (tokens, k):
            raise value_error("mega_moe", "topk_ids and topk_weights", f"of shape ({tokens}, {k})",
                                          (tuple(topk_ids.shape), tuple(topk_weights.shape)))
        flat_ids = topk_ids.reshape(-1).to(torch.int64)
        if torch.compiler.is_compiling():
            return self._forward_routed_traced(x, flat_ids, topk_weights)
        self.check_routes(flat_ids)
        self._check_experts()
        resources = self._ensure_resources()
        order = torch.argsort(flat_ids, stable=True)
        token = order // k
        compute = self.compute_dtype(x.device.type)
        local_counts = torch.bincount(flat_ids, minlength=self.num_experts)
        counts = resources.exchange_counts(local_counts, compute)
        self.tokens_per_expert, self.group_tokens_per_expert = local_counts, counts.sum(0)
        layout = resources.layout(counts)
        # The rows x[token] go out; the shared expert runs between the two halves of the
        # call: while this PE waits for the other PEs' experts (forward and backward).
        gate, up, down = self.local_expert_weights()
        results, shared = expert_parallel(x, token, gate, up, down, resources, counts, layout,
                                          between=lambda: self._shared_expert(x), dtype=compute)
        return self._combine(x, topk_weights, order, token, results, shared)

    def _forward_routed_traced(self, x, flat_ids, topk_weights):
        """forward_routed under torch.compile: the expert-parallel call is the custom ops
        hps_moe::forward / backward (_ops), whose kernels run this layer's pipeline; the rest
        is traced. The shared expert is computed in the graph, where the compiler places it,
        not between the call's halves (the overlap this buys on a device is eager-only)."""
        k = self.top_k
        self._check_experts()
        order = torch.argsort(flat_ids, stable=True)
        token = order // k
        compute = self.compute_dtype(x.device.type)
        gate, up, down = self.local_expert_weights()
        rows = x[token].to(compute)
        keep = torch.is_grad_enabled() and any(t.requires_grad for t in (rows, gate, up, down))
        results, local_counts, counts = _ops.expert_call(self._op_number, rows, flat_ids, gate,
                                                         up, down, keep)
        self.tokens_per_expert, self.group_tokens_per_expert = local_counts, counts.sum(0)
        return self._combine(x, topk_weights, order, token, results, self._shared_expert(x))

    def check_routes(self, flat_ids: torch.Tensor) -> None:
        """ValueError unless every routed expert id is in [0, num_experts) (reads the ids)."""
        if flat_ids.numel() and (int(flat_ids.min()) < 0 or int(flat_ids.max()) >= self.num_experts):
            raise value_error("mega_moe", "topk_ids", f"in [0, {self.num_experts})",
                                          (int(flat_ids.min()), int(flat_ids.max())))

    def _combine(self, x, topk_weights, order, token, results, shared):
        """The layer's output [T, H] in x's dtype: each routed row's result (rows in `order`,
        of token `token`) weighted by its routing weight and summed per token in fp32, plus the
        shared expert's output `shared` (None: none). Every forward path ends here."""
        weights = topk_weights.reshape(-1)[order].float()
        out = torch.zeros(x.shape[0], self.hidden_size, dtype=torch.float32,
                          device=x.device).index_add(0, token, results.float() * weights[:, None])
        if shared is not None:
            out = out + shared
        return out.to(x.dtype)

    def _shared_expert(self, x: torch.Tensor):
        """The shared expert's output [T, H] in fp32 (None without one). It computes in its
        weights' dtype as they are at the call: the layer's, or the param_dtype FSDP2's mixed
        precision cast them to (autocast casts on top of either)."""
        if not self.shared_intermediate_size:
            return None
        x = x.to(self.shared_gate_proj.dtype)
        shared = swiglu(x, self.shared_gate_proj, self.shared_up_proj,
                        self.shared_down_proj).float()
        if self.gated_shared_expert:
            shared = shared * torch.sigmoid(x @ self.shared_expert_gate.t()).float()
        return shared

    def close(self) -> None:
        """Frees the layer's own resources (collective); shared resources are their owner's to
        close. Idempotent."""
        self._close_retired()
        if self._owns_resources and self._resources is not None:
            self._resources.close()
            self._resources = None

    def _close_retired(self) -> None:
        """Closes (collective) the layer's own resources of its dtype before a conversion."""
        while self._retired:
            self._retired.pop(0).close()

    def _apply(self, fn, recurse=True):
        """torch.nn.Module's conversions (.to(dtype), .half(), .bfloat16(), .float(), ...). A
        change of the layer's dtype converts its parameters and its buffers: the layer's own
        resources of the old dtype are closed (collective, like their construction) at its next
        call or close(), and new ones in the new dtype are made at that call. With resources
        given to the layer (shared), ValueError at once, before anything is converted: build
        MegaMoEResources(..., dtype=<new>) and layers of that dtype, or use torch.autocast,
        under which the experts compute in the autocast dtype with the parameters unchanged.
        Expert DTensors moved to another device type are rewrapped on that device's mesh."""
        new = self.check_conversion(fn)
        result = super()._apply(fn, recurse)
        if new != self.dtype:
            self.dtype = new
            if self._resources is not None:  # closed at the next call (collective)
                self._retired.append(self._resources)
                self._resources = None
        # Expert DTensors moved to another device type (.cuda() and the like) are rewrapped on
        # the EP group's mesh of that device type.
        if self.mesh is not None:
            device = local_tensor(self.gate_proj.detach()).device.type
            if device != self.mesh.device_type:
                self.mesh = ep_mesh(self.group, device)
                for name in _EXPERT_KEYS:
                    old = getattr(self, name)
                    local = local_tensor(old.detach())
                    setattr(self, name, nn.Parameter(DTensor.from_local(
                        local, self.mesh, [Shard(0)], run_check=False, shape=old.shape,
                        stride=old.stride()), requires_grad=old.requires_grad))
        return result

    def check_conversion(self, fn) -> torch.dtype:
        """The dtype the conversion `fn` (what nn.Module._apply is given) makes of the layer's;
        ValueError when the layer cannot take it (shared resources of its dtype, or a dtype
        the layer does not compute in). A parent calls it for every layer before it converts
        anything (mega_moe.model.MoEDecoder)."""
        probe = fn(torch.empty(0, dtype=self.dtype))  # what the conversion makes of the dtype
        new = probe.dtype if isinstance(probe, torch.Tensor) else self.dtype
        if new != self.dtype:
            if not self._owns_resources:
                raise value_error(
                    "mega_moe",
                    "a conversion of a MegaMoE layer with shared resources", "to its resources' "
                    f"dtype {self.dtype}: build MegaMoEResources(..., dtype={new}) and the layers "
                    f"with dtype={new}, or run under torch.autocast (the experts then compute "
                    f"in the autocast dtype)", new)
            _dtype_check(new)
        return new

    def __enter__(self) -> "MegaMoE":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def extra_repr(self) -> str:
        return (f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
                f"num_experts={self.num_experts}, top_k={self.top_k}, pes={self.pes}, "
                f"local_experts={self.local_experts}, shared={self.shared_intermediate_size}, "
                f"gated_shared={self.gated_shared_expert}, normalize_topk={self.normalize_topk}")
