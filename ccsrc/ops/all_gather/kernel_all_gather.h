// all_gather written on the kernel-side API (data_plane/kernel_api.h) alone: what a fused
// kernel of any consumer, on any backend, would do to gather.
//
// Each PE puts its input into slot `rank` of every PE's output (its own included), then adds
// 1 to every PE's arrival counter (data before signal), then waits until its own counter
// reaches `target`: the P arrivals of this call on top of the earlier calls' (counters are
// monotonic, so the caller passes target = P * calls so far). That is the whole data movement
// of the runtime's all_gather (ops/all_gather/all_gather.h); what this version leaves to its
// caller is what the runtime's adds around it: checking that every PE entered the same call
// with the same arguments before any byte moves (the descriptor exchange), knowing that no
// peer still reads the output of the previous call, and spreading copies over workers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data_plane/kernel_api.h"
#include "base/status.h"

namespace hyper_parallel::shmem::ops {

struct KernelAllGatherPlan {
  const std::byte* input = nullptr;  ///< this PE's `bytes` (local memory)
  std::uint64_t bytes = 0;           ///< per PE
  std::uint64_t output_offset = 0;   ///< heap offset of the [P * bytes] output
  std::uint64_t arrived_offset = 0;  ///< heap offset of the 64-bit arrival counter
  std::int64_t target = 0;           ///< the counter's value once this call's data is in
};

Status KernelAllGather(data_plane::KernelApi& api, const KernelAllGatherPlan& plan);

}  // namespace hyper_parallel::shmem::ops
