// reduce_scatter: the input is cut into as many equal blocks as the group has members, and
// member j's output ends as the element-wise reduction of every member's block j: torch's
// reduce_scatter_tensor. A collective unit (data_plane/collective.h) over the reductions'
// kernel (ops/reduce/halving.h), as both reductions are (ReductionUnit, ops/reduce/checks.h);
// each block is reduced once, in an order fixed by the group's size, so the same inputs give the
// same bits run after run.
//
// Local checks: a dtype and an operator the reductions take (ops/reduce/element.h), an input of
// exactly the output's size times the group's, not overlapping the output (symmetric). Peers
// agree on the bytes, the dtype, the output's offset and the operator (arguments[0]).
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "ops/reduce/checks.h"

namespace hyper_parallel::shmem::ops {

class ReduceScatter final : public ReductionUnit {
 public:
  constexpr ReduceScatter() : ReductionUnit(ReductionKind::kReduceScatter) {}
  std::string_view name() const override { return "reduce_scatter"; }

 private:
  Status CheckSizes(const data_plane::CollectiveCall& call) const override;
};

}  // namespace hyper_parallel::shmem::ops
