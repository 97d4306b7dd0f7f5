#include "ops/mega_moe/kernels.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "data_plane/pe_address.h"

namespace hyper_parallel::shmem::ops {
namespace {

// The layout must count the PEs the kernel runs over (the team of its launch): a layout of
// another size would name PEs that are not there, or leave some out.
Status CheckTeamSize(const data_plane::KernelApi& api, const MoeShape& shape,
                     std::string_view kernel) {
  if (shape.pes == api.size()) return Status::Ok();
  return Status::Contract(ErrorCode::kInvalidArgument, std::string(kernel) + " layout PEs",
                          "the PE count of the team it runs over (" + std::to_string(api.size()) +
                              ")",
                          std::to_string(shape.pes));
}

}  // namespace

Status Dispatch(data_plane::KernelApi& api, const MoeLayout& layout, const DispatchPlan& plan) {
  HPS_RETURN_IF_ERROR(layout.Validate());
  const MoeShape& shape = layout.shape();
  HPS_RETURN_IF_ERROR(CheckTeamSize(api, shape, "moe dispatch"));
  const int rank = api.rank();
  const int locals = shape.local_experts();
  const auto chunk = static_cast<std::int64_t>(shape.chunk_rows);
  std::vector<data_plane::SignalledPut> puts;
  for (int distance = 0; distance < shape.pes; ++distance) {
    const int owner = data_plane::RingPeer(rank, distance, shape.pes);
    for (int local = 0; local < locals; ++local) {
      const int expert = owner * locals + local;
      const std::int64_t rows = layout.Count(rank, expert);
      const std::int64_t from = layout.SendRow(rank, expert);
      const std::int64_t to = layout.RecvRow(owner, local, rank);
      const std::uint64_t counter = plan.counters_offset + local * kMoeCounterStride;
      // An expert this PE sends nothing still gets its one signal: the target is fixed.
      for (std::int64_t c = 0; c < layout.Chunks(rows); ++c) {
        const std::int64_t first = c * chunk;
        const std::int64_t block = std::min(chunk, rows - first);  // 0 for an expert sent nothing
        puts.push_back({owner, plan.recv_offset + (to + first) * shape.row_bytes,
                        plan.rows + (from + first) * shape.row_bytes,
                        static_cast<std::uint64_t>(block) * shape.row_bytes, counter, 1});
      }
    }
  }
  api.PutBlocksSignalled(puts);  // each chunk's signal after its data
  return Status::Ok();
}

Status Combine(data_plane::KernelApi& api, const MoeLayout& layout, const CombinePlan& plan) {
  HPS_RETURN_IF_ERROR(layout.Validate());
  const MoeShape& shape = layout.shape();
  HPS_RETURN_IF_ERROR(CheckTeamSize(api, shape, "moe combine"));
  const int rank = api.rank();
  const int locals = shape.local_experts();
  if (static_cast<int>(plan.done_targets.size()) != locals) {
    return Status::Contract(ErrorCode::kInvalidArgument, "combine done targets",
                            std::to_string(locals) + " (one per local expert)",
                            std::to_string(plan.done_targets.size()));
  }
  for (int local = 0; local < locals; ++local) {
    HPS_RETURN_IF_ERROR(api.WaitCounter(plan.done_offset + local * kMoeCounterStride,
                                        plan.done_targets[local],
                                        "moe combine waiting for the results of local expert " +
                                            std::to_string(local)));
    const int expert = rank * locals + local;
    std::vector<data_plane::SignalledPut> puts;
    puts.reserve(shape.pes);
    for (int distance = 0; distance < shape.pes; ++distance) {
      const int source = data_plane::RingPeer(rank, distance, shape.pes);
      const std::int64_t rows = layout.Count(source, expert);
      puts.push_back({source, plan.return_offset + layout.SendRow(source, expert) * shape.row_bytes,
                      plan.results + layout.RecvRow(rank, local, source) * shape.row_bytes,
                      static_cast<std::uint64_t>(rows) * shape.row_bytes,
                      plan.return_counter_offset, 1});
    }
    api.PutBlocksSignalled(puts);  // this expert's results, each source's signal after its rows
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
