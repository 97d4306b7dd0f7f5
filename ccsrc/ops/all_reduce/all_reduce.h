// all_reduce: every member's output ends as the element-wise reduction (sum, prod, min, max,
// and, or, xor) of every member's input, bitwise the same on every member and from run to run:
// torch.distributed.all_reduce with a separate output, OpenSHMEM's team reductions. A collective
// unit (data_plane/collective.h) over the reductions' kernel (ops/reduce/halving.h), as both
// reductions are (ReductionUnit, ops/reduce/checks.h).
//
// Local checks: a dtype and an operator the reductions take (ops/reduce/element.h), an output
// (symmetric) of the input's size, and an input that is the output itself (in place) or does
// not overlap it. Peers agree on the bytes, the dtype, the output's offset and the operator
// (arguments[0], a ReduceOp).
//
// Thread-safety: immutable; Run runs on the launching stream.
#pragma once

#include "ops/reduce/checks.h"

namespace hyper_parallel::shmem::ops {

class AllReduce final : public ReductionUnit {
 public:
  constexpr AllReduce() : ReductionUnit(ReductionKind::kAllReduce) {}
  std::string_view name() const override { return "all_reduce"; }

 private:
  Status CheckSizes(const data_plane::CollectiveCall& call) const override;
};

}  // namespace hyper_parallel::shmem::ops
