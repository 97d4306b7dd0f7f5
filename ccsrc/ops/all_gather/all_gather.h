// all_gather: every member's input lands in slot `index` of every member's output, as a
// collective unit (data_plane/collective.h): the contract of
// torch.distributed.all_gather_into_tensor, written on the kernel-side API alone
// (data_plane/kernel_api.h), so every backend runs the same algorithm with its own puts and
// epochs (host: copy workers and control-block epochs; a device backend: on-stream puts and
// signals).
//
// Local checks: the output is exactly input bytes * group size (in elements when the caller
// counts elements) and does not overlap the input. Peers agree on the input bytes, the dtype
// and the output's heap offset.
//
// The kernel pushes: every member copies its own input into its slot of each member's output
// (its own first, then the others in ring order, so members do not all write to member 0
// first), so the input need not be symmetric. It is chunked with the data plane's plan (tail
// rebalanced so no chunk is tiny) and handed over as one batch, chunk-major, so a source chunk
// stays in cache while it goes to every member and a backend with several copy engines can
// spread the batch. Before the kernel runs, every member's descriptor of call e matched: every
// member has entered call e, so none still reads its output of call e-1. The kernel then
// publishes epoch e to each peer (data before signal) and waits until every peer published e:
// the output is complete and the input free.
//
// Across hosts (KernelApi::HostOf tells the members' hosts apart), where some host has several
// members, a block crosses the network once per pair of hosts: member m puts its block to its
// own host's members and to one member of every other host (the one at m's place among its
// host's members, modulo their number), which waits for the blocks it receives so, copies them
// to its host's other members through shared memory and publishes again. Each member then waits
// for every member of its host twice where that member forwards (its own block, then the
// forwarded ones), which the epochs count (docs/architecture.md, "Collectives across hosts").
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include <cstdint>
#include <vector>

#include "data_plane/collective.h"
#include "ops/all_gather/schedule.h"

namespace hyper_parallel::shmem::ops {

class AllGather final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "all_gather"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  unsigned AgreedFields() const override {
    return data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset;
  }
  std::span<const std::string_view> Algorithms() const override;
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;

 private:
  // Members on several hosts, some sharing one, direct: each member's block to one member of
  // every other host, which forwards it there.
  Status RunRails(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                  const HostPlacement& placement) const;
  // Members on several hosts, through their leaders' rounds (bruck or ring).
  Status RunLeaders(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan,
                    const HostPlacement& placement, AllGatherAlgorithm algorithm) const;
};

}  // namespace hyper_parallel::shmem::ops
