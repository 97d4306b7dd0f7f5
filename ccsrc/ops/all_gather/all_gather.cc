#include "ops/all_gather/all_gather.h"

#include <algorithm>
#include <unordered_map>
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

namespace {

// Appends the puts of block `owner` (already at `source`) to `pe`, chunked.
void AddBlockPuts(std::vector<data_plane::BlockPut>* puts, const data_plane::ChunkPlan& chunks,
                  int pe, std::uint64_t slot, const std::byte* source) {
  for (std::uint64_t index = 0; index < chunks.count(); ++index) {
    const data_plane::Chunk chunk = chunks.At(index);
    puts->push_back({pe, slot + chunk.offset, source + chunk.offset, chunk.bytes});
  }
}

}  // namespace

// Across hosts (see all_gather.h): the members of each host, in group order; member m's block
// crosses to host h once, to h's member of the same place among its host's members (modulo
// their number), which forwards it to the others of h through shared memory.
Status AllGather::RunAcrossHosts(data_plane::KernelApi& api,
                                 const data_plane::CollectivePlan& plan,
                                 const std::vector<int>& host_of) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  const int me = group.index;
  std::vector<int> hosts;                     // distinct hosts, in group order
  std::vector<std::vector<int>> members;      // members of hosts[i]
  std::vector<int> host_index(static_cast<std::size_t>(size)), place(static_cast<std::size_t>(size));
  std::unordered_map<int, std::size_t> index_of;  // host -> its index in `hosts`
  for (int m = 0; m < size; ++m) {
    const auto [at, added] = index_of.emplace(host_of[m], hosts.size());
    const std::size_t h = at->second;
    if (added) {
      hosts.push_back(host_of[m]);
      members.emplace_back();
    }
    host_index[m] = static_cast<int>(h);
    place[m] = static_cast<int>(members[h].size());
    members[h].push_back(m);
  }
  // The member of host h that receives member m's block from the network.
  const auto receiver = [&](int m, std::size_t h) {
    const std::vector<int>& there = members[h];
    return there[static_cast<std::size_t>(place[m]) % there.size()];
  };
  const std::size_t mine = static_cast<std::size_t>(host_index[me]);
  const std::vector<int>& local = members[mine];
  const data_plane::ChunkPlan chunks(plan.input_bytes, kAllGatherChunkBytes,
                                     kAllGatherMinChunkBytes, kAllGatherGranule);
  const auto slot = [&](int m) {
    return plan.output_offset + data_plane::SlotOffset(m, plan.input_bytes);
  };
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
  for (std::size_t h = 0; h < hosts.size(); ++h) {
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

Status AllGather::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int size = group.size();
  const int first_host = api.HostOf(group.pe(0));
  bool one_host = true;
  for (int m = 1; m < size && one_host; ++m) one_host = api.HostOf(group.pe(m)) == first_host;
  if (!one_host) {
    std::vector<int> host_of(static_cast<std::size_t>(size));
    for (int m = 0; m < size; ++m) host_of[m] = api.HostOf(group.pe(m));
    // Every member on a host of its own: the push below is already once per pair of hosts.
    std::vector<int> distinct = host_of;
    std::sort(distinct.begin(), distinct.end());
    if (std::unique(distinct.begin(), distinct.end()) != distinct.end()) {
      return RunAcrossHosts(api, plan, host_of);
    }
  }
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
