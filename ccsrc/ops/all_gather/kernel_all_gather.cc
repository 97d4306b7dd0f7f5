#include "ops/all_gather/kernel_all_gather.h"

namespace hyper_parallel::shmem::ops {

Status KernelAllGather(data_plane::KernelApi& api, const KernelAllGatherPlan& plan) {
  const int pes = api.size(), rank = api.rank();
  // Start with the next PE so that the PEs do not all write to PE 0 first.
  for (int distance = 0; distance < pes; ++distance) {
    const int pe = (rank + distance) % pes;
    if (plan.bytes > 0) {
      api.PutBlock(pe, plan.output_offset + static_cast<std::uint64_t>(rank) * plan.bytes,
                   plan.input, plan.bytes);
    }
    api.AddCounter(pe, plan.arrived_offset, 1);
  }
  return api.WaitCounter(plan.arrived_offset, plan.target, "kernel all_gather arrivals");
}

}  // namespace hyper_parallel::shmem::ops
