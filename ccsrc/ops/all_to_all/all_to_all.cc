#include "ops/all_to_all/all_to_all.h"

#include <string>
#include <vector>

#include "data_plane/chunk_plan.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {

Status AllToAll::Check(const data_plane::CollectiveCall& call) const {
  HPS_RETURN_IF_ERROR(data_plane::CheckOutputSizeIsInput(call));
  const auto size = static_cast<std::uint64_t>(call.group.size());
  const std::uint64_t unit_bytes = call.element_bytes > 0 ? call.element_bytes : 1;
  if (call.input_bytes % (size * unit_bytes) != 0) {
    return Status::Contract(ErrorCode::kInvalidArgument,
                            "input " + std::string(data_plane::SizeUnit(call)),
                            "divisible by the root size (" + std::to_string(size) + ")",
                            data_plane::SizeText(call, call.input_bytes));
  }
  return data_plane::CheckInputBeside(call, name());
}

Status AllToAll::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  const std::uint64_t block = plan.input_bytes / static_cast<std::uint64_t>(size);
  const data_plane::ChunkPlan chunks = data_plane::CollectiveChunks(block);
  // Where this member's block lands in every member's output.
  const std::uint64_t slot = plan.output_offset + data_plane::SlotOffset(group.index, block);
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::vector<int> peers;
  std::vector<data_plane::BlockPut> puts;
  puts.reserve(chunks.count() * static_cast<std::uint64_t>(size));
  for (int distance = 0; distance < size; ++distance) {
    const int member = data_plane::RingPeer(group.index, distance, size);
    const int pe = group.pe(member);
    if (distance > 0) peers.push_back(pe);
    const std::byte* source = input + data_plane::SlotOffset(member, block);
    for (std::uint64_t index = 0; index < chunks.count(); ++index) {
      const data_plane::Chunk chunk = chunks.At(index);
      puts.push_back({pe, slot + chunk.offset, source + chunk.offset, chunk.bytes});
    }
  }
  return data_plane::PutPublishAndAwaitPeers(api, plan, puts, peers, name());
}

}  // namespace hyper_parallel::shmem::ops
