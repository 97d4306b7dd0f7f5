#include "ops/all_gather/all_gather.h"

#include <vector>

#include "data_plane/chunk_plan.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {

Status AllGather::Check(const data_plane::CollectiveCall& call) const {
  const auto size = static_cast<std::uint64_t>(call.group.size());
  if (call.input_bytes > call.output_bytes / size || call.output_bytes != call.input_bytes * size) {
    const std::string unit(data_plane::SizeUnit(call));
    return Status::Contract(ErrorCode::kInvalidArgument, "output " + unit,
                            "input " + unit + " * root size (" +
                                data_plane::SizeText(call, call.input_bytes) + " * " +
                                std::to_string(size) + ")",
                            data_plane::SizeText(call, call.output_bytes));
  }
  return data_plane::CheckInputBeside(call, name());
}

Status AllGather::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  // This member first, then the peers in ring order.
  std::vector<int> destinations{group.pe(group.index)};
  std::vector<int> peers;
  for (int distance = 1; distance < size; ++distance) {
    peers.push_back(group.pe(data_plane::RingPeer(group.index, distance, size)));
    destinations.push_back(peers.back());
  }
  const data_plane::ChunkPlan chunks(plan.input_bytes, kAllGatherChunkBytes,
                                     kAllGatherMinChunkBytes, kAllGatherGranule);
  const std::uint64_t slot =
      plan.output_offset + data_plane::SlotOffset(group.index, plan.input_bytes);
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::vector<data_plane::BlockPut> puts;
  puts.reserve(chunks.count() * destinations.size());
  for (std::uint64_t index = 0; index < chunks.count(); ++index) {
    const data_plane::Chunk chunk = chunks.At(index);
    for (int pe : destinations) {
      puts.push_back({pe, slot + chunk.offset, input + chunk.offset, chunk.bytes});
    }
  }
  return data_plane::PutPublishAndAwaitPeers(api, plan, puts, peers, name());
}

}  // namespace hyper_parallel::shmem::ops
