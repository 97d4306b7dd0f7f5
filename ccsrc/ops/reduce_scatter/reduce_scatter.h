// reduce_scatter: the input is cut into as many equal blocks as the group has members, and
// member j's output ends as the element-wise reduction of every member's block j: torch's
// reduce_scatter_tensor. A collective unit (data_plane/collective.h) over the reductions'
// kernel (ops/reduce/halving.h); each block is reduced once, in an order fixed by the group's
// size, so the same inputs give the same bits run after run.
//
// Local checks: a dtype and an operator the reductions take (ops/reduce/element.h), an input of
// exactly the output's size times the group's, not overlapping the output (symmetric). Peers
// agree on the bytes, the dtype, the output's offset and the operator (arguments[0]).
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "data_plane/collective.h"

namespace hyper_parallel::shmem::ops {

class ReduceScatter final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "reduce_scatter"; }
  Status Check(const data_plane::CollectiveCall& call) const override;
  unsigned AgreedFields() const override {
    return data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset |
           data_plane::kAgreeArguments;
  }
  std::string_view ArgumentName(int index) const override {
    return index == 0 ? "op" : "";
  }
  std::string ArgumentValue(int index, std::int64_t value) const override;
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override;
};

}  // namespace hyper_parallel::shmem::ops
