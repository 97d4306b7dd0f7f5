// all_gather_v: each member contributes an input of its own size, and every member's output
// holds all of them in member order, packed (OpenSHMEM's collect); the call reports every
// member's size. A collective unit (data_plane/collective.h).
//
// Local checks: an input (local memory) that does not overlap the output (symmetric), and a
// workspace that holds the size exchange. Peers agree on the dtype and the output's offset;
// their sizes differ by design, so the kernel first gathers every member's (input, output)
// bytes (ops/exchange/records.h). Every member then knows the total and each member's output:
// if one is smaller than the total, every member fails alike with INVALID_ARGUMENT naming it
// and the size needed, before any byte moves. Otherwise each member pushes its input to its
// place in every member's output, publishes the call's epoch and waits for every peer's.
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "ops/exchange/records.h"

namespace hyper_parallel::shmem::ops {

class AllGatherV final : public SizeExchangingUnit {
 public:
  std::string_view name() const override { return "all_gather_v"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;
};

}  // namespace hyper_parallel::shmem::ops
