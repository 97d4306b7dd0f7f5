// The reference op: a fused, chunked AllGather on the data plane (host device surface).
//
// Each PE's input lands in slot `rank` of every PE's output. The algorithm pushes: every PE
// copies its own input into its slot of each peer's output, so the input need not be
// symmetric. It is chunked with the data plane's plan (tail rebalanced so no chunk is tiny)
// and the (chunk, peer) items are partitioned contiguously over the copy workers, chunk-major
// so a source chunk stays in cache while it goes to every peer. There is nothing to pipeline:
// data goes straight from the input to its final place, so double buffering would only add a
// copy.
//
// Synchronisation uses the call's collective sequence number e (assigned in enqueue order, the
// same on every PE), never flags reset to zero:
//   1. exchange descriptors for call e (kind, bytes, dtype, output offset): publishing ours
//      says "my output may be written for call e"; seeing every peer's says every peer has
//      entered call e with the same arguments (otherwise COLLECTIVE_MISMATCH on every PE before
//      any byte moves: never write into a peer's output while it is still inside call e-1);
//   2. copy the own slot, push every chunk, then publish kArrived = e to each peer (data before
//      signal);
//   3. wait until every peer's data arrived. Then the output is complete and the input free.
#pragma once

#include <cstdint>

#include "backends/collective.h"
#include "backends/host/call_sites.h"
#include "backends/host/host_device.h"
#include "base/status.h"

namespace hyper_parallel::shmem::ops {

inline constexpr std::uint64_t kAllGatherChunkBytes = 256ull << 10;
inline constexpr std::uint64_t kAllGatherMinChunkBytes = 64ull << 10;
inline constexpr std::uint64_t kAllGatherGranule = 64;

/// The op's sync slot in the control block (host::kOpSlots of them).
enum AllGatherSlot : int { kArrivedSlot = 0 };

struct AllGatherArgs {
  /// kind all_gather; offset: the symmetric output (slot 0); bytes: bytes per PE; sequence:
  /// the call's number.
  CollectiveDescriptor descriptor;
  const void* input = nullptr;  ///< local input of descriptor.bytes bytes
  const host::HostStream* stream = nullptr;  ///< the stream it runs for (diagnostics)
};

/// The op the host backend runs.
template <host::CallSite kSite>
Status PushAllGather(const host::HostDevice& device, const AllGatherArgs& args);

}  // namespace hyper_parallel::shmem::ops
