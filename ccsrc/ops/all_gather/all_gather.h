// The reference op: a fused, chunked AllGather on the data plane (host device surface).
//
// Each PE's input lands in slot `rank` of every PE's output. The algorithm pushes: every PE
// copies its own input into its slot of each peer's output, so the input need not be
// symmetric. It is chunked with the data plane's plan (tail rebalanced so no chunk is tiny)
// and the (chunk, peer) items are partitioned contiguously over the copy workers, chunk-major
// so a source chunk stays in cache while it goes to every peer.
//
// Why push, not pull: pull needs the input in symmetric memory (a staging copy otherwise) and
// a second wait before the input may be reused; both variants are measured by the native
// benchmark (pull is kept for that measurement). They are within noise of each other on the
// 2-core machine measured, so push stays: it accepts any input. There is nothing to pipeline: data goes straight from the input to its
// final place, so double buffering would only add a copy.
//
// Synchronisation uses monotonic epochs (one per call, assigned in enqueue order), never flags
// reset to zero:
//   1. publish kEntered = e to every peer: "my output may be written for call e";
//   2. copy the own slot; wait until every peer entered e (never write into a peer's output
//      while it is still inside call e-1 or before it has entered);
//   3. push every chunk, then publish kArrived = e to each peer (data before signal);
//   4. wait until every peer's data arrived. Then the output is complete and the input free.
#pragma once

#include <cstdint>

#include "backends/host/call_sites.h"
#include "backends/host/host_device.h"
#include "runtime/status.h"

namespace hyper_parallel::shmem::ops {

inline constexpr std::uint64_t kAllGatherChunkBytes = 256ull << 10;
inline constexpr std::uint64_t kAllGatherMinChunkBytes = 64ull << 10;
inline constexpr std::uint64_t kAllGatherGranule = 64;

/// The op's sync slots in the control block (host::kOpSlots of them).
enum AllGatherSlot : int { kEnteredSlot = 0, kArrivedSlot = 1 };

struct AllGatherArgs {
  std::uint64_t output_offset = 0;  ///< heap offset of the symmetric output (slot 0)
  std::uint64_t input_offset = 0;   ///< heap offset of a symmetric input (pull only)
  const void* input = nullptr;      ///< local input of bytes_per_pe bytes (push)
  std::uint64_t bytes_per_pe = 0;
  std::uint64_t epoch = 0;          ///< 1, 2, ... in enqueue order, the same on every PE
};

/// The op the Runtime runs.
template <host::CallSite kSite>
Status PushAllGather(const host::HostDevice& device, const AllGatherArgs& args);

/// The pull variant, for measurement: each PE copies every peer's symmetric input.
template <host::CallSite kSite>
Status PullAllGather(const host::HostDevice& device, const AllGatherArgs& args);

}  // namespace hyper_parallel::shmem::ops
