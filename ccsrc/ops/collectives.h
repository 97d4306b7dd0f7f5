// The collectives this build provides, by name: the one list a new collective joins
// (collectives.cc), so that neither the Runtime nor the binding names a concrete one. The
// binding looks a collective up by the name its Python entry passes and hands it to
// Runtime::RunCollective.
//
// Thread-safety: the list is constant; every function may be called from any thread.
#pragma once

#include <span>
#include <string_view>

#include "data_plane/collective.h"

namespace hyper_parallel::shmem::ops {

/// Every collective of the build, in registration order.
std::span<const data_plane::Collective* const> Collectives();

/// The collective called `name`, or null.
const data_plane::Collective* FindCollective(std::string_view name);

}  // namespace hyper_parallel::shmem::ops
