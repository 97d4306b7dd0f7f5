// Teams from Python (docs/teams.md): the package's shmem.Team as a native TeamHandle. A Team
// holds one native handle object (teams.cc) in its `_native`; the predefined TEAM_WORLD and
// TEAM_NODE hold markers that stand for the current lifecycle's world and node team. Every
// entry that takes an optional team (the primitives here, a consumer's ops in their own module)
// converts it with TeamArgument. Includes pybind11 only, no torch.
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>

#include "bindings/torch/export.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {

/// The team a Python `team=` argument of `operation` names: None is the world team
/// (kWorldTeam); a shmem.Team is its native handle (TEAM_NODE asks the Runtime for the node
/// team: ShmemError outside a lifecycle). Anything else raises ShmemTypeError ('team must be a
/// shmem.Team or None, but got int') at `operation`. Needs the GIL; the handle itself is
/// checked by the Runtime at its use (a destroyed one, one of an older lifecycle, ...).
HPS_BINDING_API TeamHandle TeamArgument(std::string_view operation, const pybind11::handle& team);

/// The world PE number of `team`'s PE `team_pe` for `operation` (put, get, ...): the team PE
/// itself for the world team, else the Runtime's translation; a refusal raises ShmemError
/// tagged with `operation`.
int WorldPe(std::string_view operation, const pybind11::handle& team, int team_pe);
/// The same for a team already converted (needs no GIL).
int WorldPe(std::string_view operation, const TeamHandle& team, int team_pe);

}  // namespace hyper_parallel::shmem::binding
