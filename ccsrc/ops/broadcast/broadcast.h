// broadcast: the root member's input lands in every member's output, the root's included:
// torch.distributed.broadcast with a separate output, OpenSHMEM's broadcastmem. A collective
// unit (data_plane/collective.h) on the kernel-side API alone, so every backend runs it.
//
// Local checks: the root (arguments[0], a member index) lies in the group; the output
// (symmetric) has the input's size; the input is the output itself or does not overlap it.
// Every member passes an input of the output's size; only the root's is read. Peers agree on
// the bytes, the dtype, the output's offset and the root.
//
// The kernel: the root copies its input into its own output, then puts it, chunked, into the
// output of every other member of its host and of one leader per other host (its lowest
// member), and publishes the call's epoch to each after its data; a leader, once the root's
// epoch arrived, puts its output into the other members of its host and publishes to them, so
// the data crosses the network once per other host (docs/architecture.md, "Collectives across
// hosts"). The others wait for their feeder's epoch. On one host (every device backend) the root
// feeds everyone. Before it runs every member's descriptor of call e matched, so none still
// reads its output of call e-1.
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "data_plane/collective.h"

namespace hyper_parallel::shmem::ops {

class Broadcast final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "broadcast"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  unsigned AgreedFields() const override {
    return data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset |
           data_plane::kAgreeArguments;
  }
  std::string_view ArgumentName(int index) const override {
    return index == 0 ? "root" : "";
  }
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;
};

}  // namespace hyper_parallel::shmem::ops
