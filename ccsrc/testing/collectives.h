// The build's collectives as typed calls for tests: each finds its collective unit by name
// (ops/collectives.h) and runs it through Runtime::RunCollective, as the binding does.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

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

/// Every PE's `input_bytes` (differing) land packed in PE order in `output`; `*sizes` gets
/// every PE's bytes.
inline Status AllGatherV(Runtime& runtime, const SymmetricView& output, const void* input,
                         std::uint64_t input_bytes, std::vector<std::uint64_t>* sizes,
                         StreamRef stream) {
  CollectiveOperands operands{output, input, input_bytes, 0, "uint8"};
  operands.results = std::make_shared<std::vector<std::uint64_t>>();
  Status status = runtime.RunCollective(CollectiveNamed("all_gather_v"), operands, stream);
  *sizes = *operands.results;
  return status;
}

/// all_to_all with split sizes in bytes: `send[j]` bytes of `input` to PE j, `receive[j]`
/// bytes expected from PE j, packed in PE order in `output`.
inline Status AllToAllV(Runtime& runtime, const SymmetricView& output, const void* input,
                        const std::vector<std::uint64_t>& send,
                        const std::vector<std::uint64_t>& receive, StreamRef stream) {
  CollectiveOperands operands{output, input, 0, 0, "uint8"};
  for (std::uint64_t bytes : send) operands.input_bytes += bytes;
  operands.sizes = send;
  operands.sizes.insert(operands.sizes.end(), receive.begin(), receive.end());
  return runtime.RunCollective(CollectiveNamed("all_to_all_v"), operands, stream);
}

}  // namespace hyper_parallel::shmem::testing
