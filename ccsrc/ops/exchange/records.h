// Records every member gathers from every member before data moves: the collectives whose
// sizes differ from member to member (all_gather_v, all_to_all with split sizes) learn each
// other's sizes this way, inside the call, after the descriptors matched.
//
// Bruck's all-gather over round words (data_plane/kernel_api.h): in round k member i sends the
// records it holds for members i .. i + 2^k - 1 (at most N - 2^k of them) to member i - 2^k and
// receives as many from member i + 2^k, into round k's region of the group's workspace
// (CollectivePlan::workspace_offset), setting round word k at the receiver to
// RoundValue(epoch, k + 1): word k at a member is written only by the member 2^k after it, so
// ceil(log2 N) words do, and a later round's record can never pass for an earlier one's (an
// arrival count could not tell them apart). After ceil(log2 N) rounds every member holds every
// record. Each round's records are read back into host memory (KernelApi::ReadLocal: a stream
// backend synchronises its stream), since the sizes decide what the kernel enqueues next.
//
// Thread-safety: runs on the launching stream.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "data_plane/collective.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::ops {

/// Workspace bytes GatherRecords needs for `members` records of `words` 64-bit words each.
std::uint64_t RecordWorkspaceBytes(int members, std::uint64_t words);

/// INVALID_ARGUMENT when the group's workspace cannot hold the exchange (naming the setting).
Status CheckRecordWorkspace(int members, std::uint64_t words, std::uint64_t workspace_bytes,
                            std::string_view operation);

/// Gathers every member's record of `mine.size()` words into `all` (member m's at
/// [m * words, (m + 1) * words)); the same on every member.
Status GatherRecords(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                     std::span<const std::uint64_t> mine, std::vector<std::uint64_t>* all,
                     std::string_view operation);

/// The collective unit each collective whose sizes differ from member to member is
/// (all_gather_v, all_to_all_v): the sizes are gathered inside the call (GatherRecords), so
/// peers agree on the dtype and the output's offset only, and a member with nothing to give
/// still takes part (it receives the others').
class SizeExchangingUnit : public data_plane::Collective {
 public:
  bool MovesNothing(const data_plane::CollectiveCall&) const final { return false; }
  unsigned AgreedFields() const final {
    return data_plane::kAgreeDtype | data_plane::kAgreeOffset;
  }
};

}  // namespace hyper_parallel::shmem::ops
