#include "ops/exchange/records.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace hyper_parallel::shmem::ops {
namespace {

int Rounds(int members) {
  int rounds = 0;
  while ((1 << rounds) < members) ++rounds;
  return rounds;
}

// Records received in round k: at most 2^k, and no more than the N - 2^k still missing.
std::uint64_t RoundRecords(int members, int k) {
  return static_cast<std::uint64_t>(std::min(1 << k, members - (1 << k)));
}

}  // namespace

std::uint64_t RecordWorkspaceBytes(int members, std::uint64_t words) {
  std::uint64_t records = 0;
  for (int k = 0; k < Rounds(members); ++k) records += RoundRecords(members, k);
  return records * words * 8;
}

Status CheckRecordWorkspace(int members, std::uint64_t words, std::uint64_t workspace_bytes,
                            std::string_view operation) {
  const std::uint64_t need = RecordWorkspaceBytes(members, words);
  if (need <= workspace_bytes) return Status::Ok();
  return Status::Contract(ErrorCode::kInvalidArgument, std::string(operation) + " workspace bytes",
                          "at least " + std::to_string(need) + " for the sizes of " +
                              std::to_string(members) +
                              " members (set HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE higher)",
                          std::to_string(workspace_bytes));
}

Status GatherRecords(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                     std::span<const std::uint64_t> mine, std::vector<std::uint64_t>* all,
                     std::string_view operation) {
  const data_plane::CollectiveGroup& group = plan.group;
  const int n = group.size();
  const int me = group.index;
  const std::uint64_t words = mine.size();
  const int rounds = Rounds(n);
  if (n > 1 && api.RoundWords() < rounds) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "exchanging sizes needs round words; this backend has too few",
                             {{"operation", std::string(operation)}});
  }
  // held[r]: the record of member me + r (mod n), for r below what is held so far.
  std::vector<std::uint64_t> held(static_cast<std::size_t>(n) * words);
  std::copy(mine.begin(), mine.end(), held.begin());
  std::uint64_t region = plan.workspace_offset;
  for (int k = 0; k < rounds; ++k) {
    const int d = 1 << k;
    const std::uint64_t count = RoundRecords(n, k);
    const std::uint64_t bytes = count * words * 8;
    const int to = group.pe((me - d + n) % n);
    const int from = group.pe((me + d) % n);
    const data_plane::BlockPut put{to, region, held.data(), bytes};
    api.PutBlocksAndSetRound({&put, 1}, to, group.sync_slot, k,
                             data_plane::RoundValue(plan.sequence, static_cast<std::uint64_t>(k) + 1));
    HPS_RETURN_IF_ERROR(api.WaitRound(group.sync_slot, k,
                                      data_plane::RoundValue(plan.sequence,
                                                             static_cast<std::uint64_t>(k) + 1),
                                      from, operation, "the members' sizes"));
    // Read back into host memory (a stream backend synchronises its stream here).
    HPS_RETURN_IF_ERROR(
        api.ReadLocal(held.data() + static_cast<std::uint64_t>(d) * words, region, bytes));
    region += bytes;
  }
  all->assign(static_cast<std::size_t>(n) * words, 0);
  for (int r = 0; r < n; ++r) {
    const std::uint64_t member = static_cast<std::uint64_t>((me + r) % n);
    std::copy_n(held.begin() + static_cast<std::ptrdiff_t>(r * words), words,
                all->begin() + static_cast<std::ptrdiff_t>(member * words));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::ops
