// all_to_all_v: all_to_all with split sizes, torch's all_to_all_single with
// input_split_sizes and output_split_sizes: member i sends sizes[j] bytes of its input (in
// order) to member j, and expects sizes[N + j] bytes from member j, packed in its output in
// member order. A collective unit (data_plane/collective.h).
//
// Local checks: 2N sizes, the send sizes summing to the input's bytes, the expected ones fitting
// the output, an input that does not overlap the output, a workspace that holds the exchange.
// Peers agree on the dtype and the output's offset. The kernel first gathers every member's
// sizes (ops/exchange/records.h), so every member sees every pair: where what member i sends to
// j differs from what j expects from i, every member fails alike with COLLECTIVE_MISMATCH
// naming the first such pair, before any byte moves. Otherwise each member pushes each block
// to its place in the receiver's output (the receiver's expected sizes give the offsets),
// publishes the call's epoch and waits for every peer's.
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "ops/exchange/records.h"

namespace hyper_parallel::shmem::ops {

class AllToAllV final : public SizeExchangingUnit {
 public:
  std::string_view name() const override { return "all_to_all_v"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;
};

}  // namespace hyper_parallel::shmem::ops
