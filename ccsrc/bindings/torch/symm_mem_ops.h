// What the symm_mem operators' CPU kernels share (docs/api.md, "torch's symmetric-memory
// API"): the operand check, the group's barrier, the checked barrier every operator starts
// with, and the transfers, defined in symm_mem_ops.cc; and the all_to_all_vdev family's kernels
// (symm_mem_all_to_all.cc), which symm_mem_ops.cc registers with the others. Private to the two
// files. Includes ATen's Tensor and c10's TORCH_CHECK.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "bindings/torch/primitives.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/symm_mem.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {

/// A symmetric operand of `operation`: torch's error for a tensor outside symm_mem.empty's.
SymmetricView SymmetricOperand(std::string_view operation, std::string_view name,
                               const at::Tensor& tensor);

/// A barrier of the group's team.
void Barrier(const SymmGroup& group);

/// Runs `checks` and then a barrier of the group: a failure of any PE's checks fails every
/// PE's barrier (the failing PE raises its own error), so no PE moves data. On the CPU the
/// operators run on the calling thread: not under a shmem.Stream.
template <typename Checks>
auto CheckedBarrier(const SymmGroup& group, Checks&& checks) -> decltype(checks()) {
  auto all_checks = [&] {
    TORCH_CHECK(!IsQueuedOwnStream(CurrentStream()),
                "the symm_mem operators run on the calling thread: call them outside "
                "shmem.stream()");
    return checks();
  };
  if constexpr (std::is_void_v<decltype(checks())>) {
    Refusable("barrier", group.team, all_checks);
    Barrier(group);
  } else {
    auto result = Refusable("barrier", group.team, all_checks);
    Barrier(group);
    return result;
  }
}

/// Copies `bytes` at byte `from` of symmetric `source` on world PE `pe` to local `destination`
/// (host memory, or memory of the heap's device), on `device`'s stream.
void GetBytes(const c10::Device& device, void* destination, const SymmetricView& source,
              std::uint64_t from, std::uint64_t bytes, int pe);

/// Copies local `source` to byte `at` of symmetric `destination` on world PE `pe`.
void PutBytes(const c10::Device& device, const SymmetricView& destination, std::uint64_t at,
              const void* source, std::uint64_t bytes, int pe);

/// A tensor's elements on the host (itself on the CPU).
at::Tensor OnHost(const at::Tensor& tensor);

// The all_to_all_vdev family (symm_mem_all_to_all.cc), with torch's schemas.
void AllToAllVdev(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                  at::Tensor& out_splits_offsets, std::string group_name);
void AllToAllVdev2d(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                    at::Tensor& out_splits_offsets, std::string group_name,
                    std::optional<std::int64_t> major_align);
void AllToAllVdev2dOffset(const at::Tensor& input, at::Tensor& out,
                          const at::Tensor& in_splits_offsets, at::Tensor& out_splits_offsets,
                          std::string group_name);

}  // namespace hyper_parallel::shmem::binding
