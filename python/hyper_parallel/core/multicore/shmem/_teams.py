"""Teams: subsets of the PEs with collectives of their own (OpenSHMEM's and NVSHMEM's teams).

A team numbers its PEs 0 .. n_pes - 1 in its own order and has its own collective sequence,
so collectives on disjoint teams run at the same time, and PEs of one team whose calls differ
all raise COLLECTIVE_MISMATCH naming the team. A Team is one native handle: Teams of the same
PEs in the same order share one native team, which ends with its last handle; every team ends
at the last close. The Runtime checks the handle at every use: a destroyed one is refused
(INVALID_ARGUMENT), one of an older lifecycle too (STALE_LIFECYCLE).

TEAM_WORLD and TEAM_NODE are predefined: they stand for the current lifecycle's world and node
team (every PE: all PEs share one host), in every lifecycle, and are never destroyed.
"""

from __future__ import annotations

import torch.distributed as dist

from ._runtime import ShmemError, assertion, end_block, native, type_error, value_error
from ._runtime import require_int as _require_int, type_name as _type_name


class Team:
    """A team: a subset of the PEs, numbered 0 .. n_pes - 1 in its own order.

    Made by team_split_strided(), team_split_2d() and team(group), never directly; TEAM_WORLD
    and TEAM_NODE are predefined. Pass it as `team=` to barrier, all_gather and all_to_all
    (collective over the team, results in team-PE order) and to put, get, signal and
    put_signal (pe is then a team PE number). destroy() is collective over the team; `with
    team as t:` destroys it on leaving the block. A Team dropped without destroy() lives on
    natively until the last close (destroy is collective, so no finaliser may run it).
    """

    __slots__ = ("_native", "_name", "_destroyed", "_code", "__weakref__")

    def __init__(self, handle: object, _name: str | None = None) -> None:
        if not isinstance(handle, native.TeamHandle):
            raise type_error(
                "Team", "Team", "made by shmem.team(), team_split_strided() or team_split_2d()",
                f"Team({_type_name(handle)})")
        self._native = handle
        self._name = _name        # "TEAM_WORLD" / "TEAM_NODE" for the predefined ones
        self._destroyed = False   # destroyed through this object
        # The team as the custom ops take it (_ops.team_code, docs/compile.md): plain ints, so
        # that a compiled function reads it without a native call.
        self._code = tuple(handle.op_code)

    @property
    def predefined(self) -> bool:
        """True for TEAM_WORLD and TEAM_NODE."""
        return self._name is not None

    def _describe(self) -> dict:
        return native.team_describe(self)

    @property
    def my_pe(self) -> int:
        """This PE's number in the team. Raises ShmemError for a refused handle (destroyed,
        of an older lifecycle) and outside a lifecycle."""
        return int(self._describe()["my_pe"])

    @property
    def n_pes(self) -> int:
        """The number of PEs in the team."""
        return len(self._describe()["pes"])

    @property
    def pes(self) -> tuple:
        """The team's PEs as world PE numbers (shmem.my_pe()'s numbering), in team-PE order."""
        return tuple(self._describe()["pes"])

    def translate_pe(self, pe: int, other_team: "Team | None") -> int:
        """The number in other_team (None: TEAM_WORLD) of this team's PE pe, or -1 when that
        PE is not in both teams (as OpenSHMEM's shmem_team_translate_pe). Process-local."""
        pe = _require_int("translate_pe", "pe", pe)
        if other_team is None:
            other_team = TEAM_WORLD
        elif not isinstance(other_team, Team):
            raise type_error("translate_pe", "other_team", "a shmem.Team or None",
                             _type_name(other_team))
        mine = self.pes
        if not 0 <= pe < len(mine):
            return -1
        theirs = other_team.pes
        world = mine[pe]
        return theirs.index(world) if world in theirs else -1

    def destroy(self) -> None:
        """Collective over the team's PEs: ends this handle; the native team ends with its
        last handle. A second destroy of the same Team, like any later use of it, raises
        ShmemError INVALID_ARGUMENT; TEAM_WORLD and TEAM_NODE cannot be destroyed."""
        if self._name is not None:
            raise value_error("team_destroy", "team", "a team made by a split or shmem.team() "
                              "(the predefined teams end with the lifecycle)", self._name)
        native.team_destroy(self)
        self._destroyed = True

    def __enter__(self) -> "Team":
        if self._name is not None:
            raise value_error("team", "a team used as a context manager", "one made by a split "
                              "or shmem.team() (leaving the block destroys it)", self._name)
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if self._destroyed:
            return  # destroyed inside the block
        # After an exception every PE of the team leaves the same way when they all raised alike.
        end_block(self.destroy, exc, "destroying the shmem team")

    def __repr__(self) -> str:
        if self._name is not None:
            head = self._name
        else:
            head = f"slot={self._native.slot}, id={self._native.id}"
        if self._destroyed:
            return f"Team({head}, destroyed)"
        try:
            info = self._describe()
        except ShmemError as error:  # outside a lifecycle, refused handle
            return f"Team({head}, {error.error_code})"
        return f"Team({head}, pes={tuple(info['pes'])}, my_pe={info['my_pe']})"


TEAM_WORLD = Team(native.predefined_team("world"), "TEAM_WORLD")
TEAM_NODE = Team(native.predefined_team("node"), "TEAM_NODE")
native.set_team_class(Team)


def _parent(operation: str, parent: object) -> Team:
    if parent is None:
        return TEAM_WORLD
    if not isinstance(parent, Team):
        raise type_error(operation, "parent", "a shmem.Team or None", _type_name(parent))
    return parent


def _made(handle: object) -> "Team | None":
    return None if handle is None else Team(handle)


def team_split_strided(parent: "Team | None", start: int, stride: int,
                       size: int) -> "Team | None":
    """Collective over parent's PEs (None: TEAM_WORLD), with the same arguments on every one:
    the team of parent PEs start, start + stride, ..., size of them, numbered in that order.
    Returns the new Team on its members and None on the other parent PEs. A triplet outside
    the parent raises INVALID_ARGUMENT on every PE alike; arguments that differ across the
    parent raise COLLECTIVE_MISMATCH on every parent PE; no team slot free on every PE of the
    new team (HYPER_PARALLEL_SHMEM_MAX_TEAMS) raises INVALID_STATE on each of them alike."""
    return _made(native.team_split_strided(_parent("team_split_strided", parent), start, stride,
                                           size))


def team_split_2d(parent: "Team | None", xrange: int) -> tuple:
    """Collective over parent's PEs (None: TEAM_WORLD): parent PE p sits at (x, y) =
    (p mod xrange, p div xrange) of a grid xrange wide. Returns (xteam, yteam): xteam is this
    PE's row (the PEs with its y, numbered by x), yteam its column (the PEs with its x,
    numbered by y); every PE is in one of each. The same refusals as team_split_strided."""
    xteam, yteam = native.team_split_2d(_parent("team_split_2d", parent), xrange)
    return _made(xteam), _made(yteam)


def _non_member(group_ranks: "list | None") -> ShmemError:
    ranks = "" if group_ranks is None else f" of global ranks {group_ranks}"
    return value_error("team", "group", "a process group this process is a member of (team() "
                       "is collective over the group's members only)",
                       f"a group{ranks} without this process (global rank {dist.get_rank()})")


def team(group: "dist.ProcessGroup | None") -> Team:
    """Collective over the group's members only: the team of a torch.distributed process
    group's ranks, numbered in the group's rank order (dist.get_process_group_ranks), so that
    team PE i is group rank i. None is the default group (dist.group.WORLD). Global ranks are
    mapped to PE numbers through the root group's global ranks. A process outside the group
    must not call it (ShmemError INVALID_ARGUMENT). Groups of the same ranks in the same order
    share one native team; each call returns its own handle, to be destroyed."""
    if not (dist.is_available() and dist.is_initialized()):
        raise ShmemError.make(
            "INVALID_STATE", "team", "validate",
            assertion("torch.distributed is not initialised", needed_by="team(group)"))
    if group is None:
        group = dist.group.WORLD
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        # new_group() hands this to processes outside the group.
        raise _non_member(None)
    if not isinstance(group, dist.ProcessGroup):
        raise type_error("team", "group", "a torch.distributed ProcessGroup or None",
                         _type_name(group))
    ranks = list(dist.get_process_group_ranks(group))
    if dist.get_rank() not in ranks:
        raise _non_member(ranks)
    snapshot = native.snapshot()
    if snapshot["state"] != "ready":
        native.team_describe(None)  # raises the Runtime's own error (not ready, terminal)
    root = list(snapshot["global_ranks"])
    missing = [rank for rank in ranks if rank not in root]
    if missing:
        raise value_error("team", "group ranks", f"global ranks of the root group {root}", ranks)
    return Team(native.team_create([root.index(rank) for rank in ranks]))
