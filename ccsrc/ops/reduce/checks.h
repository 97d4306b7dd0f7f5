// The local checks the reductions share (all_reduce, reduce_scatter): the dtype and operator,
// and the element count, before the layout of their passes.
#pragma once

#include "data_plane/collective.h"
#include "ops/reduce/halving.h"

namespace hyper_parallel::shmem::ops {

/// The call's element type, operator and elements (`input_bytes` / the element's size): the
/// dtype and operator checked (CheckReducible), the caller's element size the dtype's, and the
/// input a whole number of elements.
Status CheckReductionCall(const data_plane::CollectiveCall& call, std::string_view operation,
                          ElementType* type, ReduceOp* op);

}  // namespace hyper_parallel::shmem::ops
