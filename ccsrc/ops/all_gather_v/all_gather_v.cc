#include "ops/all_gather_v/all_gather_v.h"

#include <string>
#include <vector>

#include "ops/exchange/records.h"

namespace hyper_parallel::shmem::ops {

Status AllGatherV::Check(const data_plane::CollectiveCall& call) const {
  HPS_RETURN_IF_ERROR(data_plane::CheckInputBeside(call, name()));
  return CheckRecordWorkspace(call.group.size(), 2, call.workspace_bytes, name());
}

Status AllGatherV::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int n = group.size();
  // Each member's record: its input bytes, then its output bytes.
  const std::uint64_t record[2] = {plan.input_bytes, plan.output_bytes};
  std::vector<std::uint64_t> all;
  HPS_RETURN_IF_ERROR(GatherRecords(api, plan, record, &all, name()));
  std::uint64_t total = 0;
  std::vector<std::uint64_t> at(static_cast<std::size_t>(n) + 1, 0);
  for (int m = 0; m < n; ++m) {
    total += all[2 * static_cast<std::size_t>(m)];
    at[static_cast<std::size_t>(m) + 1] = total;
  }
  const std::uint64_t unit = plan.element_bytes > 0 ? plan.element_bytes : 1;
  for (int m = 0; m < n; ++m) {
    if (all[2 * static_cast<std::size_t>(m) + 1] < total) {
      return Status::Contract(
          ErrorCode::kInvalidArgument,
          "all_gather_v output " + std::string(plan.element_bytes > 0 ? "numel" : "byte size") +
              " of PE " + std::to_string(m),
          "at least " + std::to_string(total / unit) + " (every PE's input together)",
          std::to_string(all[2 * static_cast<std::size_t>(m) + 1] / unit));
    }
  }
  if (plan.results) {
    plan.results->assign(static_cast<std::size_t>(n), 0);
    for (int m = 0; m < n; ++m) (*plan.results)[static_cast<std::size_t>(m)] = all[2 * static_cast<std::size_t>(m)];
  }
  std::vector<data_plane::BlockPut> puts;
  std::vector<int> peers;
  const std::uint64_t offset = plan.output_offset + at[static_cast<std::size_t>(group.index)];
  for (int distance = 0; distance < n; ++distance) {
    const int pe = group.pe((group.index + distance) % n);
    if (distance > 0) peers.push_back(pe);
    if (plan.input_bytes > 0) puts.push_back({pe, offset, plan.input, plan.input_bytes});
  }
  return data_plane::PutPublishAndAwaitPeers(api, plan, puts, peers, name());
}

}  // namespace hyper_parallel::shmem::ops
