// all_to_all: the flattened input and output are cut into as many equal blocks as the group has
// members, and block j of member i's input lands as block i of member j's output: torch's
// all_to_all_single without split sizes, OpenSHMEM's alltoallmem. A collective unit
// (data_plane/collective.h) written on the kernel-side API alone, so every backend runs it.
//
// Local checks: the output (symmetric) has exactly the input's size, the size divides into one
// block per member, and the input (any local memory) does not overlap the output. Peers agree
// on the input bytes, the dtype and the output's heap offset.
//
// The kernel pushes, like all_gather: each member copies block j of its input straight into
// slot `index` of member j's output (its own block first, then the others in ring order, so
// members do not all write to member 0 first), chunked with the data plane's plan and handed
// over as one batch a backend may spread over its copy engines. Before it runs every member's
// descriptor of call e matched, so none still reads its output of call e-1; it then publishes
// epoch e to each peer after its data (data before signal) and waits until every peer published
// e: its output is complete and its input free.
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include <cstdint>

#include "data_plane/collective.h"

namespace hyper_parallel::shmem::ops {

class AllToAll final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "all_to_all"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  unsigned AgreedFields() const override {
    return data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset;
  }
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;
};

}  // namespace hyper_parallel::shmem::ops
