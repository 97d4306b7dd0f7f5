#include "ops/all_gather/all_gather.h"

#include <vector>

#include "data_plane/chunk_plan.h"
#include "data_plane/partition.h"
#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {
namespace {

using host::CallSite;

// Peers in ring order starting after `rank`, so PEs do not all write to PE 0 first.
std::vector<int> RingPeers(int rank, int size) {
  std::vector<int> peers;
  for (int distance = 1; distance < size; ++distance) {
    peers.push_back(data_plane::RingPeer(rank, distance, size));
  }
  return peers;
}

data_plane::ChunkPlan Plan(std::uint64_t bytes) {
  return data_plane::ChunkPlan(bytes, kAllGatherChunkBytes, kAllGatherMinChunkBytes,
                               kAllGatherGranule);
}

// Copies `bytes` from each source to its destination, chunked, chunk-major (so a source chunk
// stays in cache while it goes to every destination), over the copy workers.
template <CallSite kSite>
void CopyEach(const host::HostDevice& device, const std::vector<const std::byte*>& sources,
              const std::vector<std::byte*>& destinations, std::uint64_t bytes) {
  const data_plane::ChunkPlan plan = Plan(bytes);
  const std::uint64_t pairs = sources.size();
  const std::uint64_t items = plan.count() * pairs;
  const int workers = device.workers();
  device.RunParallel([&](int worker) {
    const data_plane::Range range = data_plane::PartitionRange(items, workers, worker);
    for (std::uint64_t item = range.begin; item < range.end; ++item) {
      const data_plane::Chunk chunk = plan.At(item / pairs);
      device.Copy<kSite>(destinations[item % pairs] + chunk.offset,
                         sources[item % pairs] + chunk.offset, chunk.bytes);
    }
  });
}

// One source to every destination.
template <CallSite kSite>
void CopyToAll(const host::HostDevice& device, const std::byte* source,
               const std::vector<std::byte*>& destinations, std::uint64_t bytes) {
  CopyEach<kSite>(device, std::vector<const std::byte*>(destinations.size(), source),
                  destinations, bytes);
}

std::byte* Slot(const host::HostDevice& device, int pe, const AllGatherArgs& args, int rank) {
  return device.heap(pe) + args.descriptor.offset +
         data_plane::SlotOffset(rank, args.descriptor.bytes);
}

}  // namespace

template <CallSite kSite>
Status PushAllGather(const host::HostDevice& device, const AllGatherArgs& args) {
  const int rank = device.rank();
  const std::uint64_t bytes = args.descriptor.bytes;
  HPS_RETURN_IF_ERROR(device.ExchangeAndMatch<kSite>(args.descriptor, "all_gather", args.stream));
  const auto* input = static_cast<const std::byte*>(args.input);
  const std::vector<int> peers = RingPeers(rank, device.size());
  std::vector<std::byte*> destinations{Slot(device, rank, args, rank)};
  for (int peer : peers) destinations.push_back(Slot(device, peer, args, rank));
  CopyToAll<kSite>(device, input, destinations, bytes);
  if (peers.empty()) return Status::Ok();
  for (int peer : peers) device.Publish<kSite>(peer, kArrivedSlot, args.descriptor.sequence);
  return device.WaitAll<kSite>(kArrivedSlot, args.descriptor.sequence, peers, "all_gather",
                               "peers' data to arrive", args.stream);
}

template Status PushAllGather<CallSite::kHostThread>(const host::HostDevice&,
                                                     const AllGatherArgs&);
template Status PushAllGather<CallSite::kStreamExecutor>(const host::HostDevice&,
                                                         const AllGatherArgs&);

}  // namespace hyper_parallel::shmem::ops
