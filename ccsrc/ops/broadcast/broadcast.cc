#include "ops/broadcast/broadcast.h"

#include <map>
#include <string>
#include <vector>

#include "data_plane/chunk_plan.h"

namespace hyper_parallel::shmem::ops {
Status Broadcast::Check(const data_plane::CollectiveCall& call) const {
  const std::int64_t root = call.arguments[0];
  if (root < 0 || root >= call.group.size()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "broadcast root",
                            "a PE of the team, 0 to " + std::to_string(call.group.size() - 1),
                            std::to_string(root));
  }
  HPS_RETURN_IF_ERROR(data_plane::CheckOutputSizeIsInput(call));
  return data_plane::CheckInputInPlaceOrBeside(call, name());
}

Status Broadcast::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int n = group.size();
  const auto root = static_cast<int>(plan.arguments[0]);
  // Each member's host, and each host's leader (its lowest member), found in one pass.
  std::vector<int> host(static_cast<std::size_t>(n));
  std::vector<int> leader(static_cast<std::size_t>(n));
  std::map<int, int> leader_of_host;
  for (int m = 0; m < n; ++m) {
    host[m] = api.HostOf(group.pe(m));
    leader[m] = leader_of_host.try_emplace(host[m], m).first->second;
  }
  const int me = group.index;
  const auto* output = api.Local(plan.output_offset);
  // Puts `source`, chunked, into the output of every member `feeder` feeds (and its own when
  // `with_self`), then publishes the call's epoch to them: the root feeds its host and the
  // other hosts' leaders, a leader the rest of its host.
  const auto feed = [&](int feeder, const std::byte* source, bool with_self) {
    std::vector<int> fed;
    for (int distance = 1; distance < n; ++distance) {
      const int m = (feeder + distance) % n;
      const bool fed_here = host[m] == host[feeder] ? m != root : feeder == root && leader[m] == m;
      if (fed_here) fed.push_back(group.pe(m));
    }
    const data_plane::ChunkPlan chunks = data_plane::CollectiveChunks(plan.input_bytes);
    std::vector<data_plane::BlockPut> puts;
    for (std::uint64_t index = 0; index < chunks.count(); ++index) {
      const data_plane::Chunk chunk = chunks.At(index);
      // The root's own copy goes through the batch too (a stream backend's heap is not the
      // CPU's).
      if (with_self) {
        puts.push_back({group.pe(feeder), plan.output_offset + chunk.offset,
                        source + chunk.offset, chunk.bytes});
      }
      for (int pe : fed) {
        puts.push_back({pe, plan.output_offset + chunk.offset, source + chunk.offset, chunk.bytes});
      }
    }
    api.PutBlocksAndPublish(puts, fed, group.sync_slot, plan.sequence);
  };
  if (me == root) {
    const bool in_place = plan.input == output;
    feed(root, static_cast<const std::byte*>(plan.input), !in_place);
    return Status::Ok();
  }
  // Fed by the root (on its host, or as a leader) or by this host's leader.
  const bool is_leader = host[me] != host[root] && leader[me] == me;
  const int source = group.pe(host[me] == host[root] || is_leader ? root : leader[me]);
  HPS_RETURN_IF_ERROR(api.WaitEpochs(group.sync_slot, plan.sequence, {&source, 1}, name(),
                                     "the root's data to arrive"));
  if (is_leader) feed(me, output, false);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
