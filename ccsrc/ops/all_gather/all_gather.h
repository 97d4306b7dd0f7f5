// AllGather: the runtime's fused, chunked all_gather, written on the kernel-side data-plane API
// alone (data_plane/kernel_api.h), so every backend runs the same algorithm with its own puts
// and epochs (host: copy workers and control-block epochs; a device backend: on-stream puts
// and signals).
//
// Each PE's input lands in slot `rank` of every PE's output. The algorithm pushes: every PE
// copies its own input into its slot of each PE's output (its own first), so the input need
// not be symmetric. It is chunked with the data plane's plan (tail rebalanced so no chunk is
// tiny) and handed over as one batch, chunk-major, so a source chunk stays in cache while it
// goes to every PE and a backend with several copy engines can spread the batch. There is
// nothing to pipeline: data goes straight from the input to its final place.
//
// Synchronisation uses the call's collective number e (the same on every PE), never flags
// reset to zero. Before the kernel runs, the backend exchanged and matched the PEs'
// descriptors for call e (Backend::LaunchCollective): every PE has entered call e with the same
// arguments, so none still reads its output of call e-1. The kernel then pushes every chunk,
// publishes epoch e to each peer (data before signal) and waits until every peer published e:
// then the output is complete and the input free.
//
// Thread-safety: a pure function of its arguments and the API; runs on the launching stream.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::ops {

inline constexpr std::uint64_t kAllGatherChunkBytes = 256ull << 10;
inline constexpr std::uint64_t kAllGatherMinChunkBytes = 64ull << 10;
inline constexpr std::uint64_t kAllGatherGranule = 64;
/// The epoch slot all_gather publishes its arrivals on.
inline constexpr int kAllGatherEpochSlot = 0;

struct AllGatherPlan {
  const void* input = nullptr;       ///< this PE's `bytes` (local memory)
  std::uint64_t bytes = 0;           ///< per PE
  std::uint64_t output_offset = 0;   ///< heap offset of the [P * bytes] output (slot 0)
  std::uint64_t epoch = 0;           ///< the call's collective number
};

Status AllGather(data_plane::KernelApi& api, const AllGatherPlan& plan);

}  // namespace hyper_parallel::shmem::ops
