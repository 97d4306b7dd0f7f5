// MegaMoE dispatch and combine: one fused kernel each per step, on the kernel-side data-plane
// API (data_plane/kernel_api.h), so they run on any backend and in stream order.
//
// Dispatch (every PE, as a source): for each global expert, owners in ring order starting with
// this PE (so its own experts can start first), the rows it routes there go, `chunk_rows` at a
// time, into the owner's receive buffer at the layout's place; after each chunk the owner's
// counter of that local expert gets +1 (a source with no rows for the expert still adds 1 once).
// The owner knows the target before any row moves (MoeLayout::ExpectedChunks), so each expert
// starts computing as soon as its own rows are in.
//
// Combine (every PE, as an owner): for each local expert in order, once the caller raised its
// "done" counter to the expert's target (the results are written), the results of each source's
// rows go back into the source's return buffer at the source's expert-sorted place, then the
// source's return counter gets +1: one signal per (expert, source) pair, E per step on every
// source. An expert's results leave while the next expert still computes.
//
// Counters are monotonic: callers pass growing targets and never reset them. All offsets are
// heap offsets (the same on every PE); `rows`/`results` are local memory.
#pragma once

#include <cstdint>
#include <vector>

#include "data_plane/kernel_api.h"
#include "ops/mega_moe/layout.h"
#include "base/status.h"

namespace hyper_parallel::shmem::ops {

/// Distance between consecutive counters (each written by several PEs: one cache line apiece).
inline constexpr std::uint64_t kMoeCounterStride = 64;

struct DispatchPlan {
  const std::byte* rows = nullptr;  ///< this PE's expert-sorted rows, SendRows(rank) of them
  std::uint64_t recv_offset = 0;    ///< receive buffer, row 0
  std::uint64_t counters_offset = 0;  ///< counter of local expert 0; local l at + l * stride
};

struct CombinePlan {
  const std::byte* results = nullptr;  ///< results in receive-buffer order, RecvRows(rank) rows
  std::uint64_t return_offset = 0;     ///< return buffer, row 0 (on every source)
  std::uint64_t return_counter_offset = 0;  ///< the return counter (on every source)
  std::uint64_t done_offset = 0;  ///< this PE's "done" counter of local expert 0; l at + l * stride
  std::vector<std::int64_t> done_targets;  ///< per local expert: wait until done reaches it
};

/// Sends this PE's rows. INVALID_ARGUMENT for an invalid layout.
Status Dispatch(data_plane::KernelApi& api, const MoeLayout& layout, const DispatchPlan& plan);

/// Returns this PE's results to their sources. Fails with the wait's TIMEOUT / PEER_LOST.
Status Combine(data_plane::KernelApi& api, const MoeLayout& layout, const CombinePlan& plan);

}  // namespace hyper_parallel::shmem::ops
