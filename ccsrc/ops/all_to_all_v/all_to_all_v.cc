#include "ops/all_to_all_v/all_to_all_v.h"

#include <string>
#include <vector>

#include "data_plane/pe_address.h"
#include "ops/exchange/records.h"

namespace hyper_parallel::shmem::ops {
namespace {

std::string SizeIn(std::uint64_t bytes, std::uint64_t element_bytes) {
  return element_bytes > 0 ? std::to_string(bytes / element_bytes) + " elements"
                           : std::to_string(bytes) + " bytes";
}

}  // namespace

Status AllToAllV::Check(const data_plane::CollectiveCall& call) const {
  const auto n = static_cast<std::size_t>(call.group.size());
  if (call.sizes.size() != 2 * n) {
    return Status::Contract(ErrorCode::kInvalidArgument, "all_to_all_v sizes",
                            std::to_string(2 * n) + " (send and receive per PE)",
                            std::to_string(call.sizes.size()));
  }
  std::uint64_t send = 0;
  std::uint64_t receive = 0;
  for (std::size_t j = 0; j < n; ++j) {
    send += call.sizes[j];
    receive += call.sizes[n + j];
  }
  if (send != call.input_bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "input split sizes' sum",
                            "the input's " + SizeIn(call.input_bytes, call.element_bytes),
                            SizeIn(send, call.element_bytes));
  }
  if (receive > call.output_bytes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "output split sizes' sum",
                            "at most the output's " + SizeIn(call.output_bytes, call.element_bytes),
                            SizeIn(receive, call.element_bytes));
  }
  HPS_RETURN_IF_ERROR(data_plane::CheckInputBeside(call, name()));
  return CheckRecordWorkspace(call.group.size(), 2 * n, call.workspace_bytes, name());
}

Status AllToAllV::Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const {
  const data_plane::CollectiveGroup& group = plan.group;
  const int n = group.size();
  const auto words = 2 * static_cast<std::size_t>(n);
  std::vector<std::uint64_t> all;
  HPS_RETURN_IF_ERROR(GatherRecords(api, plan, plan.sizes, &all, name()));
  const auto send = [&](int from, int to) { return all[static_cast<std::size_t>(from) * words + static_cast<std::size_t>(to)]; };
  const auto expect = [&](int at, int from) {
    return all[static_cast<std::size_t>(at) * words + static_cast<std::size_t>(n + from)];
  };
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (send(from, to) != expect(to, from)) {
        return Status::Assertion(
            ErrorCode::kCollectiveMismatch,
            "split sizes differ across PEs: PE " + std::to_string(from) + " sends " +
                SizeIn(send(from, to), plan.element_bytes) + " to PE " + std::to_string(to) +
                ", which expects " + SizeIn(expect(to, from), plan.element_bytes),
            {{"operation", std::string(name())},
             {"pe", std::to_string(from)},
             {"to_pe", std::to_string(to)}});
      }
    }
  }
  const int me = group.index;
  const auto* input = static_cast<const std::byte*>(plan.input);
  std::vector<std::uint64_t> from_me(static_cast<std::size_t>(n) + 1, 0);  // input offsets
  for (int to = 0; to < n; ++to) from_me[static_cast<std::size_t>(to) + 1] = from_me[static_cast<std::size_t>(to)] + send(me, to);
  std::vector<data_plane::BlockPut> puts;
  std::vector<int> peers;
  for (int distance = 0; distance < n; ++distance) {
    const int to = data_plane::RingPeer(me, distance, n);
    const int pe = group.pe(to);
    if (distance > 0) peers.push_back(pe);
    std::uint64_t at = 0;  // where this member's block lands in `to`'s output
    for (int from = 0; from < me; ++from) at += expect(to, from);
    const std::uint64_t bytes = send(me, to);
    if (bytes > 0) {
      puts.push_back({pe, plan.output_offset + at, input + from_me[static_cast<std::size_t>(to)], bytes});
    }
  }
  return data_plane::PutPublishAndAwaitPeers(api, plan, puts, peers, name());
}

}  // namespace hyper_parallel::shmem::ops
