// The collectives this build provides. The only file that names them all.
#include "ops/collectives.h"

#include "ops/all_gather/all_gather.h"
#include "ops/all_gather_v/all_gather_v.h"
#include "ops/all_reduce/all_reduce.h"
#include "ops/all_to_all/all_to_all.h"
#include "ops/all_to_all_v/all_to_all_v.h"
#include "ops/barrier/barrier.h"
#include "ops/broadcast/broadcast.h"
#include "ops/reduce_scatter/reduce_scatter.h"

namespace hyper_parallel::shmem::ops {
namespace {

const Barrier kBarrier{};
const AllGather kAllGather{};
const AllToAll kAllToAll{};
const Broadcast kBroadcast{};
const AllReduce kAllReduce{};
const ReduceScatter kReduceScatter{};
const AllGatherV kAllGatherV{};
const AllToAllV kAllToAllV{};

constexpr const data_plane::Collective* kCollectives[] = {
    &kBarrier,   &kAllGather,     &kAllToAll,   &kBroadcast,
    &kAllReduce, &kReduceScatter, &kAllGatherV, &kAllToAllV};

}  // namespace

std::span<const data_plane::Collective* const> Collectives() { return kCollectives; }

const data_plane::Collective* FindCollective(std::string_view name) {
  for (const data_plane::Collective* collective : kCollectives) {
    if (collective->name() == name) return collective;
  }
  return nullptr;
}

}  // namespace hyper_parallel::shmem::ops
