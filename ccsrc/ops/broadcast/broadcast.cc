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
  const int n = group.size();
  const auto root = static_cast<int>(plan.arguments[0]);
  const auto host = [&](int member) { return api.HostOf(group.pe(member)); };
  // Each other host's leader: its lowest member. The root feeds the members of its own host
  // and one leader per other host; a leader feeds the members of its host.
  const auto leader_of = [&](int member) {
    for (int m = 0; m < n; ++m) {
      if (host(m) == host(member)) return m;
    }
    return member;
  };
  const int me = group.index;
  const auto* output = api.Local(plan.output_offset);
  // Members fed by `feeder` (a world PE list) and the puts of `bytes` from `source` to them.
  const auto feed = [&](int feeder, const std::byte* source, bool with_self) {
    std::vector<int> peers;
    for (int distance = 1; distance < n; ++distance) {
      const int m = (feeder + distance) % n;
      const bool same_host = host(m) == host(feeder);
      // The root feeds its host and the other hosts' leaders; a leader its host alone.
      if (same_host ? m != root : (feeder == root && leader_of(m) == m)) peers.push_back(m);
    }
    const data_plane::ChunkPlan chunks(plan.input_bytes, kBroadcastChunkBytes,
                                       kBroadcastMinChunkBytes, kBroadcastGranule);
    std::vector<data_plane::BlockPut> puts;
    std::vector<int> world;
    for (int m : peers) world.push_back(group.pe(m));
    for (std::uint64_t index = 0; index < chunks.count(); ++index) {
      const data_plane::Chunk chunk = chunks.At(index);
      // The root's own copy goes through the batch too (a stream backend's heap is not the
      // CPU's).
      if (with_self) {
        puts.push_back({group.pe(feeder), plan.output_offset + chunk.offset,
                        source + chunk.offset, chunk.bytes});
      }
      for (int pe : world) {
        puts.push_back({pe, plan.output_offset + chunk.offset, source + chunk.offset, chunk.bytes});
      }
    }
    api.PutBlocksAndPublish(puts, world, group.sync_slot, plan.sequence);
  };
  if (me == root) {
    const bool in_place = plan.input == output;
    feed(root, static_cast<const std::byte*>(plan.input), !in_place);
    return Status::Ok();
  }
  // Fed by the root (its host, or this host's leader) or by this host's leader.
  const bool leader = host(me) != host(root) && leader_of(me) == me;
  const int source = group.pe(host(me) == host(root) || leader ? root : leader_of(me));
  HPS_RETURN_IF_ERROR(api.WaitEpochs(group.sync_slot, plan.sequence, {&source, 1}, name(),
                                     "the root's data to arrive"));
  if (leader) feed(me, output, false);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
