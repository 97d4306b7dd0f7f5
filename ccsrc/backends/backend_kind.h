// The backends' names: what HYPER_PARALLEL_SHMEM_BACKEND may say. They live with the backends,
// not in base/: the configuration keeps the name as given, and the registry (registry.h)
// checks it here when a Runtime initialises.
//
// Pure functions over constant tables; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace hyper_parallel::shmem {

/// Which backend to run on; kAuto picks the best one the build and machine offer.
enum class BackendKind : std::uint8_t { kAuto, kHost, kCuda, kCann };

/// Every kind with its name, in the order an error message lists them.
inline constexpr std::array<std::pair<BackendKind, std::string_view>, 4> kBackendNames = {{
    {BackendKind::kAuto, "auto"},
    {BackendKind::kHost, "host"},
    {BackendKind::kCuda, "cuda"},
    {BackendKind::kCann, "cann"},
}};

/// "auto", "host", "cuda", "cann"; "unknown" for a value outside the enum.
std::string_view BackendKindName(BackendKind kind);

/// The kind a configured name means; INVALID_CONFIG naming HYPER_PARALLEL_SHMEM_BACKEND and
/// the value otherwise (the message lists every name).
Status ParseBackendKind(std::string_view name, BackendKind* out);

}  // namespace hyper_parallel::shmem
