"""torch's own symmetric-memory API (torch.distributed._symmetric_memory) on this runtime
(docs/api.md, "torch's symmetric-memory API").

Importing the package registers the allocator "HPS" for the CPU (unless a backend already took
the CPU) and makes "HPS_NPU" available to symm_mem.set_backend. The allocator, the handle and
the data-moving operators are native (bindings/torch/symm_mem*.cc); here are what the native
side asks of Python (acquiring the runtime, a torch group's ranks and team) and the operators
torch itself writes in Python (get_remote_tensors, the low-contention collectives, the fused
matmuls), on the CPU, built on this runtime's gets.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as _torch_symm_mem
from torch._C._distributed_c10d import _SymmetricMemory

from . import _api, _lifecycle, _teams
from ._runtime import native

_implicit: "_lifecycle.Handle | None" = None  # the handle symm_mem.empty acquired
_group_teams: dict = {}  # torch group name -> the Team of a subgroup (this lifecycle)
_workspaces: dict = {}  # torch group name -> a symm_mem buffer the Python operators stage in


def _ensure_runtime() -> None:
    """The first symm_mem.empty acquires the runtime over the WORLD when the program has not
    (collective, like the allocation that calls it)."""
    global _implicit
    if native.state() != "ready":
        _implicit = _lifecycle.acquire_shmem()


def _group_info(group_name: "str | None") -> tuple:
    """(team or None for the WORLD, the group's ranks as world PEs, this process's rank in it)
    for a torch group name; a subgroup's team is made on first use (collective over its
    members) and kept until shutdown()."""
    world = native.snapshot()["root_size"] if not dist.is_initialized() else dist.get_world_size()
    if group_name is None or not dist.is_initialized():
        me = dist.get_rank() if dist.is_initialized() else 0
        return None, list(range(world)), me
    group = dist.distributed_c10d._resolve_process_group(group_name)
    ranks = list(dist.get_process_group_ranks(group))
    if ranks == list(range(world)):
        return None, ranks, group.rank()
    team = _group_teams.get(group_name)
    if team is None:
        team = _teams.team(group)
        _group_teams[group_name] = team
    return team, ranks, group.rank()


def before_close() -> None:
    """The last handle is closing (collectively): drop what symm_mem holds on its own."""
    native.symm_mem_forget_handles()
    _workspaces.clear()


def lifecycle_ended() -> None:
    """The runtime closed: the handles and teams of its lifecycle are gone."""
    native.symm_mem_forget_handles()
    _group_teams.clear()
    _workspaces.clear()


def shutdown() -> None:
    """Collective: ends this process's use of torch's symm_mem API on this runtime. Drops the
    handles and the operators' workspaces, gives back every allocation all ranks released,
    destroys the subgroups' teams, and closes the runtime if symm_mem.empty acquired it (the
    program's own handles stay theirs to close). Tensors of symm_mem.empty still alive keep
    the runtime from closing (INVALID_STATE naming them), as shmem.empty's do."""
    global _implicit
    native.symm_mem_forget_handles()
    _workspaces.clear()
    if native.state() == "ready":
        native.symm_mem_reclaim()
    for team in _group_teams.values():
        team.destroy()
    _group_teams.clear()
    if _implicit is not None:
        handle, _implicit = _implicit, None
        handle.close()


def _register() -> None:
    native.symm_mem_register(cpu_default=True)
    _guard_signal_pads()


def _guard_signal_pads() -> None:
    """torch 2.13's get_signal_pad (not virtual, unlike the pointers it reads) makes a tensor at
    address 0 for a rank whose pad this process does not map; get_buffer raises there. Give it
    get_buffer's check (idempotent)."""
    original = _SymmetricMemory.get_signal_pad
    if getattr(original, "_hps_guard", False):
        return

    def get_signal_pad(self, rank, *args, **kwargs):
        pointers = self.signal_pad_ptrs
        if 0 <= rank < len(pointers) and pointers[rank] == 0:
            raise RuntimeError(f"Cannot get signal pad across nodes, my rank: {self.rank}, "
                               f"peer: {rank} (its pad is reached by put_signal and wait_signal)")
        return original(self, rank, *args, **kwargs)

    get_signal_pad._hps_guard = True
    get_signal_pad.__doc__ = original.__doc__
    _SymmetricMemory.get_signal_pad = get_signal_pad


_npu_kernels: "list | None" = None  # the operators this package registered for the NPU


def _register_npu() -> None:
    """At the first allocation of "HPS_NPU" (torch_npu is loaded by then): the operators' NPU
    kernels, each only where torch_npu has none."""
    global _npu_kernels
    if _npu_kernels is not None:
        return
    names = list(native.symm_mem_register_npu())
    for name, kernel in _PYTHON_KERNELS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"symm_mem::{name}", "PrivateUse1"):
            _lib.impl(name, kernel, "PrivateUse1")
            names.append(name)
    _npu_kernels = names


# ---- the operators torch writes in Python, on the CPU ------------------------------------

_lib = torch.library.Library("symm_mem", "IMPL")


def _group(group_name: str) -> tuple:
    """(world size, this rank, the group's world PEs) of a torch group name."""
    _, ranks, rank = _group_info(group_name)
    return len(ranks), rank, ranks


def _staged(tensor: torch.Tensor, group_name: str) -> torch.Tensor:
    """`tensor` itself when it is symm_mem's and contiguous, else a copy in the group's
    workspace (allocated collectively on first use, grown when too small)."""
    if _SymmetricMemory.is_symm_mem_tensor(tensor) and tensor.is_contiguous():
        return tensor
    nbytes = tensor.numel() * tensor.element_size()
    space = _workspaces.get(group_name)
    if space is None or space.numel() < nbytes:
        _workspaces.pop(group_name, None)
        space = _torch_symm_mem.empty(max(nbytes, 1), dtype=torch.uint8, device=tensor.device)
        _workspaces[group_name] = space
    staged = space[:nbytes].view(tensor.dtype).view(tensor.shape)
    staged.copy_(tensor)
    return staged


def _barrier(group_name: str) -> None:
    team, _, _ = _group_info(group_name)
    _api.barrier(team)


def _gather_chunks(source: torch.Tensor, group_name: str) -> torch.Tensor:
    """Every rank's `source` (symmetric), stacked in rank order: this runtime's gets."""
    world, rank, pes = _group(group_name)
    out = source.new_empty(world, *source.shape)
    _barrier(group_name)
    for step in range(world):
        peer = (rank - step) % world
        _api.get(out[peer], source, pe=pes[peer])
    _barrier(group_name)
    return out


def _reduce_chunk(source: torch.Tensor, group_name: str, reduce_op: str) -> torch.Tensor:
    """Chunk `rank` (dim 0) of every rank's `source`, reduced ("sum" or "avg") in rank order."""
    if reduce_op not in ("sum", "avg"):
        raise ValueError(f"reduce_op ({reduce_op}) is not supported")
    world, rank, pes = _group(group_name)
    if source.shape[0] % world != 0:
        raise ValueError(f"dim 0 ({source.shape[0]}) must be divisible by the group size "
                         f"({world})")
    mine = source.chunk(world)[rank]
    total = torch.empty_like(mine)
    part = torch.empty_like(mine)
    _barrier(group_name)
    for peer in range(world):
        _api.get(total if peer == 0 else part, mine, pe=pes[peer])
        if peer > 0:
            total.add_(part)
    _barrier(group_name)
    return total.div_(world) if reduce_op == "avg" else total


def _get_remote_tensors(local: torch.Tensor, group_name: str) -> tuple:
    hdl = _torch_symm_mem.rendezvous(local, group_name)
    return tuple(hdl.get_buffer(peer, local.size(), local.dtype, local.storage_offset())
                 for peer in range(hdl.world_size))


def _low_contention_all_gather(tensor: torch.Tensor, group_name: str) -> torch.Tensor:
    gathered = _gather_chunks(_staged(tensor, group_name), group_name)
    return gathered.flatten(0, 1) if tensor.dim() > 0 else gathered


def _low_contention_reduce_scatter(tensor: torch.Tensor, reduce_op: str,
                                   group_name: str) -> torch.Tensor:
    return _reduce_chunk(_staged(tensor, group_name), group_name, reduce_op)


def _fused_all_gather_matmul(A_shard: torch.Tensor, Bs: list, gather_dim: int, group_name: str,
                             *, return_A: bool = True) -> tuple:
    # The gather is this runtime's gets; the arithmetic is torch's fallback's, op for op.
    world, _, _ = _group(group_name)
    A = _gather_chunks(_staged(A_shard.contiguous(), group_name), group_name)
    if gather_dim == A_shard.dim() - 1 or gather_dim == -1:
        A_mm = torch.cat(A.flatten(0, 1).chunk(world), dim=-1)
        return (A_mm if return_A else None), [torch.matmul(A_mm, B) for B in Bs]
    A = A.movedim(gather_dim + 1, 1).flatten(0, 1)
    res = [torch.matmul(A, B).movedim(0, gather_dim) for B in Bs]
    return (A.movedim(0, gather_dim) if return_A else None), res


def _fused_matmul_reduce_scatter(A: torch.Tensor, B: torch.Tensor, reduce_op: str,
                                 scatter_dim: int, group_name: str) -> torch.Tensor:
    product = (A @ B).movedim(scatter_dim, 0).contiguous()
    reduced = _reduce_chunk(_staged(product, group_name), group_name, reduce_op)
    return reduced.movedim(0, scatter_dim)


def _no_multicast(name: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"symm_mem.{name}: no multicast on this backend (HPS); use "
                           "one_shot_all_reduce or two_shot_all_reduce_ instead")
    return refuse


# torch writes these in Python for CUDA; here they are this runtime's, for the CPU now and for
# the NPU at its first allocation (_register_npu).
_PYTHON_KERNELS = {
    "get_remote_tensors": _get_remote_tensors,
    "_low_contention_all_gather": _low_contention_all_gather,
    "_low_contention_reduce_scatter": _low_contention_reduce_scatter,
    "fused_all_gather_matmul": _fused_all_gather_matmul,
    "fused_matmul_reduce_scatter": _fused_matmul_reduce_scatter,
}
for _name in ("multimem_all_reduce_", "multimem_one_shot_all_reduce",
              "multimem_one_shot_all_reduce_out", "multimem_one_shot_reduce_out",
              "multimem_all_gather_out"):
    _PYTHON_KERNELS[_name] = _no_multicast(_name)
for _name, _kernel in _PYTHON_KERNELS.items():
    _lib.impl(_name, _kernel, "CPU")

# Meta kernels (shapes only, for torch.compile's tracing) of the operators torch registers none
# for: what each returns is one of its arguments (None for the all-to-all).
_META_RETURNS = {
    "all_to_all_vdev": None,
    "one_shot_all_reduce_out": "out",
    "one_shot_all_reduce_copy_out": "out",
    "two_shot_all_reduce_": "input",
    "two_shot_all_reduce_out": "output",
    "reduce_scatter_out": "output",
    "memset32_": "input",
    "stream_write_value32_": "input",
}


def _meta_kernel(name: str, returns: "str | None"):
    schema = getattr(torch.ops.symm_mem, name).default._schema
    names = [argument.name for argument in schema.arguments]

    def meta(*args, **kwargs):
        if returns is None:
            return None
        bound = dict(zip(names, args), **kwargs)
        return bound[returns]
    return meta


for _name, _returns in _META_RETURNS.items():
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"symm_mem::{_name}", "Meta"):
        _lib.impl(_name, _meta_kernel(_name, _returns), "Meta")
