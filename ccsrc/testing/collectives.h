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

/// The collective `name` over a symmetric output and a local input, sizes in bytes.
inline Status RunWithOperands(std::string_view name, Runtime& runtime,
                              const SymmetricView& output, const void* input,
                              std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive,
                              std::string_view dtype) {
  return runtime.RunCollective(CollectiveNamed(name),
                               CollectiveOperands{output, input, input_bytes, 0, dtype}, stream,
                               std::move(keep_alive));
}

/// `input_bytes` of `input` land in slot rank of `output` on every PE.
inline Status AllGather(Runtime& runtime, const SymmetricView& output, const void* input,
                        std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive = nullptr,
                        std::string_view dtype = {}) {
  return RunWithOperands("all_gather", runtime, output, input, input_bytes, stream,
                         std::move(keep_alive), dtype);
}

/// Block j of `input` lands as block rank of PE j's `output`.
inline Status AllToAll(Runtime& runtime, const SymmetricView& output, const void* input,
                       std::uint64_t input_bytes, StreamRef stream, KeepAlive keep_alive = nullptr,
                       std::string_view dtype = {}) {
  return RunWithOperands("all_to_all", runtime, output, input, input_bytes, stream,
                         std::move(keep_alive), dtype);
}

/// Root `root`'s `input` lands in `output` on every PE (`input` may be the output).
inline Status Broadcast(Runtime& runtime, const SymmetricView& output, const void* input,
                        std::uint64_t bytes, int root, std::string_view dtype, StreamRef stream,
                        KeepAlive keep_alive = nullptr) {
  return runtime.RunCollective(CollectiveNamed("broadcast"),
                               CollectiveOperands{output, input, bytes, 0, dtype, {root, 0, 0}},
                               stream, std::move(keep_alive));
}

/// `output` becomes the reduction of every PE's `input` with the operator `op` (an
/// ops::ReduceOp number); `input` may be the output.
inline Status AllReduce(Runtime& runtime, const SymmetricView& output, const void* input,
                        std::uint64_t input_bytes, std::int64_t op, std::string_view dtype,
                        StreamRef stream, KeepAlive keep_alive = nullptr) {
  return runtime.RunCollective(CollectiveNamed("all_reduce"),
                               CollectiveOperands{output, input, input_bytes, 0, dtype, {op, 0, 0}},
                               stream, std::move(keep_alive));
}

/// PE j's `output` becomes the reduction of every PE's block j of `input`.
inline Status ReduceScatter(Runtime& runtime, const SymmetricView& output, const void* input,
                            std::uint64_t input_bytes, std::int64_t op, std::string_view dtype,
                            StreamRef stream, KeepAlive keep_alive = nullptr) {
  return runtime.RunCollective(CollectiveNamed("reduce_scatter"),
                               CollectiveOperands{output, input, input_bytes, 0, dtype, {op, 0, 0}},
                               stream, std::move(keep_alive));
}

}  // namespace hyper_parallel::shmem::testing
