#include "ops/all_gather/all_gather.h"

#include <vector>

#include "data_plane/chunk_plan.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {

Status AllGather(data_plane::KernelApi& api, const AllGatherPlan& plan) {
  const int rank = api.rank(), size = api.size();
  // This PE first, then the peers in ring order, so PEs do not all write to PE 0 first.
  std::vector<int> destinations{rank};
  std::vector<int> peers;
  for (int distance = 1; distance < size; ++distance) {
    peers.push_back(data_plane::RingPeer(rank, distance, size));
    destinations.push_back(peers.back());
  }
  const data_plane::ChunkPlan chunks(plan.bytes, kAllGatherChunkBytes, kAllGatherMinChunkBytes,
                                     kAllGatherGranule);
  const std::uint64_t slot = plan.output_offset + data_plane::SlotOffset(rank, plan.bytes);
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::vector<data_plane::BlockPut> puts;
  puts.reserve(chunks.count() * destinations.size());
  for (std::uint64_t index = 0; index < chunks.count(); ++index) {
    const data_plane::Chunk chunk = chunks.At(index);
    for (int pe : destinations) {
      puts.push_back({pe, slot + chunk.offset, input + chunk.offset, chunk.bytes});
    }
  }
  api.PutBlocks(puts);
  if (peers.empty()) return Status::Ok();
  for (int peer : peers) api.PublishEpoch(peer, kAllGatherEpochSlot, plan.epoch);
  return api.WaitEpochs(kAllGatherEpochSlot, plan.epoch, peers, "all_gather",
                        "peers' data to arrive");
}

}  // namespace hyper_parallel::shmem::ops
