// The build's collectives as typed calls for tests: each finds its collective unit by name
// (ops/collectives.h) and runs it through Runtime::RunCollective, as the binding does.
#pragma once

#include <cstdint>
#include <string_view>

#include "ops/collectives.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::testing {

inline const data_plane::Collective& CollectiveNamed(std::string_view name) {
  return *ops::FindCollective(name);
}

inline Status Barrier(Runtime& runtime, StreamRef stream) {
  return runtime.RunCollective(CollectiveNamed("barrier"), {}, stream);
}

/// `input_bytes` of `input` land in slot rank of `output` on every PE.
inline Status AllGather(Runtime& runtime, const SymmetricView& output, const void* input,
                        std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive = nullptr,
                        std::string_view dtype = {}) {
  return runtime.RunCollective(CollectiveNamed("all_gather"),
                               CollectiveOperands{output, input, input_bytes, 0, dtype}, stream,
                               std::move(keep_alive));
}

/// Block j of `input` lands as block rank of PE j's `output`.
inline Status AllToAll(Runtime& runtime, const SymmetricView& output, const void* input,
                       std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive = nullptr,
                       std::string_view dtype = {}) {
  return runtime.RunCollective(CollectiveNamed("all_to_all"),
                               CollectiveOperands{output, input, input_bytes, 0, dtype}, stream,
                               std::move(keep_alive));
}

}  // namespace hyper_parallel::shmem::testing
