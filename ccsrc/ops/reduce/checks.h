// What the reductions (all_reduce, reduce_scatter) share as collective units: the local checks
// (the dtype and operator, and the element count, before the layout of their passes), the
// operator argument, and the kernel (ops/reduce/halving.h). Each unit adds its name and its
// size rule (docs/architecture.md, "Reductions").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data_plane/collective.h"
#include "ops/reduce/halving.h"

namespace hyper_parallel::shmem::ops {

/// The call's element type, operator and elements (`input_bytes` / the element's size): the
/// dtype and operator checked (CheckReducible), the caller's element size the dtype's, and the
/// input a whole number of elements.
Status CheckReductionCall(const data_plane::CollectiveCall& call, std::string_view operation,
                          ElementType* type, ReduceOp* op);

/// The collective unit both reductions are. Local checks: CheckReductionCall, the unit's own
/// size and overlap rules (CheckSizes), then the layout of the passes. Peers agree on the bytes,
/// the dtype, the output's offset and the operator (arguments[0], a ReduceOp). The kernel is
/// RunReduction.
class ReductionUnit : public data_plane::Collective {
 public:
  Status Check(const data_plane::CollectiveCall& call) const final;
  unsigned AgreedFields() const final {
    return data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset |
           data_plane::kAgreeArguments;
  }
  std::string_view ArgumentName(int index) const final { return index == 0 ? "op" : ""; }
  std::string ArgumentValue(int index, std::int64_t value) const final;
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const final;

 protected:
  explicit constexpr ReductionUnit(ReductionKind kind) : kind_(kind) {}
  /// The unit's rules for the input's and the output's sizes and overlap, checked once the
  /// dtype and the operator passed.
  virtual Status CheckSizes(const data_plane::CollectiveCall& call) const = 0;

 private:
  // The elements each member reduces: its whole input (all_reduce) or one member's block of it
  // (reduce_scatter).
  std::uint64_t Elements(std::uint64_t input_bytes, int group_size, ElementType type) const;

  ReductionKind kind_;
};

}  // namespace hyper_parallel::shmem::ops
