// barrier: a collective unit (data_plane/collective.h) with no operand and no kernel. Every
// member publishes its descriptor after every write it made before and reads every member's
// (the backend's exchange), so the agreement alone is the barrier: afterwards every member's
// earlier puts are visible everywhere.
//
// Thread-safety: immutable.
#pragma once

#include "data_plane/collective.h"

namespace hyper_parallel::shmem::ops {

class Barrier final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "barrier"; }
  bool TakesOperands() const override { return false; }
  Status Check(const data_plane::CollectiveCall&) const override { return Status::Ok(); }
  unsigned AgreedFields() const override { return 0; }
  bool HasKernel() const override { return false; }
  Status Run(data_plane::KernelApi&, const data_plane::CollectivePlan&) const override {
    return Status::Ok();
  }
};

}  // namespace hyper_parallel::shmem::ops
