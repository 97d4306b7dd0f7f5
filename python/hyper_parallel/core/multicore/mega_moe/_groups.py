"""Expert-parallel (EP) groups: which PEs a MegaMoE layer runs over, and the data-parallel
(DP) groups beside them.

A MegaMoE layer runs expert parallel over the PEs of a torch.distributed process group (None:
the whole WORLD). Over a group smaller than the WORLD its SHMEM traffic runs over the group's
shmem team (shmem.team(group)): the count exchange, barriers, dispatch and combine, with the
experts owned and numbered by team PE (= the rank in the group). The symmetric heap stays the
WORLD's: the resources' allocations (and their construction) are collective over every PE,
in the same order, so every EP group builds the same layers in the same order, as DP replicas
do.

A group can be an EP group of a layer with E experts when this rank is in it and its size
divides E. expert_data_parallel_groups(ep_size) makes the usual grid: EP groups of ep_size
consecutive ranks and DP groups of the ranks with the same place in their EP group.

ep_mesh(group) is the 1-D DeviceMesh ("ep") over the EP group's global ranks that the layers'
expert weights are DTensors on (Shard(0)): one mesh per EP group, shared by every layer over it,
built on the group itself (DeviceMesh.from_group: no new process group, so each EP group makes
its own mesh without the others).
"""

from __future__ import annotations

import atexit
import gc
from dataclasses import dataclass

import torch.distributed as dist

from ..shmem.errors import type_error, value_error

# Why a group cannot be an EP group (the codes travel between PEs in the resources' check).
FITS, NOT_A_MEMBER, SIZE_DOES_NOT_DIVIDE = 0, 1, 2
_WHY = {NOT_A_MEMBER: "a group without this rank",
        SIZE_DOES_NOT_DIVIDE: "a group whose size does not divide num_experts"}


@dataclass(frozen=True)
class EpGroup:
    """The EP group of this rank: its global ranks in group-rank order, this rank's place in it
    (-1 when this rank is not in it) and whether it is the whole WORLD."""

    ranks: tuple
    rank: int
    world: bool

    @property
    def size(self) -> int:
        return len(self.ranks)

    def problem(self, num_experts: int) -> int:
        """FITS, or why this group cannot be the EP group of `num_experts` experts."""
        if self.rank < 0:
            return NOT_A_MEMBER
        if num_experts % self.size != 0:
            return SIZE_DOES_NOT_DIVIDE
        return FITS

    def describe(self, problem: int) -> str:
        return f"{_WHY[problem]} (global ranks {list(self.ranks)})"


def ep_group_of(group) -> EpGroup:
    """The EP group `group` (a torch.distributed ProcessGroup, or None for the whole WORLD)
    names for this rank. Without torch.distributed: the one process."""
    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise value_error("mega_moe", "group", "None when torch.distributed is not initialised",
                                          type(group).__name__)
        return EpGroup((0,), 0, True)
    world = dist.get_world_size()
    if group is None or group is dist.group.WORLD:
        return EpGroup(tuple(range(world)), dist.get_rank(), True)
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        # new_group() hands this to the processes outside the group: its ranks are unknown here.
        return EpGroup((), -1, False)
    if not isinstance(group, dist.ProcessGroup):
        raise type_error("mega_moe", "group", "a torch.distributed ProcessGroup or None",
                                     type(group).__name__)
    members = dist.get_process_group_ranks(group)
    ranks = tuple(sorted(members, key=lambda rank: dist.get_group_rank(group, rank)))
    me = dist.get_rank()
    rank = ranks.index(me) if me in ranks else -1
    return EpGroup(ranks, rank, ranks == tuple(range(world)))


def check_ep_group(ep: EpGroup, num_experts: int) -> None:
    """Raises ValueError, at a layer's construction, when `ep` cannot be the EP group of
    `num_experts` experts on this rank."""
    problem = ep.problem(num_experts)
    if problem == NOT_A_MEMBER:
        raise value_error("mega_moe", "group", "a process group this rank is in (an "
                                      "expert-parallel group of it)", ep.describe(problem))
    if problem == SIZE_DOES_NOT_DIVIDE:
        raise value_error("mega_moe", "num_experts", f"a multiple of the group size {ep.size}",
                                      num_experts)


def check_dp_members(ep: EpGroup, dp_group) -> None:
    """Collective over `dp_group`: raises ValueError on every member unless every member has
    the same place in its EP group as this rank (the experts' replicas: the same experts), and
    this rank is the only member of `dp_group` in `ep`. A group of the right size but the wrong
    ranks (the EP group itself, say) would sum other experts' gradients into this rank's."""
    import torch

    places = [torch.zeros(2, dtype=torch.int64) for _ in range(dist.get_world_size(dp_group))]
    dist.all_gather(places, torch.tensor([ep.rank, ep.size], dtype=torch.int64), group=dp_group)
    members = dist.get_process_group_ranks(dp_group)
    shared = sorted(set(members) & set(ep.ranks))
    if any(p.tolist() != [ep.rank, ep.size] for p in places) or shared != [dist.get_rank()]:
        raise value_error(
            "mega_moe",
            "dp_group", "the data-parallel group of this rank's experts: the ranks with the same "
            "place in their expert-parallel groups, one from each (expert_data_parallel_groups' "
            "second)", f"global ranks {sorted(members)} at EP places "
            f"{[int(p[0]) for p in places]} (this rank's EP group: {list(ep.ranks)})")


def expert_data_parallel_groups(ep_size: int) -> tuple:
    """(ep_group, dp_group) of this rank on the grid of WORLD = ep_size x (world / ep_size):
    EP groups of consecutive ranks [i * ep_size, (i + 1) * ep_size), DP groups of the ranks with
    the same place in their EP group (ranks j, j + ep_size, ...). Collective over the WORLD
    (torch.distributed.new_group for every group, in the same order on every rank). With
    ep_size = world: (None, None) (EP over the WORLD, no DP replicas)."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    if isinstance(ep_size, bool) or not isinstance(ep_size, int) or ep_size < 1 \
            or world % ep_size:
        raise value_error("mega_moe", "ep_size", f"a positive divisor of the world size {world}",
                                      repr(ep_size))
    if ep_size == world:
        return None, None
    rank = dist.get_rank()
    ep_group = dp_group = None
    for first in range(0, world, ep_size):
        group = dist.new_group(list(range(first, first + ep_size)))
        if first <= rank < first + ep_size:
            ep_group = group
    for place in range(ep_size):
        group = dist.new_group(list(range(place, world, ep_size)))
        if rank % ep_size == place:
            dp_group = group
    return ep_group, dp_group


# One mesh per EP group's ranks (and device type): layers over the same group share it (a
# model's experts are then on one mesh, which optimizers and clip_grad_norm_ group by). torch's
# DTensor sharding cache hands back, for a new mesh, any earlier mesh of the same ranks (meshes
# compare equal by ranks, whatever their process group), so a second mesh of the same ranks
# would not stay apart from the first: the one mesh of those ranks is pointed at the newest
# group instead (a group destroyed and made again, as between tests, leaves no stale mesh).
_MESHES: dict = {}


@atexit.register
def _forget_meshes() -> None:
    """At exit, before the interpreter finalises: the meshes let go of their process groups, so
    that a group nothing else holds is destroyed now, joining gloo's worker threads while they
    can still take the GIL. A mesh holds its group (its _pg_registry), and DTensor's sharding
    caches hold the meshes of the specs they saw, past destroy_process_group and into
    finalisation: a gloo worker thread still releasing its last collective's tensors then
    needed the GIL, and Python's finalisation ended it with pthread_exit through a noexcept
    frame: std::terminate ("terminate called without an active exception", the PE aborted after
    its work was done; once in 5 to 100 runs of the MegaMoE demo beside a CPU hog)."""
    for _, mesh in _MESHES.values():
        registry = getattr(mesh, "_pg_registry", None)
        if isinstance(registry, dict):
            registry.clear()
    _MESHES.clear()
    gc.collect()


def ep_mesh(group, device_type: str = "cpu"):
    """The 1-D DeviceMesh named "ep" over `group`'s global ranks in group-rank order (None: the
    WORLD); None without torch.distributed (one process holds every expert as a plain tensor).
    Local: made from the group itself, so no other process takes part."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    from torch.distributed.device_mesh import DeviceMesh

    if group is None:
        group = dist.group.WORLD
    key = (tuple(dist.get_process_group_ranks(group)), device_type)
    entry = _MESHES.get(key)
    if entry is None:
        entry = [group, DeviceMesh.from_group(group, device_type, mesh_dim_names=("ep",))]
        _MESHES[key] = entry
    elif entry[0] is not group:
        # What DeviceMesh.from_group records of its group, pointed at this one.
        mesh = entry[1]
        mesh._dim_group_names = [group.group_name]
        mesh._pg_registry[group.group_name] = group
        entry[0] = group
    return entry[1]


def mesh_ranks(mesh) -> tuple:
    """The global ranks of a 1-D DeviceMesh, in mesh order."""
    return tuple(int(rank) for rank in mesh.mesh.flatten().tolist())
