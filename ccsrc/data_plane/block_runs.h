// Runs of blocks: a batch of block puts (kernel_api.h's BlockPut) with the blocks to one PE
// that continue each other (the next block's destination offset and source both follow the
// previous block's) merged into one block, for the PEs `merges(pe)` names. A collective cuts
// its blocks into chunks for the copy workers; a transport that sends each put as one message
// (the host backend's remote peers, docs/architecture.md) takes a merged block whole. Pure,
// header-only.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::data_plane {

/// `puts` with every run of continuing blocks to a PE p with merges(p) merged into its first
/// block, the merged blocks in the order of their first block; blocks to other PEs as they
/// are. The blocks to any one PE keep their order, and every byte is put exactly once. PEs are
/// in [0, pes).
template <class Merges>
std::vector<BlockPut> MergeContinuingBlocks(std::span<const BlockPut> puts, int pes,
                                            Merges&& merges) {
  std::vector<BlockPut> merged;
  merged.reserve(puts.size());
  // By PE: the index in `merged` of its latest block (puts.size(): none yet).
  std::vector<std::size_t> latest(static_cast<std::size_t>(pes), puts.size());
  for (const BlockPut& put : puts) {
    std::size_t& at = latest[static_cast<std::size_t>(put.pe)];
    if (at != puts.size() && merges(put.pe)) {
      BlockPut& run = merged[at];
      if (run.offset + run.bytes == put.offset &&
          static_cast<const std::byte*>(run.source) + run.bytes ==
              static_cast<const std::byte*>(put.source)) {
        run.bytes += put.bytes;
        continue;
      }
    }
    at = merged.size();
    merged.push_back(put);
  }
  return merged;
}

}  // namespace hyper_parallel::shmem::data_plane
