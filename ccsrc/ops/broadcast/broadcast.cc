#include "ops/broadcast/broadcast.h"

#include <string>
#include <vector>

#include "data_plane/chunk_plan.h"

namespace hyper_parallel::shmem::ops {
namespace {

constexpr std::uint64_t kBroadcastChunkBytes = 256ull << 10;
constexpr std::uint64_t kBroadcastMinChunkBytes = 64ull << 10;
constexpr std::uint64_t kBroadcastGranule = 64;

}  // namespace

Status Broadcast::Check(const data_plane::CollectiveCall& call) const {
  const std::int64_t root = call.arguments[0];
  if (root < 0 || root >= call.group.size()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "broadcast root",
                            "a PE of the team, 0 to " + std::to_string(call.group.size() - 1),
                            std::to_string(root));
  }
  const std::string unit(data_plane::SizeUnit(call));
  if (call.output_bytes != call.input_bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "output " + unit,
                            "input " + unit + " (" + data_plane::SizeText(call, call.input_bytes) +
                                ")",
                            data_plane::SizeText(call, call.output_bytes));
  }
  return data_plane::CheckInputInPlaceOrBeside(call, name());
}

Status Broadcast::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const auto root = static_cast<int>(plan.arguments[0]);
  if (group.index != root) {
    const int source = group.pe(root);
    return api.WaitEpochs(group.sync_slot, plan.sequence, {&source, 1}, name(),
                          "the root's data to arrive");
  }
  // The root's own copy goes through the batch too (a stream backend's heap is not the CPU's).
  const bool in_place = plan.input == api.Local(plan.output_offset);
  const data_plane::ChunkPlan chunks(plan.input_bytes, kBroadcastChunkBytes,
                                     kBroadcastMinChunkBytes, kBroadcastGranule);
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::vector<int> peers;
  std::vector<data_plane::BlockPut> puts;
  for (std::uint64_t index = 0; index < chunks.count(); ++index) {
    const data_plane::Chunk chunk = chunks.At(index);
    for (int distance = in_place ? 1 : 0; distance < group.size(); ++distance) {
      const int pe = group.pe((root + distance) % group.size());
      puts.push_back({pe, plan.output_offset + chunk.offset, input + chunk.offset, chunk.bytes});
    }
  }
  for (int distance = 1; distance < group.size(); ++distance) {
    peers.push_back(group.pe((root + distance) % group.size()));
  }
  api.PutBlocksAndPublish(puts, peers, group.sync_slot, plan.sequence);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
