#include "ops/all_gather/all_gather.h"

#include <algorithm>
#include <string>
#include <vector>

#include "data_plane/chunk_plan.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {

namespace {

constexpr std::string_view kAllGatherAlgorithms[] = {"direct", "bruck", "ring"};

}  // namespace

std::span<const std::string_view> AllGather::Algorithms() const { return kAllGatherAlgorithms; }

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

namespace {

// How each member's block is cut for the copy workers.
data_plane::ChunkPlan BlockChunks(const data_plane::CollectivePlan& plan) {
  return data_plane::CollectiveChunks(plan.input_bytes);
}

// The heap offset of member `member`'s block in every member's output.
std::uint64_t BlockSlot(const data_plane::CollectivePlan& plan, int member) {
  return plan.output_offset + data_plane::SlotOffset(member, plan.input_bytes);
}

// Appends the puts of block `owner` (already at `source`) to `pe`, chunked.
void AddBlockPuts(std::vector<data_plane::BlockPut>* puts, const data_plane::ChunkPlan& chunks,
                  int pe, std::uint64_t slot, const std::byte* source) {
  for (std::uint64_t index = 0; index < chunks.count(); ++index) {
    const data_plane::Chunk chunk = chunks.At(index);
    puts->push_back({pe, slot + chunk.offset, source + chunk.offset, chunk.bytes});
  }
}

}  // namespace

// Across hosts, direct (see all_gather.h): member m's block crosses to host h once, to h's
// member of the same place among its host's members (modulo their number), which forwards it
// to the others of h through shared memory.
Status AllGather::RunRails(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                           const HostPlacement& placement) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  const int me = group.index;
  const std::vector<std::vector<int>>& members = placement.members;
  const std::vector<int>& host_index = placement.host_index;
  const std::vector<int>& place = placement.place;
  // The member of host h that receives member m's block from the network.
  const auto receiver = [&](int m, std::size_t h) {
    const std::vector<int>& there = members[h];
    return there[static_cast<std::size_t>(place[m]) % there.size()];
  };
  const std::size_t mine = static_cast<std::size_t>(host_index[me]);
  const std::vector<int>& local = members[mine];
  const data_plane::ChunkPlan chunks = BlockChunks(plan);
  const auto slot = [&](int m) { return BlockSlot(plan, m); };
  const auto* input = static_cast<const std::byte*>(plan.input);
  // 1. This member's block: to itself and its host's members, and once to every other host.
  std::vector<data_plane::BlockPut> puts;
  std::vector<int> peers;
  AddBlockPuts(&puts, chunks, group.pe(me), slot(me), input);
  for (int m : local) {
    if (m == me) continue;
    AddBlockPuts(&puts, chunks, group.pe(m), slot(me), input);
    peers.push_back(group.pe(m));
  }
  for (std::size_t h = 0; h < members.size(); ++h) {
    if (h == mine) continue;
    const int to = receiver(me, h);
    AddBlockPuts(&puts, chunks, group.pe(to), slot(me), input);
    peers.push_back(group.pe(to));
  }
  api.PutBlocksAndPublish(puts, peers, group.sync_slot, plan.sequence);
  // 2. The blocks of other hosts each member of this host receives, which it forwards.
  std::vector<std::vector<int>> received(local.size());  // by place on this host
  for (int m = 0; m < size; ++m) {
    if (static_cast<std::size_t>(host_index[m]) == mine) continue;
    received[static_cast<std::size_t>(place[m]) % local.size()].push_back(m);
  }
  const std::vector<int>& owners = received[static_cast<std::size_t>(place[me])];
  if (!owners.empty()) {
    std::vector<int> sources;
    for (int m : owners) sources.push_back(group.pe(m));
    HPS_RETURN_IF_ERROR(api.WaitEpochs(group.sync_slot, plan.sequence, sources, name(),
                                       "other hosts' blocks"));
    if (local.size() > 1) {
      std::vector<data_plane::BlockPut> forward;
      std::vector<int> local_peers;
      for (int m : owners) {
        for (int q : local) {
          if (q != me) AddBlockPuts(&forward, chunks, group.pe(q), slot(m), api.Local(slot(m)));
        }
      }
      for (int q : local) {
        if (q != me) local_peers.push_back(group.pe(q));
      }
      api.PutBlocksAndPublish(forward, local_peers, group.sync_slot, plan.sequence);
    }
  }
  // 3. Every local member's own block, and what each local receiver forwards.
  std::vector<int> sources;
  for (int q : local) {
    if (q == me) continue;
    sources.push_back(group.pe(q));
    if (!received[static_cast<std::size_t>(place[q])].empty()) sources.push_back(group.pe(q));
  }
  if (sources.empty()) return Status::Ok();
  return api.WaitEpochs(group.sync_slot, plan.sequence, sources, name(), "peers' data to arrive");
}

// Across hosts through the leaders (bruck or ring; see schedule.h): the members of a host put
// their blocks to each other (the leader included) and publish; the leader then runs the
// rounds among the leaders, forwarding what each round brings to its host's other members and
// publishing to them once per round. A member other than the leader so waits for each other
// member of its host once and for its leader once more per round.
Status AllGather::RunLeaders(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                             const HostPlacement& placement, AllGatherAlgorithm algorithm) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int me = group.index;
  const int hosts = placement.hosts();
  const int mine = placement.host_index[static_cast<std::size_t>(me)];
  const std::vector<int>& local = placement.members[static_cast<std::size_t>(mine)];
  const int leader = local.front();
  const std::vector<LeaderRound> rounds = LeaderSchedule(algorithm, hosts);
  const data_plane::ChunkPlan chunks = BlockChunks(plan);
  const auto slot = [&](int m) { return BlockSlot(plan, m); };
  std::vector<int> local_peers;  // this host's other members, world PEs
  for (int q : local) {
    if (q != me) local_peers.push_back(group.pe(q));
  }
  // 1. This member's block to itself and to its host's other members.
  std::vector<data_plane::BlockPut> puts;
  const auto* input = static_cast<const std::byte*>(plan.input);
  AddBlockPuts(&puts, chunks, group.pe(me), slot(me), input);
  for (int pe : local_peers) AddBlockPuts(&puts, chunks, pe, slot(me), input);
  if (local_peers.empty()) {
    api.PutBlocks(puts);
  } else {
    api.PutBlocksAndPublish(puts, local_peers, group.sync_slot, plan.sequence);
  }
  if (me != leader) {
    std::vector<int> sources = local_peers;  // each once, the leader among them
    for (std::size_t r = 0; r < rounds.size(); ++r) sources.push_back(group.pe(leader));
    return api.WaitEpochs(group.sync_slot, plan.sequence, sources, name(),
                          "this host's blocks and the leader's rounds");
  }
  // 2. The leader: its host's blocks, then the rounds among the leaders.
  if (!local_peers.empty()) {
    HPS_RETURN_IF_ERROR(
        api.WaitEpochs(group.sync_slot, plan.sequence, local_peers, name(), "this host's blocks"));
  }
  const auto host_at = [&](int relative) {  // the host `relative` places before this one
    return ((mine - relative) % hosts + hosts) % hosts;
  };
  const auto leader_of = [&](int host) {
    return group.pe(placement.members[static_cast<std::size_t>(host)].front());
  };
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const LeaderRound& round = rounds[r];
    const int to = leader_of(host_at(-round.to));
    const int from = leader_of(host_at(round.to));
    std::vector<data_plane::BlockPut> out;
    for (int relative : round.send) {
      for (int m : placement.members[static_cast<std::size_t>(host_at(relative))]) {
        AddBlockPuts(&out, chunks, to, slot(m), api.Local(slot(m)));
      }
    }
    // In output order: the blocks of hosts whose members' slots follow each other (hosts i and
    // i - 1 with members in host order) merge into one message.
    std::sort(out.begin(), out.end(), [](const data_plane::BlockPut& a,
                                         const data_plane::BlockPut& b) {
      return a.offset < b.offset;
    });
    const std::uint64_t value = data_plane::RoundValue(plan.sequence, round.step);
    api.PutBlocksAndSetRound(out, to, group.sync_slot, round.word, value);
    const std::string what = std::string(AllGatherAlgorithmName(algorithm)) + " round " +
                             std::to_string(r) + " of " + std::to_string(rounds.size());
    HPS_RETURN_IF_ERROR(
        api.WaitRound(group.sync_slot, round.word, value, from, name(), what));
    if (local_peers.empty()) continue;
    std::vector<data_plane::BlockPut> forward;
    for (int relative : round.receive) {
      for (int m : placement.members[static_cast<std::size_t>(host_at(relative))]) {
        for (int pe : local_peers) AddBlockPuts(&forward, chunks, pe, slot(m), api.Local(slot(m)));
      }
    }
    api.PutBlocksAndPublish(forward, local_peers, group.sync_slot, plan.sequence);
  }
  return Status::Ok();
}

Status AllGather::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  const int first_host = api.HostOf(group.pe(0));
  bool one_host = true;
  for (int m = 1; m < size && one_host; ++m) one_host = api.HostOf(group.pe(m)) == first_host;
  if (!one_host) {
    std::vector<int> host_of(static_cast<std::size_t>(size));
    for (int m = 0; m < size; ++m) host_of[m] = api.HostOf(group.pe(m));
    const HostPlacement placement(host_of);
    const AllGatherAlgorithm algorithm =
        ChooseAllGather(plan.algorithm, placement.hosts(), placement.largest(), plan.input_bytes,
                        api.RoundWords());
    if (algorithm != AllGatherAlgorithm::kDirect) {
      return RunLeaders(api, plan, placement, algorithm);
    }
    // Every member on a host of its own: the push below is already once per pair of hosts.
    if (placement.largest() > 1) return RunRails(api, plan, placement);
  }
  // This member first, then the peers in ring order.
  std::vector<int> destinations{group.pe(group.index)};
  std::vector<int> peers;
  for (int distance = 1; distance < size; ++distance) {
    peers.push_back(group.pe(data_plane::RingPeer(group.index, distance, size)));
    destinations.push_back(peers.back());
  }
  const data_plane::ChunkPlan chunks = BlockChunks(plan);
  const std::uint64_t slot = BlockSlot(plan, group.index);
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
